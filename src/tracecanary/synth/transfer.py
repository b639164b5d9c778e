"""The synthetic generators' one model of how long a collective takes once its last
member has arrived (``synth decode`` and ``synth training`` both record each event's
``latency_ns`` from it)."""

from __future__ import annotations

import numpy as np

TRANSFER_BASE_NS = 4_000  # launch and synchronisation cost of one collective
TRANSFER_BYTES_PER_NS = 100  # bus bandwidth, 100 GB/s


def transfer_ns(op: str, nbytes: np.ndarray, ranks: int) -> np.ndarray:
    """Time from the last member's arrival to completion (ns): a fixed cost plus the bus
    bytes (nccl-tests bus factor: 2(n-1)/n for all_reduce, (n-1)/n for the other
    collectives, 1 for send/recv) over ``TRANSFER_BYTES_PER_NS``."""
    if op in ("send", "recv"):
        factor = 1.0
    elif op == "all_reduce":
        factor = 2 * (ranks - 1) / ranks
    else:
        factor = (ranks - 1) / ranks
    bus = np.ceil(np.asarray(nbytes, dtype=np.float64) * factor / TRANSFER_BYTES_PER_NS)
    return TRANSFER_BASE_NS + bus.astype(np.int64)
