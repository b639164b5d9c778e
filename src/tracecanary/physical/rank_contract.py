"""What a rank of ``tracecanary.physical.worker`` writes and how it is told to fail, for
the launcher side that reads it without importing torch: the Parquet row schemas of a
replay pass and of a ladder rung, the prefix of the progress lines the launcher echoes,
the ``--fault`` specs and the exit code of a killed rank."""

from __future__ import annotations

import pyarrow as pa

KILL_EXIT_CODE = 86
PROGRESS_PREFIX = "[tracecanary] "

REPLAY_ROW_SCHEMA = pa.schema(
    [
        ("occ", pa.int64()),
        ("marker", pa.string()),
        ("op", pa.string()),
        ("bytes", pa.int64()),
        ("dtype", pa.string()),
        ("weight", pa.float64()),
        ("phase", pa.string()),
        ("iteration", pa.int64()),
        ("rank", pa.int64()),
        ("host", pa.string()),
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("latency_ns", pa.int64()),
        ("correct", pa.bool_()),
        ("fused_bucket", pa.int64()),
        ("entry", pa.int64()),
        ("pg_id", pa.int64()),
    ]
)

SWEEP_ROW_SCHEMA = pa.schema(
    [
        ("collective", pa.string()),
        ("dtype", pa.string()),
        ("world_size", pa.int64()),
        ("bytes", pa.int64()),
        ("cycle", pa.int64()),
        ("iteration", pa.int64()),
        ("rank", pa.int64()),
        ("latency_ns", pa.int64()),
        ("correct", pa.bool_()),
    ]
)


def parse_fault(spec: str | None) -> tuple[str, int] | None:
    """``kill-rank=R`` | ``hang-rank=R`` | ``corrupt-rank=R`` -> (kind, R); None if absent."""
    if not spec:
        return None
    kind, _, value = spec.partition("=")
    if kind not in ("kill-rank", "hang-rank", "corrupt-rank") or not value.isdigit():
        raise ValueError(f"bad fault spec {spec!r} (kill-rank=R, hang-rank=R, corrupt-rank=R)")
    return kind, int(value)
