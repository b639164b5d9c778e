"""Simulator throughput: the vectorized engine on a >= 1M-occurrence program, per default
configuration, against the plain per-event reference implementation of the tests
(tests/test_sim_support.py) measured in the same run.

The reference is a Python loop per occurrence; running it on 1M occurrences x 5
configurations would take minutes, so it is timed on a slice of the same generator
(``REF_OCCURRENCES`` occurrences) and its per-occurrence time is extrapolated; the row
notes say so. Fast and reference outputs are checked equal on that slice first.
"""

from __future__ import annotations

import importlib.util
import time

import numpy as np

from bench.common import REPO, median_time, row, self_peak_rss_mb

FULL_OCCURRENCES = 1 << 20
QUICK_OCCURRENCES = 200_000
REF_OCCURRENCES = 20_000
QUICK_REF_OCCURRENCES = 5_000
TARGET_RATE = 1_000_000
TARGET_RATIO = 20.0


def synthetic_program(n: int, seed: int = 7):
    """A decode-like program: 16 ranks, 4 tensor-parallel groups of 4, a world group,
    point-to-point pairs; two streams; bursts (small gaps) and idle gaps; measured skew
    and overlap on most occurrences."""
    from tracecanary.program import make_program

    rng = np.random.default_rng(seed)
    groups = ["tp0", "tp1", "tp2", "tp3", "world", "p2p:0->4", "p2p:8->12"]
    group_ranks = [
        list(range(0, 4)),
        list(range(4, 8)),
        list(range(8, 12)),
        list(range(12, 16)),
        list(range(16)),
        [0, 4],
        [8, 12],
    ]
    gidx = rng.choice(len(groups), size=n, p=[0.2, 0.2, 0.2, 0.2, 0.1, 0.05, 0.05])
    sizes = np.array([len(r) for r in group_ranks])[gidx]
    is_p2p = gidx >= 5
    ops = np.where(
        is_p2p,
        "send",
        rng.choice(
            ["all_reduce", "all_gather", "reduce_scatter", "broadcast"],
            size=n,
            p=[0.6, 0.2, 0.15, 0.05],
        ),
    )
    nbytes = np.where(
        rng.random(n) < 0.8,
        rng.choice([1 << 12, 1 << 16, 1 << 18], size=n),
        rng.choice([1 << 22, 1 << 24, 1 << 26], size=n),
    )
    gaps = np.where(
        rng.random(n) < 0.85,
        rng.integers(0, 5_000, size=n),
        rng.integers(100_000, 3_000_000, size=n),
    )
    gaps[0] = 0
    has_overlap = rng.random(n) < 0.7
    overlap = np.where(has_overlap, rng.integers(0, 400_000, size=n), 0)
    member_occ = np.repeat(np.arange(n), sizes)
    offsets = np.arange(member_occ.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    flat = np.concatenate([np.asarray(r) for r in group_ranks])
    starts = np.cumsum([0] + [len(r) for r in group_ranks])[:-1]
    member_rank = flat[starts[gidx][member_occ] + offsets]
    skew = rng.integers(0, 5_000, size=member_occ.size)
    return make_program(
        {
            "op": ops.astype(object),
            "bytes": nbytes,
            "dtype": np.full(n, "bfloat16", dtype=object),
            "group": np.asarray(groups, dtype=object)[gidx],
            "group_size": sizes,
            "root": np.where(ops == "broadcast", member_rank[np.cumsum(sizes) - sizes], -1),
            "phase": np.where(nbytes >= 1 << 22, "prefill", "decode").astype(object),
            "stream": np.where(rng.random(n) < 0.9, "0", "1").astype(object),
            "gap_ns": gaps,
            "overlap_ns": overlap,
            "has_overlap": has_overlap,
        },
        {"occ": member_occ, "rank": member_rank, "skew_ns": skew},
        world_size=16,
        skew_known=True,
    )


def _reference_module():
    spec = importlib.util.spec_from_file_location(
        "tc_sim_reference", REPO / "tests" / "test_sim_support.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(quick: bool) -> list[dict]:
    from tracecanary.sim.backends import load_backends
    from tracecanary.sim.engine import prepare, simulate

    n = QUICK_OCCURRENCES if quick else FULL_OCCURRENCES
    k = QUICK_REF_OCCURRENCES if quick else REF_OCCURRENCES
    repeats = 1 if quick else 3
    backends = load_backends(REPO / "config" / "backends.yaml")
    configs = backends.select()
    reference = _reference_module().reference_simulate

    small = synthetic_program(k)
    small_prep = prepare(small)
    ref_per_occ: dict[str, float] = {}
    for config in configs:
        start = time.perf_counter()
        ref = reference(small, config)
        ref_per_occ[config.name] = (time.perf_counter() - start) / k
        fast = simulate(small_prep, config)
        if (
            fast.latency_ns.tolist() != ref["latency_ns"]
            or fast.queue_wait_ns.tolist() != ref["queue_wait_ns"]
        ):
            raise RuntimeError(f"fast engine and reference disagree on {config.name}")

    program = synthetic_program(n)
    prep_seconds = median_time(lambda: prepare(program), repeats)
    prep = prepare(program)
    rows = []
    total_sim = 0.0
    for config in configs:
        seconds = median_time(lambda c=config: simulate(prep, c), repeats)
        total_sim += seconds
        rate = n / seconds
        ratio = (ref_per_occ[config.name] * n) / seconds
        rows.append(
            row(
                f"sim {n:,} occurrences, config {config.name}",
                round(rate),
                "occurrences/s",
                f"per-event reference (tests/test_sim_support.py), timed on {k:,} occurrences, extrapolated",
                round(1.0 / ref_per_occ[config.name]),
                round(ratio, 1),
                f">= {TARGET_RATE:,} occ/s and >= {TARGET_RATIO:g}x",
                bool(rate >= TARGET_RATE and ratio >= TARGET_RATIO),
                notes=f"median of {repeats}; simulate() only (prepare() once per program: {prep_seconds:.3f} s)",
            )
        )
    all_rate = n * len(configs) / (prep_seconds + total_sim)
    rows.append(
        row(
            f"sim {n:,} occurrences x {len(configs)} configs incl. prepare",
            round(all_rate),
            "occurrence-configs/s",
            "",
            None,
            None,
            f">= {TARGET_RATE:,}",
            bool(all_rate >= TARGET_RATE),
            peak_rss_mb=round(self_peak_rss_mb(), 1),
            notes=f"prepare {prep_seconds:.3f} s + simulate {total_sim:.3f} s",
        )
    )
    return rows


if __name__ == "__main__":
    import json

    print(json.dumps(run(quick=False), indent=1))
