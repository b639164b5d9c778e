"""Weighted metrics, rankings and decisions of the simulator."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracecanary.sim.metrics import distribution, weighted_quantiles
from tracecanary.sim.ranking import (
    decide,
    decision_mismatches,
    decisions,
    pairwise_decisions,
    ranking,
)

values_strategy = st.lists(st.integers(-(10**12), 10**12), min_size=1, max_size=300)


@settings(max_examples=200, deadline=None)
@given(values=values_strategy, q=st.sampled_from([0.0, 0.01, 0.5, 0.95, 0.99, 1.0]))
def test_unit_weight_quantiles_equal_numpy_inverted_cdf(values, q):
    arr = np.asarray(values, dtype=np.int64)
    (got,) = weighted_quantiles(arr, np.ones(arr.size), [q])
    assert got == int(np.quantile(arr, q, method="inverted_cdf"))


@settings(max_examples=200, deadline=None)
@given(
    pairs=st.lists(st.tuples(st.integers(0, 10**9), st.integers(1, 7)), min_size=1, max_size=100),
    q=st.sampled_from([0.5, 0.95, 0.99]),
)
def test_integer_weights_equal_repeating_each_sample(pairs, q):
    values = np.asarray([v for v, _ in pairs], dtype=np.int64)
    weights = np.asarray([w for _, w in pairs], dtype=np.float64)
    repeated = np.repeat(values, weights.astype(np.int64))
    (got,) = weighted_quantiles(values, weights, [q])
    assert got == int(np.quantile(repeated, q, method="inverted_cdf"))
    dist = distribution(values, weights)
    assert dist["mean_ns"] == pytest.approx(float(repeated.mean()), rel=1e-12)
    assert dist["max_ns"] == int(values.max())


def test_distribution_of_nothing_is_null_not_zero():
    dist = distribution(np.zeros(0, dtype=np.int64), np.zeros(0))
    assert set(dist.values()) == {None}


def test_decide_uses_relative_tie_tolerance_and_lower_is_better():
    assert decide(100.0, 100.9, 0.01) == 0
    assert decide(100.0, 102.0, 0.01) == -1
    assert decide(102.0, 100.0, 0.01) == 1
    assert decide(0.0, 0.0, 0.01) == 0
    assert decide(None, None, 0.01) == 0
    with pytest.raises(ValueError):
        decide(None, 1.0, 0.01)


def test_pairwise_decisions_cover_every_pair_once_and_ranking_orders_by_value():
    values = {"c": 3.0, "a": 1.0, "b": 1.005, "d": 10.0, "e": 5.0}
    d = pairwise_decisions(values, 0.01)
    assert len(d) == 10 and all(a < b for a, b in d)
    assert d[("a", "b")] == 0 and d[("a", "c")] == -1 and d[("c", "e")] == -1 and d[("d", "e")] == 1
    r = ranking(values, 0.01)
    assert r["order"] == ["a", "b", "c", "e", "d"] and r["ties"] == [["a", "b"]]


def test_forty_decisions_for_five_configs_and_mismatches_are_named():
    def block(v):
        return {
            "latency": {
                "p50_ns": v,
                "p95_ns": v * 2,
                "p99_ns": v * 3,
                "max_ns": v * 4,
                "mean_ns": float(v),
            }
        }

    full = {name: block(v) for name, v in zip("abcde", [100, 200, 300, 400, 500], strict=True)}
    ref = decisions(full, 0.01)
    assert len(ref) == 40
    swapped = dict(full, a=block(250))
    mism = decision_mismatches(ref, decisions(swapped, 0.01))
    assert (
        ("p50", "a", "b") in mism and ("mean", "a", "b") in mism and ("p50", "c", "d") not in mism
    )
