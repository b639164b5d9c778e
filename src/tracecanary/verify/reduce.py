"""The baseline this tool refuses: ddmin with a ranking-only oracle.

Classic delta debugging (Zeller and Hildebrandt, 2002): split the surviving collective
occurrences into n chunks, keep any chunk (subset) or any complement that still
satisfies the oracle, otherwise double the granularity, until nothing more can be
removed. The oracle compiles the survivors (lossless), replays them under every
configuration and accepts iff every pairwise ranking (each pair of configurations, on
each of p50, p95, p99 and mean latency) matches the full trace's under the tie
tolerance: 40 decisions for 5 configurations.

It is kept to show why a ranking is too weak a property: it preserves the decision
while deleting the workload. ``reduce_trace`` counts oracle calls (repeated subsets are
answered from a cache and not counted).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tracecanary.program import Program

RANKING_METRICS = ("p50", "p95", "p99", "mean")


@dataclass(frozen=True)
class Reduction:
    kept: list[int]
    oracle_calls: int
    decisions_checked: int


def subset_program(program: Program, kept: Sequence[int]) -> Program:
    """The occurrences ``kept`` (sorted logical indices), each with its own gap."""
    from tracecanary.compile.expand import select_occurrences

    idx = np.asarray(sorted(kept), dtype=np.int64)
    sub = select_occurrences(program, idx, np.ones(idx.size))
    return sub


def ddmin(items: list[int], accept: Callable[[list[int]], bool]) -> list[int]:
    """Minimal (1-minimal) sublist of ``items`` that ``accept`` still accepts."""
    n = 2
    while len(items) >= 2:
        size = len(items)
        bounds = [round(i * size / n) for i in range(n + 1)]
        chunks = [items[bounds[i] : bounds[i + 1]] for i in range(n) if bounds[i] < bounds[i + 1]]
        for chunk in chunks:
            if accept(chunk):
                items, n = chunk, 2
                break
        else:
            for chunk in chunks:
                complement = [x for x in items if x not in set(chunk)]
                if complement and accept(complement):
                    items, n = complement, max(n - 1, 2)
                    break
            else:
                if n >= len(items):
                    break
                n = min(len(items), 2 * n)
    return items


def reduce_program(
    program: Program, backends, tie_tolerance: float, config_names=None
) -> Reduction:
    """ddmin over the occurrences of ``program`` with the ranking-only oracle."""
    from tracecanary.compile.canary import compile_program
    from tracecanary.compile.expand import expand_canary
    from tracecanary.sim.ranking import decision_mismatches, decisions
    from tracecanary.sim.report import workload_metrics

    reference = decisions(
        workload_metrics(program, backends, config_names), tie_tolerance, RANKING_METRICS
    )
    cache: dict[tuple[int, ...], bool] = {}
    calls = 0

    def accept(kept: list[int]) -> bool:
        nonlocal calls
        key = tuple(sorted(kept))
        if key not in cache:
            calls += 1
            canary = compile_program(subset_program(program, key))
            replayed = expand_canary(canary, executed=True)
            got = decisions(
                workload_metrics(replayed, backends, config_names), tie_tolerance, RANKING_METRICS
            )
            cache[key] = not decision_mismatches(reference, got)
        return cache[key]

    kept = ddmin(list(range(program.n)), accept)
    return Reduction(kept=sorted(kept), oracle_calls=calls, decisions_checked=len(reference))
