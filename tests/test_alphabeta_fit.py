"""Alpha/beta math: unit conversion, OLS, every trust gate, rung statistics, saturation
entry and latency plateau. Synthetic ladders here are generated from stated formulas."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracecanary.alphabeta.analysis import (
    AnalysisParams,
    analyze_ladder,
    contiguous_segments,
    latency_plateau,
    saturation_entry,
)
from tracecanary.alphabeta.fit import (
    FIT_KEYS,
    GateThresholds,
    beta_gbps_from_slope,
    fit_alpha_beta,
    ols,
)
from tracecanary.alphabeta.ladder import algbw_gbps, busbw_factor, make_ladder, summarize_rungs


def _ladder(bytes_, times, *, cycles=None, wrong=None, collective="all_reduce", world_size=8):
    n = len(bytes_)
    return make_ladder(
        {
            "collective": [collective] * n,
            "dtype": ["float"] * n,
            "world_size": [world_size] * n,
            "bytes": list(bytes_),
            "cycle": list(cycles) if cycles is not None else [0] * n,
            "time_us": list(times),
            "wrong": list(wrong) if wrong is not None else [0] * n,
            "source": ["synthetic"] * n,
            "line": list(range(1, n + 1)),
            "input": [0] * n,
            "run": [0] * n,
            "placement": ["out_of_place"] * n,
            "op": ["sum"] * n,
        }
    )


KEY = {
    "input": 0,
    "run": 0,
    "collective": "all_reduce",
    "dtype": "float",
    "world_size": 8,
    "placement": "out_of_place",
    "op": "sum",
}


# --------------------------------------------------------------------------- units


def test_algbw_is_decimal_gigabytes_per_second():
    # 1e9 bytes in 1e6 us (1 s) is 1 GB/s; 8589934592 B in 47535 us is nccl-tests' 180.71
    assert algbw_gbps(1e9, 1e6) == pytest.approx(1.0)
    assert round(float(algbw_gbps(8589934592, 47535)), 2) == 180.71


def test_beta_from_slope_in_us_per_byte():
    # 1 byte per 1e-3 us = 1e9 B/s = 1 GB/s; 200 GB/s = 5e-6 us/byte
    assert beta_gbps_from_slope(1e-3) == pytest.approx(1.0)
    assert beta_gbps_from_slope(5e-6) == pytest.approx(200.0)


@pytest.mark.parametrize(
    ("collective", "n", "factor"),
    [
        ("all_reduce", 8, 1.75),
        ("all_reduce", 16, 1.875),
        ("all_gather", 8, 0.875),
        ("reduce_scatter", 4, 0.75),
        ("all_to_all", 8, 0.875),
        ("broadcast", 8, 1.0),
        ("reduce", 8, 1.0),
        ("sendrecv", 2, 1.0),
        ("scatter", 8, 0.875),
        ("gather", 4, 0.75),
    ],
)
def test_busbw_factor_matches_nccl_tests(collective, n, factor):
    assert busbw_factor(collective, n) == pytest.approx(factor)


def test_busbw_factor_refuses_unknown_collective():
    with pytest.raises(ValueError):
        busbw_factor("hypercube", 8)


# --------------------------------------------------------------------------- OLS


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=2**33), min_size=2, max_size=30, unique=True),
    st.floats(min_value=1.0, max_value=500.0),
    st.floats(min_value=1e-9, max_value=1e-3),
    st.integers(min_value=0, max_value=2**31),
)
def test_ols_matches_numpy_polyfit(xs, alpha, slope, seed):
    rng = np.random.default_rng(seed)
    x = np.array(sorted(xs), dtype=np.float64)
    y = alpha + slope * x + rng.normal(0.0, 1.0, len(x))
    intercept, fitted_slope = ols(x, y)
    ref_slope, ref_intercept = np.polyfit(x, y, 1)
    assert fitted_slope == pytest.approx(ref_slope, rel=1e-6, abs=1e-12)
    assert intercept == pytest.approx(
        ref_intercept, rel=1e-6, abs=1e-6 * max(1.0, abs(ref_intercept))
    )


def test_ols_recovers_exact_line_and_beta():
    x = np.array([1 << k for k in range(10, 31)], dtype=np.int64)
    y = 25.0 + x / (150.0 * 1e3)  # alpha 25 us, beta 150 GB/s
    fit = fit_alpha_beta(x, y)
    assert set(fit) == set(FIT_KEYS)
    assert fit["alpha_us"] == pytest.approx(25.0)
    assert fit["beta_gbps"] == pytest.approx(150.0)
    assert fit["r2"] == pytest.approx(1.0)
    assert fit["beta_withheld_reason"] is None
    assert fit["validated"] is True
    assert fit["mape_pct"] == pytest.approx(0.0, abs=1e-6)
    assert [p["bytes"] for p in fit["residuals"]] == x.tolist()


def test_fit_residuals_are_measured_minus_predicted():
    x = np.array([1000, 2000, 3000, 4000])
    y = np.array([10.0, 12.0, 13.0, 17.0])
    fit = fit_alpha_beta(x, y)
    for p in fit["residuals"]:
        assert p["residual_us"] == pytest.approx(p["measured_us"] - p["predicted_us"])
        assert p["rel_error_pct"] == pytest.approx(p["residual_us"] / p["measured_us"] * 100)
    assert fit["mape_pct"] == pytest.approx(
        np.mean([abs(p["rel_error_pct"]) for p in fit["residuals"]])
    )
    assert fit["max_rel_error_pct"] == pytest.approx(
        max(abs(p["rel_error_pct"]) for p in fit["residuals"])
    )


# --------------------------------------------------------------------------- gates


def test_noisy_ladder_gets_beta_withheld_as_poor_fit():
    # a latency floor of 50 us with two rungs of noise: the slope is an artefact of the noise
    x = np.array([1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20])
    y = np.array([50.0, 50.0, 50.0, 80.0, 50.0, 75.0])
    fit = fit_alpha_beta(x, y)
    assert fit["r2"] < 0.9
    assert fit["bandwidth_share"] >= 0.25  # only the r2 gate catches it
    assert fit["beta_gbps"] is None
    assert fit["beta_withheld_reason"] == "poor_fit"
    # the same data without the gate would have printed an absurd beta
    assert beta_gbps_from_slope(fit["slope_us_per_byte"]) > 1000


def test_latency_bound_ladder_with_high_r2_gets_beta_withheld_as_not_bandwidth_bound():
    x = np.array([1 << k for k in range(3, 17)])  # 8 B .. 64 KiB
    y = (
        100.0
        + x * 2e-4
        + np.array([0, 0.01, -0.01, 0.02, 0, -0.02, 0.01, 0, 0, 0.01, -0.01, 0, 0.01, 0])
    )
    fit = fit_alpha_beta(x, y)
    assert fit["r2"] > 0.9
    assert fit["bandwidth_share"] < 0.25
    assert fit["beta_gbps"] is None
    assert fit["beta_withheld_reason"] == "not_bandwidth_bound"


def test_two_point_segment_is_not_validated_and_beta_withheld():
    fit = fit_alpha_beta(np.array([1 << 20, 2 << 20]), np.array([30.0, 40.0]))
    assert fit["r2"] == pytest.approx(1.0)  # by construction
    assert fit["validated"] is False
    assert fit["beta_withheld_reason"] == "too_few_points"
    assert fit["beta_gbps"] is None
    assert fit["n_points"] == 2


def test_single_point_gives_no_fit():
    fit = fit_alpha_beta(np.array([1024]), np.array([10.0]))
    assert set(fit) == set(FIT_KEYS)
    assert fit["alpha_us"] is None and fit["slope_us_per_byte"] is None and fit["r2"] is None
    assert fit["beta_withheld_reason"] == "too_few_points"
    assert fit["validated"] is False


def test_gate_thresholds_are_configurable():
    x = np.array([1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20])
    y = np.array([50.0, 50.0, 50.0, 80.0, 50.0, 75.0])
    lenient = fit_alpha_beta(x, y, GateThresholds(r2_min=0.0, share_min=0.0))
    assert lenient["beta_withheld_reason"] is None and lenient["beta_gbps"] > 0
    strict = fit_alpha_beta(
        np.array([1 << k for k in range(20, 30)]),
        20.0 + np.array([1 << k for k in range(20, 30)]) / 1e5,
        GateThresholds(share_min=0.999),
    )
    assert strict["beta_withheld_reason"] == "not_bandwidth_bound"


def test_alpha_is_marked_extrapolated_when_ladder_never_approaches_zero_bytes():
    big = np.array([1 << 27, 1 << 28, 1 << 29, 1 << 30])  # smallest is 12.5% of the largest
    small = np.array([1 << 10, 1 << 20, 1 << 29, 1 << 30])
    y = np.array([100.0, 200.0, 400.0, 800.0])
    assert fit_alpha_beta(big, y)["alpha_extrapolated"] is True
    assert fit_alpha_beta(small, y)["alpha_extrapolated"] is False


def test_bandwidth_share_is_transfer_term_over_largest_latency():
    x = np.array([1000, 2000, 4000, 8000])
    y = 10.0 + 0.001 * x
    fit = fit_alpha_beta(x, y)
    assert fit["bandwidth_share"] == pytest.approx(0.001 * 8000 / 18.0)


# --------------------------------------------------------------------------- rungs


def test_cv_above_threshold_flags_rung_unstable():
    rows = _ladder(
        [1024] * 3 + [2048] * 3,
        [100.0, 100.0, 120.0, 100.0, 101.0, 99.0],
        cycles=[0, 1, 2, 0, 1, 2],
    )
    rungs = summarize_rungs(rows, cv_max_pct=5.0).set_index("bytes")
    assert rungs.loc[1024, "cv_pct"] == pytest.approx(
        np.std([100, 100, 120], ddof=1) / np.mean([100, 100, 120]) * 100
    )
    assert rungs.loc[1024, "unstable"] is True
    assert rungs.loc[2048, "unstable"] is False
    assert summarize_rungs(rows, cv_max_pct=20.0).set_index("bytes").loc[1024, "unstable"] is False


def test_single_cycle_rung_has_unknown_cv_not_zero():
    rungs = summarize_rungs(_ladder([1024, 2048], [10.0, 11.0]), cv_max_pct=5.0)
    assert rungs["cv_pct"].isna().all()
    assert list(rungs["unstable"]) == [None, None]


def test_median_and_p95_are_over_cycles():
    times = [10.0, 30.0, 20.0, 40.0, 50.0]
    rungs = summarize_rungs(_ladder([4096] * 5, times, cycles=range(5)), cv_max_pct=5.0)
    assert rungs["median_us"].iloc[0] == pytest.approx(30.0)
    assert rungs["p95_us"].iloc[0] == pytest.approx(np.percentile(times, 95))
    assert rungs["n_cycles"].iloc[0] == 5


def test_rung_statistics_are_numpys_per_rung_when_rungs_differ_in_cycles_and_values():
    """The rungs are summarized together; each rung's p95 and spread stay exactly numpy's
    on that rung's cycle means alone (3, 2, 1 and 3 cycles; an infinite sample; a
    (bytes, cycle) sampled twice is averaged first; wrong counts summed, unchecked kept
    apart from zero)."""
    inf = float("inf")
    per_rung = {
        8: ([3.0, 1.0, 2.0], [0, 1, 2], [0, None, 2]),
        64: ([5.5, 7.25], [0, 1], [None, None]),
        512: ([9.0], [0], [0]),
        4096: ([1.0, inf, 2.0], [0, 1, 2], [0, 0, 0]),
    }
    sizes, times, cycles, wrong = [], [], [], []
    for size, (t, c, w) in per_rung.items():
        sizes += [size] * len(t)
        times, cycles, wrong = times + t, cycles + c, wrong + w
    sizes, times, cycles, wrong = sizes + [8], times + [4.0], cycles + [0], wrong + [1]
    rows = _ladder(sizes, times, cycles=cycles, wrong=pd.array(wrong, dtype="Int64"))
    with np.errstate(invalid="ignore"):
        rungs = summarize_rungs(rows, cv_max_pct=5.0).set_index("bytes")
    cycle_means = {8: [3.5, 1.0, 2.0], 64: [5.5, 7.25], 512: [9.0], 4096: [1.0, inf, 2.0]}
    for size, means in cycle_means.items():
        with np.errstate(invalid="ignore"):
            p95 = np.percentile(means, 95)
            cv = np.std(means, ddof=1) / np.mean(means) * 100 if len(means) > 1 else np.nan
        assert rungs.loc[size, "n_cycles"] == len(means)
        assert np.array_equal([rungs.loc[size, "p95_us"]], [p95], equal_nan=True), size
        assert np.array_equal([rungs.loc[size, "cv_pct"]], [cv], equal_nan=True), size
    assert rungs["wrong_total"].tolist() == [3, pd.NA, 0, 0]
    assert rungs["correctness_checked"].tolist() == [True, False, True, True]
    assert rungs["excluded"].tolist() == ["correctness_failed", None, None, None]
    assert rungs["first_line"].tolist() == [1, 4, 6, 7]


def test_correctness_failed_rungs_are_excluded_from_fits():
    sizes = [1 << k for k in range(20, 26)]
    times = [20 + s / 1e5 for s in sizes]
    times[3] = 5.0  # a fast but corrupt rung
    wrong = [0, 0, 0, 17, 0, 0]
    result = analyze_ladder(
        KEY, _ladder(sizes, times, wrong=wrong), params=AnalysisParams(), source_name="s"
    )
    rung = next(r for r in result["rungs"] if r["bytes"] == sizes[3])
    assert rung["excluded"] == "correctness_failed" and rung["wrong_total"] == 17
    fit = result["fits"]["global"]
    assert fit["n_points"] == 5
    assert sizes[3] not in [p["bytes"] for p in fit["residuals"]]
    assert fit["beta_gbps"] == pytest.approx(100.0)
    assert any("correctness" in n for n in result["notes"])


def test_unchecked_rungs_are_kept_but_said_unchecked():
    rows = _ladder([1024, 2048, 4096], [10.0, 11.0, 12.0], wrong=[None, None, None])
    result = analyze_ladder(KEY, rows, params=AnalysisParams(), source_name="s")
    assert all(r["correctness_checked"] is False and r["excluded"] is None for r in result["rungs"])
    assert any("not checked" in n for n in result["notes"])


def test_zero_byte_rungs_are_excluded_as_harness_overhead():
    rows = _ladder([0, 1024, 2048, 4096], [7.5, 50.0, 51.0, 52.0])
    result = analyze_ladder(KEY, rows, params=AnalysisParams(), source_name="s")
    assert result["rungs"][0]["excluded"] == "zero_bytes"
    assert result["fits"]["global"]["min_bytes"] == 1024
    assert result["latency_plateau"]["min_bytes"] == 1024


# --------------------------------------------------------------------------- saturation, plateau


def test_saturation_entry_is_first_size_from_which_every_larger_keeps_the_fraction():
    b = np.array([1, 2, 4, 8, 16, 32, 64])
    bw = np.array([1.0, 5.0, 9.0, 7.0, 8.5, 10.0, 9.5])
    # 9.0 at 4 B is above 8.0 but 7.0 at 8 B drops below: the entry is 16 B
    assert saturation_entry(b, bw, 0.8) == (16, 10.0)
    assert saturation_entry(b, bw, 0.6) == (4, 10.0)
    assert saturation_entry(b, np.array([1, 2, 3, 10, 9, 8, 2.0]), 0.8) == (None, 10.0)


def test_latency_plateau_stops_at_first_departure():
    b = np.array([8, 16, 32, 64, 128])
    m = np.array([100.0, 102.0, 104.9, 106.0, 101.0])
    plateau = latency_plateau(b, m, 5.0)
    assert (plateau["min_bytes"], plateau["max_bytes"], plateau["n_rungs"]) == (8, 32, 3)
    assert latency_plateau(b, m, 10.0)["max_bytes"] == 128


def test_contiguous_segments_break_on_change_and_missing_evidence():
    labels = [
        ("RING", "LL"),
        ("RING", "LL"),
        None,
        ("RING", "LL"),
        ("TREE", "SIMPLE"),
        ("TREE", "SIMPLE"),
    ]
    assert contiguous_segments(labels) == [
        (("RING", "LL"), 0, 2),
        (("RING", "LL"), 3, 4),
        (("TREE", "SIMPLE"), 4, 6),
    ]


def test_without_tuning_segments_say_so_and_offer_the_saturation_fit():
    sizes = [1 << k for k in range(10, 31)]
    times = [30 + s / 2e5 for s in sizes]
    result = analyze_ladder(KEY, _ladder(sizes, times), params=AnalysisParams(), source_name="s")
    seg = result["fits"]["segments"]
    assert seg["evidence"] == "absent" and "no NCCL TUNING evidence" in seg["note"]
    assert seg["items"][0]["basis"] == "saturation_entry_up"
    assert seg["items"][0]["fit"] == result["fits"]["large_message"]
    assert result["fits"]["large_message"]["min_bytes"] == result["saturation_entry_bytes"]


def test_saturation_fraction_is_configurable():
    sizes = [1 << k for k in range(10, 31)]
    times = [30 + s / 2e5 for s in sizes]
    loose = analyze_ladder(
        KEY, _ladder(sizes, times), params=AnalysisParams(saturation_fraction=0.5), source_name="s"
    )
    tight = analyze_ladder(
        KEY, _ladder(sizes, times), params=AnalysisParams(saturation_fraction=0.95), source_name="s"
    )
    assert loose["saturation_entry_bytes"] < tight["saturation_entry_bytes"]
    assert pd.notna(loose["peak_algbw_gbps"])
