"""The one internal ladder table, unit conversions and per-rung statistics.

Every input kind (nccl-tests stdout, nccl-tests ``-J`` JSON, TraceCanary sweep archives)
becomes the same table: one row per (rung, cycle) sample.

Columns of a ladder table (``LADDER_COLUMNS``):
    collective  str     all_reduce | all_gather | reduce_scatter | all_to_all | broadcast |
                        reduce | sendrecv | scatter | gather (``LADDER_COLLECTIVES``)
    dtype       str     element type as the source names it (float, bfloat16, ...)
    world_size  int64   number of ranks
    bytes       int64   nccl-tests "size": the total buffer bytes of the operation
    cycle       int64   0-based repetition of the whole ladder (nccl-tests ``-N``)
    time_us     float64 one sample of the rung's latency, microseconds (nccl-tests: the
                        printed average over iterations; sweeps: mean over iterations of
                        the max over ranks)
    wrong       Int64   wrong elements reported for this sample; <NA> = not checked
    source      str     the input path as given
    line        int64   where the sample comes from: 1-based line (stdout), 1-based index
                        into ``results`` (JSON), 1-based first row of rows.parquet (sweep)
    input       int64   0-based index of the input on the command line
    run         int64   0-based run within the input (several nccl-tests runs in one file)
    placement   str     out_of_place | in_place | unspecified (sweeps do not say)
    op          str     reduction op (and root for rooted collectives) as printed,
                        e.g. "sum", "none", "sum@root0"; "unspecified" for sweeps

A *ladder* is the set of rows sharing ``LADDER_KEY``; it is never merged with another
run, so two runs under different settings are never averaged into one line.

Units: bandwidths are decimal GB/s (1e9 bytes per second): ``algbw = bytes / time``;
``busbw = algbw * factor`` with the nccl-tests factor per collective.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracecanary.formats.vocab import LADDER_COLLECTIVES, ROOTED_OPS

COLLECTIVES = LADDER_COLLECTIVES
PER_RANK_COUNT: frozenset[str] = frozenset(
    {"all_gather", "reduce_scatter", "all_to_all", "scatter", "gather"}
)
"""Collectives whose nccl-tests ``count`` column is per rank: size = n x count x element
(all_gather, gather: the gathered buffer; reduce_scatter, scatter: the buffer split among
the ranks; all_to_all: one rank's whole send buffer)."""
ROOTED_COLLECTIVES: frozenset[str] = frozenset({*ROOTED_OPS, "scatter", "gather"})
"""Collectives nccl-tests prints with a root (TraceCanary sweeps use root 0)."""

LADDER_COLUMNS: dict[str, str] = {
    "collective": "str",
    "dtype": "str",
    "world_size": "int64",
    "bytes": "int64",
    "cycle": "int64",
    "time_us": "float64",
    "wrong": "Int64",
    "source": "str",
    "line": "int64",
    "input": "int64",
    "run": "int64",
    "placement": "str",
    "op": "str",
}

LADDER_KEY: tuple[str, ...] = (
    "input",
    "run",
    "collective",
    "dtype",
    "world_size",
    "placement",
    "op",
)

PLACEMENTS: tuple[str, ...] = ("out_of_place", "in_place", "unspecified")

EXCLUDED_CORRECTNESS = "correctness_failed"
EXCLUDED_ZERO_BYTES = "zero_bytes"


def busbw_factor(collective: str, world_size: int) -> float:
    """nccl-tests bus-bandwidth factor (the one definition; sweeps and fits use it):
    all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all, scatter, gather (n-1)/n;
    broadcast, reduce, sendrecv 1."""
    n = int(world_size)
    if n < 1:
        raise ValueError(f"world size must be >= 1, got {n}")
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in PER_RANK_COUNT:
        return (n - 1) / n
    if collective in ("broadcast", "reduce", "sendrecv"):
        return 1.0
    raise ValueError(f"unknown collective {collective!r}")


def algbw_gbps(bytes_: np.ndarray | float, time_us: np.ndarray | float) -> np.ndarray | float:
    """Algorithm bandwidth in decimal GB/s: bytes / (time_us * 1e-6 s) / 1e9."""
    return np.asarray(bytes_, dtype=np.float64) / (np.asarray(time_us, dtype=np.float64) * 1e3)


def make_ladder(columns: dict) -> pd.DataFrame:
    """Build a ladder table from column arrays, with the exact column set and dtypes."""
    missing = [c for c in LADDER_COLUMNS if c not in columns]
    if missing:
        raise ValueError(f"ladder columns missing: {missing}")
    frame = pd.DataFrame({c: columns[c] for c in LADDER_COLUMNS})
    return frame.astype(LADDER_COLUMNS)


def empty_ladder() -> pd.DataFrame:
    return make_ladder({c: [] for c in LADDER_COLUMNS})


def iter_ladders(ladder: pd.DataFrame):
    """Yield ``(key dict, rows)`` per ladder in a deterministic order (input, run, then
    first appearance), rows sorted by (bytes, cycle, line)."""
    if ladder.empty:
        return
    order = ladder.reset_index(drop=True)
    order["_pos"] = np.arange(len(order))
    firsts = order.groupby(list(LADDER_KEY), sort=False, dropna=False)["_pos"].min()
    for key in firsts.sort_values(kind="stable").index:
        mask = np.ones(len(order), dtype=bool)
        for name, value in zip(LADDER_KEY, key, strict=True):
            mask &= (order[name] == value).to_numpy()
        rows = order.loc[mask].drop(columns="_pos")
        rows = rows.sort_values(["bytes", "cycle", "line"], kind="stable").reset_index(drop=True)
        yield dict(zip(LADDER_KEY, key, strict=True)), rows


def summarize_rungs(rows: pd.DataFrame, *, cv_max_pct: float) -> pd.DataFrame:
    """Per-rung statistics of one ladder, sorted by bytes.

    Samples of one (bytes, cycle) are first averaged (nccl-tests prints several rows of one
    size when alignment rounds different requested sizes to the same buffer), so every
    statistic is over cycles.

    Columns: bytes, n_cycles, median_us, p95_us (linear interpolation), cv_pct (sample
    standard deviation / mean * 100; NaN with fewer than 2 cycles), unstable (True/False,
    None when cv_pct is NaN), algbw_gbps and busbw_gbps (from the median), wrong_total
    (<NA> when never checked), correctness_checked, excluded (None, "correctness_failed"
    when any sample reported wrong elements, "zero_bytes" for 0-byte rungs: NCCL returns
    without communicating, so the time is harness overhead), first_line.
    """
    if rows.empty:
        raise ValueError("empty ladder")
    collective = rows["collective"].iloc[0]
    world_size = int(rows["world_size"].iloc[0])
    per_cycle = rows.groupby(["bytes", "cycle"], sort=True).agg(
        time_us=("time_us", "mean"),
        wrong=("wrong", lambda s: s.sum(min_count=1)),
        line=("line", "min"),
    )
    per_cycle = per_cycle.reset_index()
    grouped = per_cycle.groupby("bytes", sort=True)
    stats = grouped.agg(
        n_cycles=("time_us", "size"),
        median_us=("time_us", "median"),
        p95_us=("time_us", lambda s: float(np.percentile(s.to_numpy(), 95))),
        mean_us=("time_us", "mean"),
        std_us=("time_us", lambda s: float(np.std(s.to_numpy(), ddof=1)) if len(s) > 1 else np.nan),
        wrong_total=("wrong", lambda s: s.astype("Int64").sum(min_count=1)),
        first_line=("line", "min"),
    ).reset_index()
    stats["wrong_total"] = stats["wrong_total"].astype("Int64")
    cv = (stats["std_us"] / stats["mean_us"] * 100.0).to_numpy(dtype=np.float64)
    stats["cv_pct"] = cv
    stats["unstable"] = pd.Series(
        [None if np.isnan(v) else bool(v > cv_max_pct) for v in cv], dtype=object, index=stats.index
    )
    stats["algbw_gbps"] = algbw_gbps(stats["bytes"].to_numpy(), stats["median_us"].to_numpy())
    stats["busbw_gbps"] = stats["algbw_gbps"] * busbw_factor(collective, world_size)
    stats["correctness_checked"] = stats["wrong_total"].notna().to_numpy()
    failed = stats["wrong_total"].fillna(0).to_numpy(dtype=np.int64) > 0
    zero = stats["bytes"].to_numpy() == 0
    stats["excluded"] = pd.Series(
        [
            EXCLUDED_CORRECTNESS if f else (EXCLUDED_ZERO_BYTES if z else None)
            for f, z in zip(failed, zero, strict=True)
        ],
        dtype=object,
        index=stats.index,
    )
    return stats.drop(columns=["mean_us", "std_us"])
