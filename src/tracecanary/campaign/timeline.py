"""A per-source timeline: the source's collectives per rank beside what the canary executes.

One PNG per source, three views sharing one time axis (time since the first collective),
plus a straggler view:

1. the source: one lane per rank, a tick per collective the rank takes part in, at its
   arrival (issue time + the rank's measured skew where skew is known);
2. the canary: the same lanes, a tick per occurrence the canary *executes* (reduced
   execution), coloured by its weight (how many source occurrences it stands for);
3. tail windows (rare high-overlap stretches kept whole by reduced execution) shaded on
   both lanes views;
4. per rank, the arrival skew (arrival minus the occurrence's first arrival) as a box
   (5th-95th percentile whiskers) and how often that rank arrived last: the straggler.
   Where the source's skew is unknown the view says so and why, never draws zeros.

Drawn from the normalized source table and the canary file only. Deterministic PNG bytes
(``tracecanary.figures``). A source with more than ``MAX_TICKS_PER_LANE`` occurrences is
drawn with an even stride over its occurrences; the title says so.
"""

from __future__ import annotations

import numpy as np
from matplotlib.colors import Normalize

from tracecanary.canonical import write_bytes_atomic
from tracecanary.compile.document import load_canary
from tracecanary.compile.reductions import executed_selection
from tracecanary.errors import InputError
from tracecanary.figures import PALETTE, new_figure, plot_style, png_bytes
from tracecanary.formatting import count, duration_ns, percent
from tracecanary.load import load_program
from tracecanary.program import Program

MAX_TICKS_PER_LANE = 50_000
FIGSIZE = (12.0, 8.0)  # 1200 x 800 px
TIME_UNITS = (("s", 1e9), ("ms", 1e6), ("us", 1e3), ("ns", 1.0))
TAIL_COLOR = "#d62728"


def _time_unit(span_ns: float) -> tuple[str, float]:
    for unit, scale in TIME_UNITS:
        if span_ns >= 10 * scale:
            return unit, scale
    return "ns", 1.0


