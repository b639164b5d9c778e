"""Weighted summary metrics of a simulation (all times in ns).

Guarantees:
- quantiles are weighted inverted-CDF: the smallest value whose cumulative weight is
  >= q * total weight; for unit weights this equals
  ``numpy.quantile(values, q, method="inverted_cdf")``; they are always a sample value;
- sums and means use ``math.fsum`` (correctly rounded), so every float in a report is
  the same on every machine for the same samples;
- weights are the occurrences' execution weights (1 in a source program, the number of
  logical occurrences an executed one stands for in a reduced canary).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tracecanary.sim.backends import BackendConfig
from tracecanary.sim.engine import Prepared, SimResult

QUANTILES: dict[str, float] = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
TAIL_FRACTION = 0.01
TAIL_MIN_EVENTS = 10


_EXACT_LIMIT = float(1 << 53)  # integers below this are exact in float64


def fsum_weighted(values: np.ndarray, weights: np.ndarray) -> float:
    """Correctly rounded sum of weights * values (float64 products).

    Fast path, same result: when every weight is integral and every product is an
    integer below 2**53 in magnitude (so each float64 product is exact), the exact sum
    is an int64 sum (guarded against overflow) and ``float()`` of it is the correctly
    rounded value ``math.fsum`` returns. Otherwise ``math.fsum`` itself."""
    exact = _exact_sum(values, weights)
    if exact is not None:
        return exact
    return math.fsum((weights * values.astype(np.float64)).tolist())


def fsum_weights(weights: np.ndarray) -> float:
    """``math.fsum`` of the weights (the same fast path for integral weights)."""
    exact = _exact_sum(None, weights)
    return exact if exact is not None else math.fsum(weights.tolist())


_SUM_BLOCK = 1 << 20  # elements per step of the exact sum's temporaries


def _abs_max(values: np.ndarray) -> float:
    """``float(np.max(np.abs(values.astype(np.float64))))`` without whole-array
    temporaries: the float64 conversion is monotonic, so the largest magnitude is that
    of the smallest or the largest value (NaN propagates as before)."""
    lo, hi = float(np.min(values)), float(np.max(values))
    return max(abs(lo), abs(hi)) if lo == lo and hi == hi else float("nan")


def _exact_sum(values: np.ndarray | None, weights: np.ndarray) -> float | None:
    if weights.size == 0:
        return 0.0
    if values is not None and values.dtype.kind not in "iub":
        return None
    w_max = _abs_max(weights)
    blocks = range(0, weights.size, _SUM_BLOCK)
    if not (w_max < _EXACT_LIMIT) or not all(
        np.array_equal(w, np.floor(w)) for w in (weights[i : i + _SUM_BLOCK] for i in blocks)
    ):
        return None
    v_max = 1.0 if values is None else _abs_max(values)
    # every |product| < 2**53 and the int64 running sum cannot overflow (nor can any
    # partial sum: the blocks' int64 sums add up exactly, in Python ints)
    if not (w_max * v_max < _EXACT_LIMIT and w_max * v_max * weights.size < 2.0**62):
        return None
    total = 0
    for i in blocks:
        w_int = weights[i : i + _SUM_BLOCK].astype(np.int64)
        if values is None:
            total += int(np.sum(w_int))
        else:
            total += int(np.sum(w_int * values[i : i + _SUM_BLOCK].astype(np.int64)))
    return float(total)


def weighted_quantiles(values: np.ndarray, weights: np.ndarray, qs: Sequence[float]) -> list[int]:
    """Weighted inverted-CDF quantiles of int64 ``values`` (see module doc)."""
    return [int(v) for v in weighted_quantile_values(values, weights, qs)]


def weighted_quantile_values(values: np.ndarray, weights: np.ndarray, qs: Sequence[float]) -> list:
    """The same quantiles for values of any numeric dtype, as sample values of that dtype
    (the physical report applies them to float microseconds)."""
    if values.size == 0:
        raise ValueError("quantile of no values")
    if weights.size and weights.min() == 1.0 and weights.max() == 1.0:
        return _unit_weight_quantiles(values, qs)
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    cumulative = np.cumsum(weights[order])
    total = cumulative[-1]
    out = []
    for q in qs:
        idx = int(np.searchsorted(cumulative, q * total, side="left"))
        out.append(sorted_values[min(idx, sorted_values.size - 1)])
    return out


def _unit_weight_quantiles(values: np.ndarray, qs: Sequence[float]) -> list:
    """The same quantiles for unit weights, by selection instead of a full sort.

    With weights 1 the cumulative weights are 1..n (exact in float64), so the first
    position whose cumulative weight reaches ``q * n`` is ``ceil(q * n) - 1`` (clamped to
    [0, n - 1]): the quantile is that order statistic, which ``np.partition`` finds."""
    n = values.size
    ranks = [min(max(math.ceil(q * float(n)) - 1, 0), n - 1) for q in qs]
    picked = np.partition(values, sorted(set(ranks)))
    return [picked[k] for k in ranks]


def distribution(values: np.ndarray, weights: np.ndarray) -> dict:
    """p50/p95/p99/max (int ns) and weighted mean (float ns) of a sample."""
    if values.size == 0:
        return {"p50_ns": None, "p95_ns": None, "p99_ns": None, "max_ns": None, "mean_ns": None}
    q = weighted_quantiles(values, weights, list(QUANTILES.values()))
    out = {f"{name}_ns": v for name, v in zip(QUANTILES, q, strict=True)}
    out["max_ns"] = int(values.max())
    out["mean_ns"] = fsum_weighted(values, weights) / fsum_weights(weights)
    return out


def breakdown(
    codes: np.ndarray, names: Sequence[str], values: np.ndarray, weights: np.ndarray
) -> dict[str, dict]:
    """Per name (phase or op) that occurs, in sorted order: weighted count, mean, p50,
    p99 and total of values. ``codes`` index ``names`` (sorted)."""
    out: dict[str, dict] = {}
    if values.size == 0:
        return out
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    for i, key in enumerate(names):
        idx = order[bounds[i] : bounds[i + 1]]
        if idx.size == 0:
            continue
        v, w = values[idx], weights[idx]
        p50, p99 = weighted_quantiles(v, w, [QUANTILES["p50"], QUANTILES["p99"]])
        count = fsum_weights(w)
        total = fsum_weighted(v, w)
        out[str(key)] = {
            "count": count,
            "executed": int(idx.size),
            "mean_ns": total / count,
            "p50_ns": p50,
            "p99_ns": p99,
            "total_ns": total,
        }
    return out


def tail_events(prep: Prepared, result: SimResult) -> list[dict]:
    """The top max(TAIL_MIN_EVENTS, ceil(1% of executed)) occurrences by latency
    (descending; ties by occurrence index), with their source identity."""
    n = prep.n
    if n == 0:
        return []
    k = min(n, max(TAIL_MIN_EVENTS, -(-n // 100)))
    latency = result.latency_ns
    # only occurrences at or above the k-th largest latency can be among the top k:
    # select them first, then order that short list exactly (latency desc, occ asc)
    kth = np.partition(latency, n - k)[n - k]
    candidates = np.flatnonzero(latency >= kth)
    order = candidates[np.lexsort((prep.occ[candidates], -latency[candidates]))][:k]
    return [
        {
            "occ": int(prep.occ[i]),
            "op": prep.op_names[prep.op_code[i]],
            "bytes": int(prep.bytes[i]),
            "group": prep.group_names[prep.group_code[i]],
            "phase": prep.phase_names[prep.phase_code[i]],
            "latency_ns": int(result.latency_ns[i]),
            "queue_wait_ns": int(result.queue_wait_ns[i]),
            "hidden_ns": int(result.hidden_ns[i]),
        }
        for i in order
    ]


def summarize(prep: Prepared, result: SimResult, config: BackendConfig) -> dict:
    """The metrics of one configuration (the ``configs.<name>`` block minus samples)."""
    w = prep.weight
    service_total = fsum_weighted(result.service_ns, w)
    hidden_total = fsum_weighted(result.hidden_ns, w)
    usage = {}
    for cand in config.candidates:
        mask = result.candidate == cand.index
        usage[cand.label] = fsum_weights(w[mask])
    return {
        "latency": distribution(result.latency_ns, w),
        "queue_wait": distribution(result.queue_wait_ns, w),
        "service": distribution(result.service_ns, w),
        "hidden": {
            "total_ns": hidden_total,
            "service_total_ns": service_total,
            "share": (hidden_total / service_total) if service_total > 0 else None,
        },
        "by_phase": breakdown(prep.phase_code, prep.phase_names, result.latency_ns, w),
        "by_op": breakdown(prep.op_code, prep.op_names, result.latency_ns, w),
        "tail_events": tail_events(prep, result),
        "candidates": usage,
    }
