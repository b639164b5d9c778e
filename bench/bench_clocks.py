"""Derived clock calibration (``tracecanary.clocks.derive``): time and peak memory to
calibrate 1M collectives over 64 clock domains, beside the matching of the same events
(``matching.build_program``, what every merge and load already runs) measured in the same
run.

Input (generated in memory, seeded): 64 hosts (one clock each, true offsets up to +-1 s)
of 2 ranks; 1M collectives, each an all_reduce, all_gather, broadcast or reduce over a
group of 8 ranks on 4 hosts (16 fixed groups), plus send/recv pairs between hosts (5%);
every member arrives with random skew and completes at the last arrival plus a transfer
time, so every true offset is known. The figure is the derivation alone (constraints +
feasibility solve + document) on the normalized events; the run checks that every true
offset lies inside its derived interval.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from bench.common import row, self_peak_rss_mb

FULL_COLLECTIVES = 1_000_000
QUICK_COLLECTIVES = 100_000
HOSTS = 64
RANKS_PER_HOST = 2
GROUP_HOSTS = 4
TARGET_RATIO = 3.0  # calibration costs at most 3 matching passes over the same events


def synthetic_events(n: int, seed: int = 11) -> tuple[pd.DataFrame, dict[int, str], np.ndarray]:
    """(normalized events, rank -> clock, true offset per host: ref = local + offset)."""
    rng = np.random.default_rng(seed)
    ranks = HOSTS * RANKS_PER_HOST
    host_of = np.arange(ranks) // RANKS_PER_HOST
    offsets = np.concatenate(([0], rng.integers(-(10**9), 10**9, size=HOSTS - 1)))
    # 16 groups of 8 ranks: hosts 4g..4g+3, both ranks of each
    n_groups = HOSTS // GROUP_HOSTS
    members = np.arange(ranks).reshape(n_groups, GROUP_HOSTS * RANKS_PER_HOST)
    size = members.shape[1]
    is_p2p = rng.random(n) < 0.05
    gid = rng.integers(0, n_groups, size=n)
    ops = rng.choice(["all_reduce", "all_gather", "broadcast", "reduce"], size=n)
    t0 = 10**12
    occ_start = t0 + np.cumsum(rng.integers(2_000, 60_000, size=n))
    # collectives: 8 members each
    coll = np.flatnonzero(~is_p2p)
    c_rank = members[gid[coll]].ravel()
    c_occ = np.repeat(coll, size)
    c_arrive = occ_start[c_occ] + rng.integers(0, 20_000, size=c_occ.size)
    c_last = np.maximum.reduceat(c_arrive, np.arange(0, c_occ.size, size))
    c_end = np.repeat(c_last + rng.integers(3_000, 30_000, size=coll.size), size)
    # send/recv pairs between two random hosts
    p2p = np.flatnonzero(is_p2p)
    src = rng.integers(0, ranks, size=p2p.size)
    dst = (src + RANKS_PER_HOST * rng.integers(1, HOSTS, size=p2p.size)) % ranks
    s_arrive = occ_start[p2p]
    r_arrive = occ_start[p2p] + rng.integers(0, 20_000, size=p2p.size)
    r_end = np.maximum(s_arrive, r_arrive) + rng.integers(3_000, 30_000, size=p2p.size)
    frame = pd.DataFrame(
        {
            "rank": np.concatenate([c_rank, src, dst]),
            "op": np.concatenate(
                [np.repeat(ops[coll], size), np.full(p2p.size, "send"), np.full(p2p.size, "recv")]
            ).astype(object),
            "group": np.concatenate(
                [np.repeat(gid[coll], size).astype(str), np.full(2 * p2p.size, "world")]
            ).astype(object),
            "root": np.concatenate(
                [
                    np.repeat(members[gid[coll], 0], size).astype(np.float64),
                    np.full(2 * p2p.size, np.nan),
                ]
            ),
            "peer": np.concatenate(
                [np.full(c_rank.size, np.nan), dst.astype(float), src.astype(float)]
            ),
            "true_ns": np.concatenate([c_arrive, s_arrive, r_arrive]),
            "true_end_ns": np.concatenate([c_end, s_arrive + 1_000, r_end]),
            "order": np.concatenate([c_occ, p2p, p2p]),
        }
    )
    frame = frame.sort_values(["rank", "order"], kind="stable").reset_index(drop=True)
    host = host_of[frame["rank"].to_numpy()]
    frame["issue_ns"] = frame["true_ns"].to_numpy() - offsets[host]  # local = ref - offset
    frame["latency_ns"] = frame["true_end_ns"].to_numpy() - frame["true_ns"].to_numpy()
    frame["seq"] = frame.groupby("rank").cumcount()
    frame["bytes"] = np.int64(1 << 20)
    frame["dtype"] = "bfloat16"
    frame["overlap_ns"] = np.nan
    frame = frame.drop(columns=["true_ns", "true_end_ns", "order"])
    clocks = {r: f"host{int(host_of[r]):02d}" for r in range(ranks)}
    return frame, clocks, offsets


def run(quick: bool) -> list[dict]:
    from tracecanary.clocks.derive import derive_calibration
    from tracecanary.matching import build_program

    n = QUICK_COLLECTIVES if quick else FULL_COLLECTIVES
    frame, clocks, offsets = synthetic_events(n)
    events = len(frame)
    members = np.arange(len(clocks)).reshape(HOSTS // GROUP_HOSTS, -1)
    groups = {str(g): members[g].tolist() for g in range(members.shape[0])}
    groups["world"] = sorted(clocks)
    start = time.perf_counter()
    doc = derive_calibration(frame, clocks, drift="none")
    seconds = time.perf_counter() - start
    for clock in doc["clocks"]:
        lo, hi = clock["offset_interval_ns"]
        true = int(offsets[int(clock["clock"].removeprefix("host"))])
        if not lo <= true <= hi:
            raise RuntimeError(f"true offset of {clock['clock']} outside [{lo}, {hi}]")
    if doc.get("unknown_clocks") or len(doc["clocks"]) != HOSTS:
        raise RuntimeError("a clock was left unknown")
    rss = self_peak_rss_mb()
    start = time.perf_counter()
    build_program(frame, groups=groups, world_size=len(clocks), clocks=clocks)
    matching_seconds = time.perf_counter() - start
    widest = max(c["uncertainty_ns"] for c in doc["clocks"])
    return [
        row(
            f"calibrate-clocks {n:,} collectives, {HOSTS} clock domains ({events:,} events)",
            round(seconds, 2),
            "s",
            "matching the same events (build_program), same run",
            round(matching_seconds, 2),
            round(seconds / matching_seconds, 2),
            f"ratio <= {TARGET_RATIO:g}",
            seconds / matching_seconds <= TARGET_RATIO,
            peak_rss_mb=round(rss, 1),
            notes=(
                f"every true offset inside its interval; widest uncertainty {widest:,} ns; "
                "peak RSS is the process's (the events frame included) before matching ran"
            ),
        )
    ]
