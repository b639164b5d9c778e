"""Ordinary least squares ``T(bytes) = alpha + slope * bytes`` and the trust gates.

A straight line through a ladder is a model, and on real data it is sometimes a bad one,
so every fit reports its own quality and withholds beta when the data cannot support it.

Units: ``alpha_us`` microseconds; ``slope_us_per_byte`` microseconds per byte;
``beta_gbps = 1 / (1000 * slope_us_per_byte)`` decimal GB/s (1e9 bytes/s). beta is a
*marginal* rate: it legitimately sits above every measured algbw point, because alpha is
subtracted before the bytes are divided.

Gates (in this order; the first that trips names the reason):
    too_few_points        n_points < min_points (3): two points define any line, so r2 = 1
                          by construction and nothing was validated
    poor_fit              r2 < r2_min (0.9); also when r2 is undefined (all times equal)
    not_bandwidth_bound   bandwidth_share < share_min (0.25): the transfer term is too small
                          a part of the largest latency for the slope to be identifiable
                          (a slope <= 0 always lands here)

``bandwidth_share`` = slope * max_bytes / (largest measured latency among the points).
``alpha_extrapolated`` is True when the smallest point's bytes exceed
``extrapolation_fraction`` (10%) of the largest: the ladder never approaches zero bytes.
``validated`` is True only with at least ``min_points`` points: the line was checked
against a point beyond the two that define it (whether it *passed* is the gates' job).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FIT_KEYS: tuple[str, ...] = (
    "alpha_us",
    "beta_gbps",
    "beta_withheld_reason",
    "slope_us_per_byte",
    "r2",
    "n_points",
    "mape_pct",
    "max_rel_error_pct",
    "bandwidth_share",
    "alpha_extrapolated",
    "validated",
    "min_bytes",
    "max_bytes",
    "residuals",
)

WITHHELD_REASONS: tuple[str, ...] = ("poor_fit", "not_bandwidth_bound", "too_few_points")


@dataclass(frozen=True)
class GateThresholds:
    """Thresholds of the trust gates (all configurable from the CLI except the last two)."""

    r2_min: float = 0.9
    share_min: float = 0.25
    min_points: int = 3
    extrapolation_fraction: float = 0.1

    def as_dict(self) -> dict:
        return {
            "r2_min": self.r2_min,
            "share_min": self.share_min,
            "min_points": self.min_points,
            "extrapolation_fraction": self.extrapolation_fraction,
        }


def ols(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares ``(intercept, slope)`` of y on x (centred sums, float64).

    Needs at least two distinct x values.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError("x and y must be 1-D arrays of equal length")
    if len(x) < 2:
        raise ValueError("OLS needs at least two points")
    x_mean = x.mean()
    y_mean = y.mean()
    dx = x - x_mean
    sxx = float(np.dot(dx, dx))
    if sxx == 0.0:
        raise ValueError("OLS needs at least two distinct x values")
    slope = float(np.dot(dx, y - y_mean)) / sxx
    intercept = float(y_mean - slope * x_mean)
    return intercept, slope


def beta_gbps_from_slope(slope_us_per_byte: float) -> float:
    """Decimal GB/s of a slope in us/byte: bytes/us = 1/slope; GB/s = 1e6/1e9 of that."""
    return 1.0 / (1000.0 * slope_us_per_byte)


def _empty_fit(n: int, bytes_: np.ndarray) -> dict:
    return {
        "alpha_us": None,
        "beta_gbps": None,
        "beta_withheld_reason": "too_few_points",
        "slope_us_per_byte": None,
        "r2": None,
        "n_points": n,
        "mape_pct": None,
        "max_rel_error_pct": None,
        "bandwidth_share": None,
        "alpha_extrapolated": None,
        "validated": False,
        "min_bytes": int(bytes_.min()) if n else None,
        "max_bytes": int(bytes_.max()) if n else None,
        "residuals": [],
    }


def fit_alpha_beta(
    bytes_: np.ndarray, time_us: np.ndarray, thresholds: GateThresholds = GateThresholds()
) -> dict:
    """Fit ``time_us = alpha_us + slope * bytes`` and apply the gates.

    Returns a dict with exactly ``FIT_KEYS``. With fewer than two points (or one distinct
    size) nothing can be fitted: every model number is None and beta is withheld as
    ``too_few_points``. ``residuals`` lists, per point in ascending bytes: bytes,
    measured_us, predicted_us, residual_us (measured - predicted), rel_error_pct
    (residual / measured * 100). Measured times must be > 0.
    """
    x = np.asarray(bytes_, dtype=np.int64)
    y = np.asarray(time_us, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    n = int(len(x))
    if n < 2 or len(np.unique(x)) < 2:
        return _empty_fit(n, x)
    if not np.all(np.isfinite(y)) or np.any(y <= 0):
        raise ValueError("measured times must be finite and > 0")
    xf = x.astype(np.float64)
    alpha, slope = ols(xf, y)
    predicted = alpha + slope * xf
    residual = y - predicted
    ss_res = float(np.dot(residual, residual))
    ss_tot = float(np.dot(y - y.mean(), y - y.mean()))
    r2 = None if ss_tot == 0.0 else 1.0 - ss_res / ss_tot
    rel = residual / y * 100.0
    share = slope * float(xf.max()) / float(y.max())
    if n < thresholds.min_points:
        reason = "too_few_points"
    elif r2 is None or r2 < thresholds.r2_min:
        reason = "poor_fit"
    elif share < thresholds.share_min or slope <= 0.0:
        reason = "not_bandwidth_bound"
    else:
        reason = None
    beta = None if reason is not None else beta_gbps_from_slope(slope)
    residuals = [
        {
            "bytes": int(b),
            "measured_us": float(m),
            "predicted_us": float(p),
            "residual_us": float(r),
            "rel_error_pct": float(e),
        }
        for b, m, p, r, e in zip(x, y, predicted, residual, rel, strict=True)
    ]
    return {
        "alpha_us": float(alpha),
        "beta_gbps": beta,
        "beta_withheld_reason": reason,
        "slope_us_per_byte": float(slope),
        "r2": r2,
        "n_points": n,
        "mape_pct": float(np.mean(np.abs(rel))),
        "max_rel_error_pct": float(np.max(np.abs(rel))),
        "bandwidth_share": float(share),
        "alpha_extrapolated": bool(x.min() > thresholds.extrapolation_fraction * x.max()),
        "validated": n >= thresholds.min_points,
        "min_bytes": int(x.min()),
        "max_bytes": int(x.max()),
        "residuals": residuals,
    }
