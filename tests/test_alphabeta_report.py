"""Markdown lines in the CollectiveX spirit and float rounding of the fit document."""

from __future__ import annotations

import numpy as np
import pytest

from tracecanary.alphabeta.fit import fit_alpha_beta
from tracecanary.alphabeta.report import fit_line, round_floats


def test_withheld_beta_prints_unreliable_with_reason_and_quality():
    x = np.array([1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20])
    line = fit_line(fit_alpha_beta(x, np.array([50.0, 50.0, 50.0, 80.0, 50.0, 75.0])))
    assert "beta=unreliable [poor fit] (R2=0.298, transfer share=0.26, n=6," in line
    assert "GB/s" not in line


def test_trusted_beta_prints_number_and_extrapolated_alpha_is_starred():
    x = np.array([1 << 27, 1 << 28, 1 << 29, 1 << 30])
    line = fit_line(fit_alpha_beta(x, 900.0 + x / 184e3))
    assert line.startswith("alpha=900.0 us*, beta=184.0 GB/s (R2=1.000, transfer share=")
    assert f"over {1 << 27}..{1 << 30} B" in line


def test_two_point_fit_says_not_validated_and_negative_alpha_is_marked():
    two = fit_line(fit_alpha_beta(np.array([1000, 2000]), np.array([10.0, 20.0])))
    assert "beta=unreliable [too few points]" in two and "not validated" in two
    neg = fit_line(fit_alpha_beta(np.array([1000, 2000, 4000]), np.array([1.0, 11.0, 31.0])))
    assert "[negative: not a physical latency]" in neg


def test_no_fit_line_for_a_single_point():
    assert fit_line(fit_alpha_beta(np.array([1024]), np.array([5.0]))) == (
        "no fit [too few points] (n=1)"
    )


def test_round_floats_keeps_ten_significant_digits_and_refuses_nan():
    assert round_floats({"a": [1 / 3, 2.0, 7], "b": None}) == {
        "a": [0.3333333333, 2.0, 7],
        "b": None,
    }
    with pytest.raises(ValueError):
        round_floats({"x": float("nan")})
