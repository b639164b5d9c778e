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

from tracecanary.compile.canary import compile_program
from tracecanary.compile.expand import expand_canary, select_occurrences
from tracecanary.compile.tracefile import trace_meta
from tracecanary.program import Program
from tracecanary.sim.ranking import RANKING_METRICS, decision_mismatches, decisions
from tracecanary.sim.report import workload_metrics

REDUCED_TRACE_WARNING = (
    "this trace preserves configuration rankings only; it is not a canary and carries no "
    "behavioral claim"
)


@dataclass(frozen=True)
class DdminResult:
    """What ddmin kept (sorted occurrence indices) and what it cost."""

    kept: list[int]
    oracle_calls: int
    decisions_checked: int


def subset_program(program: Program, kept: Sequence[int]) -> Program:
    """The occurrences ``kept`` (sorted logical indices), each with its own gap."""
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
) -> DdminResult:
    """ddmin over the occurrences of ``program`` with the ranking-only oracle."""
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
    return DdminResult(kept=sorted(kept), oracle_calls=calls, decisions_checked=len(reference))


def reduced_trace(
    program: Program,
    result: DdminResult,
    *,
    tie_tolerance: float,
    source: str,
    source_sha256: str,
    backends_sha256: str,
) -> tuple[Program, dict]:
    """(the kept occurrences as a program, its native-trace ``meta``). The meta's
    ``reduction`` record says how it was reduced, from what (``source``, its digest and
    the backends' digest) and, in ``warning``, that it carries no behavioral claim."""
    reduced = subset_program(program, result.kept)
    reduction = {
        "method": "ddmin (Zeller-Hildebrandt) with a ranking-only oracle",
        "events_in": program.n,
        "events_out": len(result.kept),
        "rank_events_in": program.member_count,
        "rank_events_out": int(
            np.isin(program.member_column("occ"), np.asarray(result.kept, dtype=np.int64)).sum()
        ),
        "events_are": "collective occurrences (each spans the ranks of its group)",
        "oracle_calls": result.oracle_calls,
        "decisions_checked": result.decisions_checked,
        "tie_tolerance": tie_tolerance,
        "kept_occurrences": result.kept,
        "source_sha256": source_sha256,
        "backends_sha256": backends_sha256,
        "warning": REDUCED_TRACE_WARNING,
    }
    meta = trace_meta(
        reduced,
        source=f"tracecanary reduce of {source}",
        notes=["ddmin baseline output: kept to show why ranking preservation alone is too weak"],
        extra={"reduction": reduction},
    )
    return reduced, meta
