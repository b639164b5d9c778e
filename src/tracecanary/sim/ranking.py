"""Configuration rankings and pairwise decisions under a declared relative tie tolerance.

Lower is better for every metric here (latencies, isolated scores). Two values a and b
are a *tie* when |a - b| <= tie_tolerance * max(|a|, |b|); otherwise the smaller one
wins. Ties are not transitive, so an ``order`` is only the configurations sorted by
(value, name); the pairwise decisions are the claim. The verifier and the ddmin reducer
compare decisions with ``pairwise_decisions`` / ``decisions`` / ``decision_mismatches``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import combinations

DEFAULT_TIE_TOLERANCE = 0.01
LATENCY_METRICS: tuple[str, ...] = ("p50", "p95", "p99", "max", "mean")
# the four metrics the ddmin oracle checks (10 pairs x 4 = 40 decisions for 5 configs)
RANKING_METRICS: tuple[str, ...] = ("p50", "p95", "p99", "mean")


def decide(a: float | None, b: float | None, tie_tolerance: float) -> int:
    """-1 when a is better (smaller) beyond the tolerance, 1 when b is, 0 for a tie."""
    if a is None or b is None:
        if a is None and b is None:
            return 0
        raise ValueError("cannot rank a missing value against a present one")
    if abs(a - b) <= tie_tolerance * max(abs(a), abs(b)):
        return 0
    return -1 if a < b else 1


def pairwise_decisions(
    values: Mapping[str, float | None], tie_tolerance: float
) -> dict[tuple[str, str], int]:
    """Decision for every unordered pair (a, b), a < b by name."""
    return {
        (a, b): decide(values[a], values[b], tie_tolerance)
        for a, b in combinations(sorted(values), 2)
    }


def ranking(values: Mapping[str, float | None], tie_tolerance: float) -> dict:
    """``order`` (sorted by value then name; missing values last) and the tied pairs."""
    order = sorted(values, key=lambda k: (values[k] is None, values[k] or 0, k))
    ties = [[a, b] for (a, b), d in pairwise_decisions(values, tie_tolerance).items() if d == 0]
    return {"order": order, "ties": ties}


def latency_values(per_config: Mapping[str, Mapping], metric: str) -> dict[str, float | None]:
    """{config: latency metric} from report-style config blocks (``latency.<m>_ns``)."""
    return {name: block["latency"][f"{metric}_ns"] for name, block in per_config.items()}


def decisions(
    per_config: Mapping[str, Mapping],
    tie_tolerance: float,
    metrics: Iterable[str] = RANKING_METRICS,
) -> dict[tuple[str, str, str], int]:
    """{(metric, a, b): decision} over latency metrics of report-style config blocks."""
    out: dict[tuple[str, str, str], int] = {}
    for metric in metrics:
        for (a, b), d in pairwise_decisions(
            latency_values(per_config, metric), tie_tolerance
        ).items():
            out[(metric, a, b)] = d
    return out


def decision_mismatches(
    reference: Mapping[tuple[str, str, str], int], other: Mapping[tuple[str, str, str], int]
) -> list[tuple[str, str, str]]:
    """Keys whose decisions differ (a key missing on one side counts as a mismatch)."""
    keys = sorted(set(reference) | set(other))
    return [k for k in keys if reference.get(k) != other.get(k)]


def pairwise_table(
    values: Mapping[str, float | None], tie_tolerance: float, metric: str
) -> list[dict]:
    """Report rows: metric, a, b, winner (None for a tie)."""
    rows = []
    for (a, b), d in pairwise_decisions(values, tie_tolerance).items():
        rows.append(
            {"metric": metric, "a": a, "b": b, "winner": None if d == 0 else (a if d < 0 else b)}
        )
    return rows


def ranking_text(rank: Mapping) -> str:
    """One line for a ``ranking`` block, consistent with its ``ties``: neighbours in
    ``order`` joined by ``" = "`` when the pair is tied, ``" < "`` when the left one is
    better beyond the tolerance. Ties are not transitive, so ``a = b = c`` states only
    the neighbouring pairs; the block's ``ties`` list is the full statement."""
    tied = {frozenset(pair) for pair in rank["ties"]}
    order = list(rank["order"])
    if not order:
        return ""
    parts = [order[0]]
    for left, right in zip(order, order[1:], strict=False):
        parts.append("=" if frozenset((left, right)) in tied else "<")
        parts.append(right)
    return " ".join(parts)
