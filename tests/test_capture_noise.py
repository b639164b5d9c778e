"""A capture's noise floor (``zoo.runner.latency_noise``): the coefficient of variation of
every member's measured latency per op signature, its median and max over signatures."""

from __future__ import annotations

import numpy as np
import pytest

from tracecanary.program import make_program
from tracecanary.zoo.runner import latency_noise


def _program(latencies: list[list[int]], ops: list[str]):
    n, width = len(latencies), len(latencies[0])
    own = np.asarray(latencies, dtype=np.int64)
    return make_program(
        {
            "op": ops,
            "bytes": [4] * n,
            "dtype": ["f32"] * n,
            "group": ["world"] * n,
            "group_size": [width] * n,
            "gap_ns": [1000] * n,
            "latency_ns": own.max(axis=1),
            "has_latency": [True] * n,
        },
        {
            "occ": np.repeat(np.arange(n), width),
            "rank": np.tile(np.arange(width), n),
            "skew_ns": np.zeros(n * width),
            "latency_ns": own.ravel(),
        },
        world_size=width,
        skew_known=True,
    )


def test_the_noise_is_the_median_cv_of_members_latencies_per_signature():
    # all_reduce: values 100, 300 (mean 200, std 100: CV 0.5); broadcast: 50 x4 (CV 0);
    # barrier: 10, 30 (CV 0.5)
    program = _program(
        [[100, 300], [300, 100], [50, 50], [50, 50], [10, 30]],
        ["all_reduce", "all_reduce", "broadcast", "broadcast", "barrier"],
    )
    noise = latency_noise(program)
    assert noise["signatures"] == 3
    assert noise["latency_cv_median"] == pytest.approx(0.5)
    assert noise["latency_cv_max"] == pytest.approx(0.5)


def test_a_capture_without_measured_latency_has_no_noise_figure():
    program = _program([[1, 1]], ["all_reduce"]).replace()
    occ = {k: program.column(k) for k in program.column_names}
    occ["has_latency"] = np.zeros(1, dtype=bool)
    bare = program.replace(occurrences=occ)
    assert latency_noise(bare)["latency_cv_median"] is None
