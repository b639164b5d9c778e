"""Deterministic PNG figures and the axis conventions every plot shares.

Determinism: matplotlib's built-in default style (the user's matplotlibrc is ignored), the
bundled DejaVu fonts, a fixed size and dpi, and PNG metadata without the ``Software`` key
and without timestamps: the same data give the same PNG bytes with the same matplotlib
version. Axis text follows ``tracecanary.formatting``: byte axes tick at powers of two
labelled ``1K``/``1M``/``1G``; log time axes label every tick they draw (1-2-5 steps within a
decade when the axis spans few decades), never a lone ``1e4``.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator

import matplotlib as mpl
import matplotlib.style as mpl_style
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from tracecanary.formatting import size_tick

DPI = 100
WIDE = (10.0, 5.6)  # inches: 1000 x 560 px, readable at the report's content width
FONT = "DejaVu Sans"
PALETTE = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#ff7f0e")
BYTES_AXIS_LABEL = "message size (bytes; K = 1024)"


@contextlib.contextmanager
def plot_style() -> Iterator[None]:
    """The fixed style every figure is drawn under."""
    with mpl_style.context("default"), mpl.rc_context({"font.family": FONT}):
        yield


def new_figure(figsize: tuple[float, float] = WIDE) -> Figure:
    return Figure(figsize=figsize, dpi=DPI)


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG bytes, without a Software key or timestamps."""
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def bytes_axis(axis) -> None:
    """A log byte axis: ticks at powers of two (thinned to about 12), labelled 1K, 1M, 1G."""
    axis.set_major_locator(LogLocator(base=2, numticks=12))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: size_tick(v) if v > 0 else ""))
    axis.set_minor_formatter(NullFormatter())


def log_value_axis(axis) -> None:
    """A log axis of plain values (times, bandwidths): 1-2-5 ticks, each labelled in full."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=12))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,g}" if v > 0 else ""))
    axis.set_minor_formatter(NullFormatter())
