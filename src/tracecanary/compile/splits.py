"""A canary's all_to_allv send matrices: the ``splits`` stream, one matrix per logical
occurrence, exact.

An all_to_allv's matrix (``program.SPLITS_COLUMN``) changes from step to step in a
Mixture-of-Experts program; it is not a signature field, so the steps still repeat in the
structure and a reduced execution can skip some, while every occurrence keeps its own
matrix here. Format (present only in a canary of a source with splits)::

    {"values": [matrix, ...], "records": [[code, count], ...]}

``values`` the distinct matrices in order of first appearance; ``records`` run lengths
over the logical occurrences in order, ``code`` an index into ``values`` or -1 for an
occurrence without splits, ``count`` >= 1, the counts adding up to the occurrences. An
occurrence with a matrix has as ``bytes`` its largest member's send buffer (the largest
row total times the element size of its dtype), which expansion derives from it.
"""

from __future__ import annotations

import numpy as np

from tracecanary.errors import InputError
from tracecanary.formats.vocab import DTYPE_BYTES

FIELD = "splits"


def encode_splits(matrices: np.ndarray) -> dict:
    """The stream of ``matrices`` (one text per occurrence, "" for none)."""
    index: dict[str, int] = {}
    records: list[list[int]] = []
    for text in matrices.tolist():
        code = -1 if text == "" else index.setdefault(text, len(index))
        if records and records[-1][0] == code:
            records[-1][1] += 1
        else:
            records.append([code, 1])
    return {"values": list(index), "records": records}


def decode_splits(stream: dict, n: int) -> tuple[np.ndarray, tuple[str, ...]]:
    """(code per logical occurrence, -1 where none; the matrices) of a ``splits`` stream;
    refuses (InputError naming the field) one whose codes or counts do not fit ``n``
    occurrences."""
    values = tuple(stream["values"])
    records = stream["records"]
    codes = np.array([int(code) for code, _ in records], dtype=np.int64)
    counts = np.array([int(count) for _, count in records], dtype=np.int64)
    if len(codes) and (codes.min() < -1 or codes.max() >= len(values) or counts.min() < 1):
        raise InputError("splits records refer to no matrix or count nothing", field=FIELD)
    if int(counts.sum()) != n:
        raise InputError(
            f"splits records cover {int(counts.sum())} occurrences, not {n}", field=FIELD
        )
    return np.repeat(codes, counts), values


def split_bytes(canary: dict, sig_ids: np.ndarray, codes: np.ndarray, nbytes: np.ndarray):
    """``nbytes`` (per occurrence, of signatures ``sig_ids``) with every occurrence that
    has a matrix (``codes`` >= 0, into ``canary["splits"]["values"]``) given its largest
    member's send buffer: the largest row total of its matrix times the element size of
    its signature's dtype."""
    matrices = canary[FIELD]["values"]
    if not len(codes) or codes.max() < 0:
        return nbytes
    largest = np.array(
        [max(sum(int(v) for v in row.split(",")) for row in m.split(";")) for m in matrices],
        dtype=np.int64,
    )
    has = codes >= 0
    sizes = [DTYPE_BYTES.get(sig["dtype"], 0) for sig in canary["signatures"]]
    element = np.array(sizes, dtype=np.int64)[sig_ids[has]]
    out = np.array(nbytes, dtype=np.int64, copy=True)
    out[has] = largest[codes[has]] * element
    return out
