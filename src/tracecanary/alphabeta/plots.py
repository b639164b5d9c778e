"""Deterministic PNG plots of one analysed ladder (matplotlib, Agg canvas).

Three plots per ladder, drawn from the *report dict* (so they show exactly what the JSON
says): time vs message size (log-log) with the fitted segments and the global line, algbw
and busbw vs message size with the saturation entry marked, and relative residuals vs
message size. Titles name what was measured (collective, dtype, ranks, configuration),
not the ladder id; message sizes tick as 1K/1M/1G and every axis states its unit
(``tracecanary.figures``). Determinism is ``tracecanary.figures``'s: the same report gives
the same PNG bytes with the same matplotlib version. Zero-byte rungs cannot sit on a log
axis and are left out (they are excluded from every fit anyway).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from tracecanary.figures import (
    BYTES_AXIS_LABEL,
    PALETTE,
    bytes_axis,
    log_value_axis,
    new_figure,
    plot_style,
    png_bytes,
)
from tracecanary.formatting import significant, size

PLOT_KINDS: tuple[str, ...] = ("time_vs_bytes", "algbw_vs_bytes", "residuals")
_COLORS = PALETTE
_UNSPECIFIED = "unspecified"


def plot_file_name(ladder_id: str, kind: str) -> str:
    return f"{ladder_id}.{kind}.png"


def ladder_title(ladder: dict, what: str) -> str:
    """``all_reduce, float32, 8 ranks, <configuration>: <what>`` (the configuration: the
    placement, reduction op and run where the ladder states them, and its source file)."""
    parts = [ladder["collective"], ladder["dtype"], f"{ladder['world_size']} ranks"]
    for key in ("placement", "op"):
        if ladder.get(key) not in (None, "", _UNSPECIFIED):
            parts.append(f"{key} {ladder[key]}")
    if ladder.get("input") or ladder.get("run"):
        parts.append(f"input {ladder.get('input', 0)} run {ladder.get('run', 0)}")
    if ladder.get("source"):
        parts.append(Path(str(ladder["source"])).name)
    return f"{', '.join(parts)}\n{what}"


def _fit_curve(fit: dict, x_min: float, x_max: float) -> tuple[np.ndarray, np.ndarray]:
    x = np.geomspace(max(x_min, 1.0), max(x_max, 1.0), 64)
    y = fit["alpha_us"] + fit["slope_us_per_byte"] * x
    keep = y > 0
    return x[keep], y[keep]


def _fit_label(name: str, fit: dict) -> str:
    if fit["beta_gbps"] is not None:
        beta = f"beta={significant(fit['beta_gbps'])} GB/s"
    else:
        beta = f"beta withheld: {fit['beta_withheld_reason']}"
    r2 = "n/a" if fit["r2"] is None else significant(fit["r2"])
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
    fig = new_figure()
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
    bytes_axis(ax.xaxis)
    log_value_axis(ax.yaxis)
    ax.set_xlabel(BYTES_AXIS_LABEL)
    ax.set_ylabel("time per collective (us)")
    ax.set_title(ladder_title(ladder, "time vs message size"), fontsize=10)
    ax.grid(True, which="major", lw=0.4, alpha=0.5)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left")
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.11, top=0.88)
    return fig


def _algbw_plot(ladder: dict) -> Figure:
    fig = new_figure()
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
        ax.axvline(entry, color="#d62728", lw=1.0, ls="--", label=f"saturation entry {size(entry)}")
    ax.set_xscale("log")
    bytes_axis(ax.xaxis)
    ax.set_xlabel(BYTES_AXIS_LABEL)
    ax.set_ylabel("bandwidth (GB/s, decimal)")
    ax.set_title(ladder_title(ladder, "algbw and busbw vs message size"), fontsize=10)
    ax.grid(True, which="major", lw=0.4, alpha=0.5)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left")
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.11, top=0.88)
    return fig


def _residual_plot(ladder: dict) -> Figure:
    fig = new_figure()
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
            label=f"{name} (MAPE {significant(fit['mape_pct'])}%)",
        )
    ax.axhline(0.0, color="black", lw=0.6)
    ax.set_xscale("log")
    bytes_axis(ax.xaxis)
    ax.set_xlabel(BYTES_AXIS_LABEL)
    ax.set_ylabel("(measured - predicted) / measured (%)")
    ax.set_title(ladder_title(ladder, "fit residuals vs message size"), fontsize=10)
    ax.grid(True, which="major", lw=0.4, alpha=0.5)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="best")
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.11, top=0.88)
    return fig


def render_ladder_plots(ladder: dict, *, saturation_fraction: float) -> dict[str, bytes]:
    """``{file name: PNG bytes}`` for the three plots of one analysed ladder."""
    view = dict(ladder)
    view["_saturation_fraction"] = saturation_fraction
    out = {}
    with plot_style():
        for kind, draw in zip(PLOT_KINDS, (_time_plot, _algbw_plot, _residual_plot), strict=True):
            out[plot_file_name(ladder["id"], kind)] = png_bytes(draw(view))
    return out
