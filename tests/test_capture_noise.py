"""A capture's noise floor (``zoo.runner.latency_noise``): the coefficient of variation of
every member's measured latency per op signature, its median and max over signatures."""

from __future__ import annotations

import pytest

from tracecanary.zoo.runner import latency_noise


def _events(latencies: list[list[int]], ops: list[str]) -> list[dict]:
    return [
        {"rank": r, "op": op, "bytes": 4, "dtype": "f32", "group": "world", "latency_ns": v}
        for values, op in zip(latencies, ops, strict=True)
        for r, v in enumerate(values)
    ]


def test_the_noise_is_the_median_cv_of_members_latencies_per_signature():
    # all_reduce: 100, 300, 300, 100 (mean 200, std 100: CV 0.5); broadcast: 50 x4 (CV 0);
    # barrier: 10, 30 (CV 0.5)
    events = _events(
        [[100, 300], [300, 100], [50, 50], [50, 50], [10, 30]],
        ["all_reduce", "all_reduce", "broadcast", "broadcast", "barrier"],
    )
    noise = latency_noise(events)
    assert noise["signatures"] == 3
    assert noise["latency_cv_median"] == pytest.approx(0.5)
    assert noise["latency_cv_max"] == pytest.approx(0.5)


def test_a_capture_without_measured_latency_has_no_noise_figure():
    events = [{k: v for k, v in e.items() if k != "latency_ns"} for e in _events([[1, 1]], ["x"])]
    assert latency_noise(events) == {**latency_noise([]), "signatures": 0}
    assert latency_noise(events)["latency_cv_median"] is None
