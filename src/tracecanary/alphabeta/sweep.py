"""TraceCanary ladder sweep archives -> ladder rows (the physical-replay issue writes them).

An archive is a directory holding:
    attempt.json   {"format": "tracecanary.attempt/v1", "kind": "sweep",
                    "status": "complete" | "failed", ...}
    rows.parquet   one row per (rung, cycle, iteration, rank): collective (str), dtype (str),
                   world_size (int64), bytes (int64, nccl-tests size = total buffer bytes),
                   cycle (int64), iteration (int64), rank (int64), latency_ns (int64),
                   correct (bool)

nccl-tests semantics: per iteration the latency is the max over ranks; a cycle's time is
the mean of its iterations; ``wrong`` counts the (iteration, rank) rows not correct, so a
rung with any incorrect row is excluded downstream as ``correctness_failed``.

Refusals (exit 2): status other than complete (a run where every rank finished but some rows
failed the data check is read: those rungs are excluded as correctness_failed), a rows.parquet whose SHA-256 differs from
the one attempt.json records under ``files`` (when it records one), wrong format/kind, a missing or mistyped
column, nulls, an unknown collective, non-positive latency, a rank outside the world, a
duplicate or missing rank in an iteration, and mixed world sizes within one
(collective, dtype) ladder. Errors name ``rows.parquet``, the 1-based row and the column.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tracecanary.alphabeta.ladder import COLLECTIVES, make_ladder
from tracecanary.canonical import sha256_file
from tracecanary.errors import ImportRefused, InputError
from tracecanary.formats.ids import ATTEMPT_FORMAT
from tracecanary.limits import load_json

SWEEP_COLUMNS: dict[str, str] = {
    "collective": "string",
    "dtype": "string",
    "world_size": "integer",
    "bytes": "integer",
    "cycle": "integer",
    "iteration": "integer",
    "rank": "integer",
    "latency_ns": "integer",
    "correct": "bool",
}


def is_sweep_archive(path: Path) -> bool:
    return path.is_dir() and (path / "attempt.json").is_file()


def _type_ok(arrow_type: pa.DataType, want: str) -> bool:
    if want == "string":
        return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
    if want == "integer":
        return pa.types.is_integer(arrow_type)
    return pa.types.is_boolean(arrow_type)


def read_attempt(path: Path) -> dict:
    """Read and check ``attempt.json``; refuse anything but a complete sweep."""
    attempt_file = path / "attempt.json"
    try:
        attempt = load_json(attempt_file)
    except InputError as err:  # not JSON, or over the resource policy
        raise ImportRefused(err.message, file=str(attempt_file), field="json") from None
    if not isinstance(attempt, dict):
        raise ImportRefused("top level is not an object", file=str(attempt_file), field="json")
    if attempt.get("format") != ATTEMPT_FORMAT:
        raise ImportRefused(
            f"format {attempt.get('format')!r} is not {ATTEMPT_FORMAT}",
            file=str(attempt_file),
            field="format",
        )
    if attempt.get("kind") != "sweep":
        raise ImportRefused(
            f"kind {attempt.get('kind')!r} is not 'sweep'", file=str(attempt_file), field="kind"
        )
    correctness_only = (
        attempt.get("status") == "failed"
        and (attempt_file.parent / "rows.parquet").is_file()
        and (attempt.get("correctness") or {}).get("incorrect_rows", 0) > 0
    )
    # every rank finished and only the data check failed: the rows are evidence, and the
    # failed rungs are excluded as correctness_failed below
    if attempt.get("status") != "complete" and not correctness_only:
        raise ImportRefused(
            f"status {attempt.get('status')!r}: only a complete sweep is evidence for a fit",
            file=str(attempt_file),
            field="status",
        )
    return attempt


def read_sweep(path: Path, *, input_index: int, source: str) -> tuple[pd.DataFrame, dict]:
    """Ladder rows of one sweep archive plus a small metadata dict."""
    attempt = read_attempt(path)
    rows_file = path / "rows.parquet"
    rf = str(rows_file)
    if not rows_file.is_file():
        raise ImportRefused("missing rows.parquet", file=rf)
    recorded = attempt.get("files")
    if isinstance(recorded, dict) and "rows.parquet" in recorded:
        actual = sha256_file(rows_file)
        if recorded["rows.parquet"] != actual:
            raise ImportRefused(
                f"SHA-256 {actual} differs from {recorded['rows.parquet']!r} recorded in attempt.json",
                file=rf,
                field="files",
            )
    try:
        table = pq.read_table(rows_file)
    except (pa.ArrowException, OSError) as err:
        raise ImportRefused(f"unreadable Parquet: {err}", file=rf) from None
    for name, want in SWEEP_COLUMNS.items():
        if name not in table.column_names:
            raise ImportRefused(f"missing column {name}", file=rf, field=name)
        if not _type_ok(table.schema.field(name).type, want):
            raise ImportRefused(
                f"column {name} has type {table.schema.field(name).type}, expected {want}",
                file=rf,
                field=name,
            )
        if table.column(name).null_count:
            first = int(
                np.flatnonzero(table.column(name).is_null().to_numpy(zero_copy_only=False))[0]
            )
            raise ImportRefused("null value", file=rf, record=first + 1, field=name)
    if table.num_rows == 0:
        raise ImportRefused("no rows", file=rf)
    frame = pd.DataFrame(
        {
            name: table.column(name).to_numpy(zero_copy_only=False)
            if SWEEP_COLUMNS[name] != "integer"
            else table.column(name).cast(pa.int64()).to_numpy()
            for name in SWEEP_COLUMNS
        }
    )
    frame["_row"] = np.arange(1, len(frame) + 1, dtype=np.int64)

    def refuse_at(mask: np.ndarray, message: str, column: str) -> None:
        if mask.any():
            first = int(np.flatnonzero(mask)[0])
            value = frame[column].iloc[first]
            raise ImportRefused(
                f"{message} (value {value!r})", file=rf, record=first + 1, field=column
            )

    refuse_at(~frame["collective"].isin(COLLECTIVES).to_numpy(), "unknown collective", "collective")
    refuse_at(frame["world_size"].to_numpy() < 1, "world size must be >= 1", "world_size")
    refuse_at(frame["bytes"].to_numpy() < 0, "bytes must be >= 0", "bytes")
    refuse_at(frame["latency_ns"].to_numpy() <= 0, "latency must be > 0", "latency_ns")
    refuse_at(frame["cycle"].to_numpy() < 0, "cycle must be >= 0", "cycle")
    refuse_at(frame["iteration"].to_numpy() < 0, "iteration must be >= 0", "iteration")
    ranks = frame["rank"].to_numpy()
    refuse_at(
        (ranks < 0) | (ranks >= frame["world_size"].to_numpy()), "rank outside the world", "rank"
    )

    ladder_ws = frame.groupby(["collective", "dtype"], sort=False)["world_size"].transform("first")
    refuse_at(
        (frame["world_size"] != ladder_ws).to_numpy(),
        "mixed world sizes in one ladder (collective, dtype)",
        "world_size",
    )

    it_keys = ["collective", "dtype", "world_size", "bytes", "cycle", "iteration"]
    dup = frame.duplicated([*it_keys, "rank"], keep="first").to_numpy()
    refuse_at(dup, "duplicate rank in one iteration", "rank")
    per_iter = frame.groupby(it_keys, sort=True).agg(
        latency_ns=("latency_ns", "max"),
        n_ranks=("rank", "size"),
        incorrect=("correct", lambda s: int((~s.astype(bool)).sum())),
        first_row=("_row", "min"),
    )
    per_iter = per_iter.reset_index()
    short = per_iter["n_ranks"].to_numpy() != per_iter["world_size"].to_numpy()
    if short.any():
        i = int(np.flatnonzero(short)[0])
        r = per_iter.iloc[i]
        raise ImportRefused(
            f"iteration has {int(r['n_ranks'])} of {int(r['world_size'])} ranks (missing rank rows)",
            file=rf,
            record=int(r["first_row"]),
            field="rank",
        )
    per_cycle = per_iter.groupby(
        ["collective", "dtype", "world_size", "bytes", "cycle"], sort=True
    ).agg(
        latency_ns=("latency_ns", "mean"),
        wrong=("incorrect", "sum"),
        line=("first_row", "min"),
    )
    per_cycle = per_cycle.reset_index()
    n = len(per_cycle)
    ladder = make_ladder(
        {
            "collective": per_cycle["collective"].to_numpy(),
            "dtype": per_cycle["dtype"].to_numpy(),
            "world_size": per_cycle["world_size"].to_numpy(),
            "bytes": per_cycle["bytes"].to_numpy(),
            "cycle": per_cycle["cycle"].to_numpy(),
            "time_us": per_cycle["latency_ns"].to_numpy(dtype=np.float64) / 1e3,
            "wrong": per_cycle["wrong"].to_numpy(dtype=np.int64),
            "source": [source] * n,
            "line": per_cycle["line"].to_numpy(),
            "input": [input_index] * n,
            "run": [0] * n,
            "placement": ["unspecified"] * n,
            "op": ["unspecified"] * n,
        }
    )
    meta = {
        "n_rows": int(table.num_rows),
        "attempt": {k: attempt[k] for k in ("format", "kind", "status") if k in attempt},
    }
    return ladder, meta
