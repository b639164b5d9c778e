"""Deterministic PNG plots of one analysed ladder (matplotlib, Agg canvas).

Three plots per ladder, drawn from the *report dict* (so they show exactly what the JSON
says): time vs bytes (log-log) with the fitted segments and the global line, algbw and
busbw vs bytes with the saturation entry marked, and relative residuals vs bytes.

Determinism: matplotlib's built-in default style (the user's matplotlibrc is ignored), the
bundled DejaVu fonts, a fixed size and dpi, and PNG metadata without the ``Software`` key
and without timestamps: the same report gives the same PNG bytes with the same matplotlib
version. Zero-byte rungs cannot sit on a log axis and are left out (they are excluded from
every fit anyway).
"""

from __future__ import annotations

import io

import matplotlib as mpl
import matplotlib.style as mpl_style
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

PLOT_KINDS: tuple[str, ...] = ("time_vs_bytes", "algbw_vs_bytes", "residuals")
_FIGSIZE = (7.5, 4.6)
_DPI = 100
_COLORS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#ff7f0e")


def _pow10_label(value: float, _pos: int) -> str:
    """Plain-text tick labels ("1e6") for log axes: no mathtext, so no parser in the loop."""
    if value <= 0:
        return ""
    exponent = int(round(np.log10(value)))
    return f"1e{exponent}" if np.isclose(value, 10.0**exponent) else ""


def _log_axis(axis) -> None:
    axis.set_major_formatter(FuncFormatter(_pow10_label))
    axis.set_minor_formatter(NullFormatter())


def plot_file_name(ladder_id: str, kind: str) -> str:
    return f"{ladder_id}.{kind}.png"


def _png_bytes(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, metadata={"Software": None})
    return buf.getvalue()


def _fit_curve(fit: dict, x_min: float, x_max: float) -> tuple[np.ndarray, np.ndarray]:
    x = np.geomspace(max(x_min, 1.0), max(x_max, 1.0), 64)
    y = fit["alpha_us"] + fit["slope_us_per_byte"] * x
    keep = y > 0
    return x[keep], y[keep]


def _fit_label(name: str, fit: dict) -> str:
    if fit["beta_gbps"] is not None:
        beta = f"beta={fit['beta_gbps']:.4g} GB/s"
    else:
        beta = f"beta withheld: {fit['beta_withheld_reason']}"
    r2 = "n/a" if fit["r2"] is None else f"{fit['r2']:.3f}"
    return f"{name}: {beta} (R2={r2}, n={fit['n_points']})"


def _segments(ladder: dict) -> list[tuple[str, dict]]:
    seg = ladder["fits"]["segments"]
    out = []
    for item in seg["items"]:
        if item["basis"] == "tuning":
            out.append((f"{item['algorithm']}/{item['protocol']}", item["fit"]))
        else:
            out.append(("from saturation entry", item["fit"]))
    return out


