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
    # the same pandas group reductions (mean, median) on the same frames as always, so
    # their floating-point results are unchanged; the rest is exact integer arithmetic or
    # numpy's percentile and standard deviation on each rung's samples, as before
    by_cycle = rows.groupby(["bytes", "cycle"], sort=True)
    per_cycle = pd.DataFrame(
        {
            "time_us": by_cycle["time_us"].mean(),
            "wrong": by_cycle["wrong"].sum(min_count=1),
            "line": by_cycle["line"].min(),
        }
    ).reset_index()
    by_rung = per_cycle.groupby("bytes", sort=True)["time_us"]
    median_us = by_rung.median().to_numpy(dtype=np.float64)
    mean_us = by_rung.mean().to_numpy(dtype=np.float64)
    bytes_ = per_cycle["bytes"].to_numpy(dtype=np.int64)
    time_us = per_cycle["time_us"].to_numpy(dtype=np.float64)
    starts = np.flatnonzero(np.r_[True, bytes_[1:] != bytes_[:-1]])
    n_cycles = np.diff(np.r_[starts, len(bytes_)]).astype(np.int64)
    p95_us, std_us = _rung_p95_and_std(time_us, starts)
    wrong = per_cycle["wrong"].astype("Int64").array
    checked = np.add.reduceat((~wrong.isna()).astype(np.int64), starts)
    wrong_sum = np.add.reduceat(wrong.fillna(0).to_numpy(dtype=np.int64), starts)
    wrong_total = pd.array(wrong_sum, dtype="Int64")
    wrong_total[checked == 0] = pd.NA
    rung_bytes = bytes_[starts]
    with np.errstate(divide="ignore", invalid="ignore"):  # 0/0 -> NaN, x/0 -> inf as pandas
        cv = std_us / mean_us * 100.0
    algbw = algbw_gbps(rung_bytes, median_us)
    failed = wrong_total.fillna(0).to_numpy(dtype=np.int64) > 0
    return pd.DataFrame(
        {
            "bytes": rung_bytes,
            "n_cycles": n_cycles,
            "median_us": median_us,
            "p95_us": p95_us,
            "wrong_total": wrong_total,
            "first_line": np.minimum.reduceat(per_cycle["line"].to_numpy(dtype=np.int64), starts),
            "cv_pct": cv,
            "unstable": pd.Series(
                [None if np.isnan(v) else bool(v > cv_max_pct) for v in cv], dtype=object
            ),
            "algbw_gbps": algbw,
            "busbw_gbps": algbw * busbw_factor(collective, world_size),
            "correctness_checked": checked > 0,
            "excluded": pd.Series(
                [
                    EXCLUDED_CORRECTNESS if f else (EXCLUDED_ZERO_BYTES if b == 0 else None)
                    for f, b in zip(failed, rung_bytes, strict=True)
                ],
                dtype=object,
            ),
        }
    )


def _rung_p95_and_std(time_us: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per rung (``time_us[starts[i]:starts[i + 1]]``): numpy's 95th percentile (linear
    interpolation) and sample standard deviation (NaN for one sample). Finite rungs with the
    same number of samples go through numpy together, one row each (the same values); a
    rung holding inf or NaN goes alone, so numpy warns about it in the same words."""
    sizes = np.diff(np.r_[starts, len(time_us)])
    p95 = np.empty(len(starts), dtype=np.float64)
    std = np.full(len(starts), np.nan, dtype=np.float64)
    finite = np.logical_and.reduceat(np.isfinite(time_us), starts)
    for size in np.unique(sizes[finite]):
        which = np.flatnonzero(finite & (sizes == size))
        samples = time_us[starts[which][:, None] + np.arange(size)[None, :]]
        p95[which] = np.percentile(samples, 95, axis=1)
        if size > 1:
            std[which] = np.std(samples, axis=1, ddof=1)
    for i in np.flatnonzero(~finite):
        rung = time_us[starts[i] : starts[i] + sizes[i]]
        p95[i] = float(np.percentile(rung, 95))
        if len(rung) > 1:
            std[i] = float(np.std(rung, ddof=1))
    return p95, std