def _tail_windows(tail: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) occurrence ranges of consecutive tail occurrences."""
    edges = np.diff(np.concatenate([[0], tail.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), strict=True))


def _member_arrivals(program: Program, issue: np.ndarray) -> tuple[np.ndarray, ...]:
    """(occ, rank, arrival_ns) of every member; arrival = issue where skew is unknown."""
    members = program.members
    occ = members["occ"].to_numpy(dtype=np.int64)
    rank = members["rank"].to_numpy(dtype=np.int64)
    skew = members["skew_ns"].to_numpy(dtype=np.int64) if program.skew_known else 0
    return occ, rank, issue[occ] + skew


def _stride(n: int) -> int:
    return max(1, -(-n // MAX_TICKS_PER_LANE))


def drawn_executed(occ: np.ndarray, executed: np.ndarray, stride: int) -> np.ndarray:
    """Which members of executed occurrences are drawn: every one unless the canary
    executes more than ``MAX_TICKS_PER_LANE`` occurrences, then an even stride of them."""
    n_exec = int(executed.sum())
    if n_exec <= MAX_TICKS_PER_LANE:
        return np.ones(len(occ), dtype=bool)
    order = np.cumsum(executed) - 1  # index of each executed occurrence among executed ones
    return (order[occ] % _stride(n_exec)) == 0


def _lanes(ax, times_by_rank: dict[int, np.ndarray], colors, world_size: int, **kw) -> None:
    positions = [times_by_rank.get(r, np.empty(0)) for r in range(world_size)]
    ax.eventplot(positions, lineoffsets=range(world_size), linelengths=0.8, colors=colors, **kw)
    ax.set_yticks(range(world_size), [f"rank {r}" for r in range(world_size)])
    ax.set_ylim(world_size - 0.5, -0.5)


def _shade_tails(ax, windows, issue: np.ndarray, scale: float) -> None:
    for start, stop in windows:
        lo, hi = issue[start] / scale, issue[stop - 1] / scale
        if hi <= lo:
            hi = lo + (issue[-1] / scale if len(issue) else 1.0) * 0.002
        ax.axvspan(  # above the ticks, so dense lanes do not hide the windows
            lo,
            hi,
            color=TAIL_COLOR,
            alpha=0.25,
            lw=0,
            zorder=3,
        )


def _straggler_view(ax, program: Program, occ, rank, arrival) -> None:
    world = program.world_size
    ax.set_title(
        "per-rank arrival skew (arrival minus the occurrence's first arrival)", fontsize=10
    )
    if not program.skew_known:
        ax.text(
            0.5,
            0.5,
            f"skew unknown: {program.skew_reason}",
            ha="center",
            va="center",
            wrap=True,
            transform=ax.transAxes,
            fontsize=10,
        )
        ax.set_yticks([])
        ax.set_xticks([])
        return
    first = np.full(program.n, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, occ, arrival)
    last = np.full(program.n, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(last, occ, arrival)
    skew = arrival - first[occ]
    multi = np.bincount(occ, minlength=program.n)[occ] > 1
    unit, scale = _time_unit(10 * float(np.percentile(skew, 95)) if skew.size else 0.0)
    data, labels = [], []
    for r in range(world):
        mine = (rank == r) & multi
        values = skew[mine] / scale
        data.append(values if values.size else np.zeros(1))
        late = mine & (arrival == last[occ]) & (last[occ] > first[occ])
        share = late.sum() / max(int(mine.sum()), 1)
        labels.append(f"rank {r}\nlast in {percent(share)}")
    ax.boxplot(
        data,
        orientation="horizontal",
        whis=(5, 95),
        showfliers=False,
        tick_labels=labels,
        patch_artist=True,
        boxprops={"facecolor": "#cfe2f3"},
        medianprops={"color": "black"},
    )
    ax.invert_yaxis()
    ax.set_xlabel(f"arrival skew ({unit}); whiskers 5th-95th percentile")
    ax.grid(True, axis="x", lw=0.4, alpha=0.5)


def render_timeline(program: Program, canary: dict, *, source: str) -> bytes:
    """The timeline PNG of ``program`` (the source) and ``canary`` (see module doc)."""
    n_canary = int(canary["structure"]["occurrences"])
    if n_canary != program.n:
        raise InputError(
            f"canary has {n_canary} logical occurrences, the source {program.n}: "
            "not a canary of this source",
            field="structure.occurrences",
        )
    issue = program.issue_ns().astype(np.int64)
    span = float(issue[-1]) if program.n else 0.0
    unit, scale = _time_unit(span)
    occ, rank, arrival = _member_arrivals(program, issue)
    stride = _stride(program.n)
    drawn = (occ % stride) == 0
    tail = program.occurrences["tail"].to_numpy(dtype=bool)
    windows = _tail_windows(tail)
    executed, weights = executed_selection(canary)
    executed_set = np.zeros(program.n, dtype=bool)
    executed_set[executed] = True
    weight_of = np.zeros(program.n)
    weight_of[executed] = weights

    with plot_style():
        fig = new_figure(FIGSIZE)
        grid = fig.add_gridspec(
            3, 2, height_ratios=(1.0, 1.0, 1.1), width_ratios=(1.0, 0.015), hspace=0.55
        )
        ax_src = fig.add_subplot(grid[0, 0])
        ax_can = fig.add_subplot(grid[1, 0], sharex=ax_src)
        ax_bar = fig.add_subplot(grid[1, 1])
        ax_skew = fig.add_subplot(grid[2, :])

        by_rank = {r: arrival[drawn & (rank == r)] / scale for r in range(program.world_size)}
        _lanes(
            ax_src, by_rank, [PALETTE[0]] * program.world_size, program.world_size, linewidths=0.6
        )
        _shade_tails(ax_src, windows, issue, scale)
        sampled = "" if stride == 1 else f", every {stride}th drawn"
        shaded = f"; shaded: {len(windows)} tail windows" if windows else ""
        if not program.skew_known:
            shaded += "; skew unknown: ranks drawn at the issue time"
        ax_src.set_title(
            f"source: {count(program.n)} collectives on {program.world_size} ranks over "
            f"{duration_ns(span)}{sampled}{shaded}",
            fontsize=10,
        )

        ex = executed_set[occ] & drawn_executed(occ, executed_set, stride)
        log_w = np.log10(np.maximum(weight_of[occ[ex]], 1.0))
        norm = Normalize(vmin=0.0, vmax=max(float(log_w.max()) if log_w.size else 0.0, 1.0))
        points = ax_can.scatter(
            arrival[ex] / scale,
            rank[ex],
            c=log_w,
            cmap="viridis",
            norm=norm,
            marker="|",
            s=120,
            linewidths=0.9,
        )
        ax_can.set_yticks(
            range(program.world_size), [f"rank {r}" for r in range(program.world_size)]
        )
        ax_can.set_ylim(program.world_size - 0.5, -0.5)
        _shade_tails(ax_can, windows, issue, scale)
        n_exec = int(executed_set.sum())
        ax_can.set_title(
            f"canary: executes {count(n_exec)} of {count(program.n)} occurrences "
            f"({percent(n_exec / max(program.n, 1))}); colour = weight "
            "(source occurrences each stands for)",
            fontsize=10,
        )
        ax_can.set_xlabel(f"time since the first collective ({unit})")
        bar = fig.colorbar(points, cax=ax_bar)
        bar.set_label("log10 weight", fontsize=8)
        for ax in (ax_src, ax_can):
            ax.grid(True, axis="x", lw=0.4, alpha=0.5)

        _straggler_view(ax_skew, program, occ, rank, arrival)
        fig.suptitle(f"{source}: collectives per rank over time, source vs canary", fontsize=12)
        fig.subplots_adjust(left=0.12, right=0.95, bottom=0.07, top=0.9)
        return png_bytes(fig)


def write_timeline(table: str, canary_path: str, output: str, *, source: str) -> str:
    """Render the timeline of the normalized source ``table`` and the canary at
    ``canary_path`` to ``output`` (PNG, atomic); return its SHA-256."""
    program = load_program(table)
    return write_bytes_atomic(
        output, render_timeline(program, load_canary(canary_path), source=source)
    )