def _time_plot(ladder: dict) -> Figure:
    fig = Figure(figsize=_FIGSIZE, dpi=_DPI)
    ax = fig.subplots()
    rungs = [r for r in ladder["rungs"] if r["bytes"] > 0]
    inc = [r for r in rungs if r["excluded"] is None]
    exc = [r for r in rungs if r["excluded"] is not None]
    if inc:
        ax.plot(
            [r["bytes"] for r in inc],
            [r["median_us"] for r in inc],
            "o",
            color="black",
            ms=4,
            label="median",
        )
        ax.plot(
            [r["bytes"] for r in inc],
            [r["p95_us"] for r in inc],
            "_",
            color="gray",
            ms=6,
            label="p95",
        )
    if exc:
        ax.plot(
            [r["bytes"] for r in exc],
            [r["median_us"] for r in exc],
            "x",
            color="red",
            ms=6,
            label="excluded",
        )
    g = ladder["fits"]["global"]
    if g["alpha_us"] is not None and rungs:
        x, y = _fit_curve(g, min(r["bytes"] for r in rungs), max(r["bytes"] for r in rungs))
        ax.plot(x, y, "--", color="#d62728", lw=1.2, label=_fit_label("global", g))
    for i, (name, fit) in enumerate(_segments(ladder)):
        if fit["alpha_us"] is None:
            continue
        x, y = _fit_curve(fit, fit["min_bytes"], fit["max_bytes"])
        ax.plot(
            x,
            y,
            "-",
            color=_COLORS[i % len(_COLORS)],
            lw=2.0,
            alpha=0.8,
            label=_fit_label(name, fit),
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    _log_axis(ax.xaxis)
    _log_axis(ax.yaxis)
    ax.set_xlabel("bytes")
    ax.set_ylabel("time (us)")
    ax.set_title(f"{ladder['id']}: time vs bytes", fontsize=9)
    ax.grid(True, which="major", lw=0.4, alpha=0.5)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left")
    fig.subplots_adjust(left=0.11, right=0.97, bottom=0.12, top=0.92)
    return fig


def _algbw_plot(ladder: dict) -> Figure:
    fig = Figure(figsize=_FIGSIZE, dpi=_DPI)
    ax = fig.subplots()
    inc = [r for r in ladder["rungs"] if r["bytes"] > 0 and r["excluded"] is None]
    if inc:
        x = [r["bytes"] for r in inc]
        ax.plot(
            x, [r["algbw_gbps"] for r in inc], "o-", color="#1f77b4", ms=3, lw=1.2, label="algbw"
        )
        ax.plot(
            x, [r["busbw_gbps"] for r in inc], "s--", color="#2ca02c", ms=3, lw=1.0, label="busbw"
        )
    peak = ladder["peak_algbw_gbps"]
    entry = ladder["saturation_entry_bytes"]
    if peak is not None and peak > 0:
        frac = ladder.get("_saturation_fraction")
        if frac is not None:
            ax.axhline(frac * peak, color="gray", lw=0.8, ls=":", label=f"{frac:g} x peak algbw")
    if entry is not None and entry > 0:
        ax.axvline(entry, color="#d62728", lw=1.0, ls="--", label=f"saturation entry {entry} B")
    ax.set_xscale("log")
    _log_axis(ax.xaxis)
    ax.set_xlabel("bytes")
    ax.set_ylabel("bandwidth (GB/s, decimal)")
    ax.set_title(f"{ladder['id']}: algbw vs bytes", fontsize=9)
    ax.grid(True, which="major", lw=0.4, alpha=0.5)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left")
    fig.subplots_adjust(left=0.11, right=0.97, bottom=0.12, top=0.92)
    return fig


def _residual_plot(ladder: dict) -> Figure:
    fig = Figure(figsize=_FIGSIZE, dpi=_DPI)
    ax = fig.subplots()
    series = [("global", ladder["fits"]["global"], "#d62728", "x")]
    series += [
        (name, fit, _COLORS[i % len(_COLORS)], "o")
        for i, (name, fit) in enumerate(_segments(ladder))
    ]
    for name, fit, color, marker in series:
        pts = [p for p in fit["residuals"] if p["bytes"] > 0]
        if not pts:
            continue
        ax.plot(
            [p["bytes"] for p in pts],
            [p["rel_error_pct"] for p in pts],
            marker=marker,
            ls="-",
            lw=0.8,
            ms=4,
            color=color,
            label=f"{name} (MAPE {fit['mape_pct']:.3g}%)",
        )
    ax.axhline(0.0, color="black", lw=0.6)
    ax.set_xscale("log")
    _log_axis(ax.xaxis)
    ax.set_xlabel("bytes")
    ax.set_ylabel("(measured - predicted) / measured (%)")
    ax.set_title(f"{ladder['id']}: residuals vs bytes", fontsize=9)
    ax.grid(True, which="major", lw=0.4, alpha=0.5)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="best")
    fig.subplots_adjust(left=0.11, right=0.97, bottom=0.12, top=0.92)
    return fig


def render_ladder_plots(ladder: dict, *, saturation_fraction: float) -> dict[str, bytes]:
    """``{file name: PNG bytes}`` for the three plots of one analysed ladder."""
    view = dict(ladder)
    view["_saturation_fraction"] = saturation_fraction
    out = {}
    with mpl_style.context("default"), mpl.rc_context({"font.family": "DejaVu Sans"}):
        for kind, draw in zip(PLOT_KINDS, (_time_plot, _algbw_plot, _residual_plot), strict=True):
            out[plot_file_name(ladder["id"], kind)] = _png_bytes(draw(view))
    return out
