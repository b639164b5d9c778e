"""Greedy ordered bounded intervals over the rows of a value matrix.

Rows are consecutive units (occurrences, or repetitions of a motif), columns the
values each row holds (one scalar, the skew slots of an occurrence, or every position
of a motif body). An interval [a, b) of rows is *feasible* when, for every column c,
``max - min <= 2 * budget`` over its measured entries; its representative value per
column is the integer midrange ``(min + max) // 2``, whose absolute error is then at
most ``ceil((max - min) / 2) <= budget``.

Feasibility is hereditary (a sub-interval of a feasible interval is feasible), so the
greedy partition that always takes the longest feasible interval is the one with the
fewest intervals. ``max_ends`` finds, for every start row at once, the longest feasible
end by binary lifting over sparse max/min tables (vectorized over rows, O(R log L)
work per column, memory bounded by batching columns); the chain of greedy starts is
then read off in one pass over the intervals.
"""

from __future__ import annotations

import numpy as np

SENTINEL = np.int64(1 << 62)
MAX_VALUE = 1 << 60  # values and budgets must stay below this (~36 years in ns)
LIFT_LEVELS = 11  # one lifting pass extends an interval by up to 2^(L+1)-1 rows
TABLE_BYTES = 32 << 20  # memory allowance for the sparse tables of one window of rows


def _tables(hi: np.ndarray, lo: np.ndarray, levels: int) -> tuple[list, list]:
    mx, mn = [hi], [lo]
    for k in range(1, levels + 1):
        half = 1 << (k - 1)
        prev_x, prev_n = mx[-1], mn[-1]
        mx.append(np.maximum(prev_x[:-half], prev_x[half:]))
        mn.append(np.minimum(prev_n[:-half], prev_n[half:]))
    return mx, mn


def _lift(mx, mn, pos, cmx, cmn, thr, rows: int, levels: int):
    """Extend every interval [start, pos) greedily by the largest powers of two."""
    for k in range(levels, -1, -1):
        step = 1 << k
        can = pos + step <= rows
        if not can.any():
            continue
        idx = np.minimum(pos, rows - step)
        nmx = np.maximum(cmx, mx[k][idx])
        nmn = np.minimum(cmn, mn[k][idx])
        ok = can & ((nmx - nmn) <= thr).all(axis=1)
        pos = np.where(ok, pos + step, pos)
        cmx = np.where(ok[:, None], nmx, cmx)
        cmn = np.where(ok[:, None], nmn, cmn)
    return pos, cmx, cmn


def _hi_lo(values: np.ndarray, measured: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    if measured is None:
        return values, values
    return np.where(measured, values, -SENTINEL), np.where(measured, values, SENTINEL)


def partition(
    values: np.ndarray,
    budgets: np.ndarray,
    *,
    measured: np.ndarray | None = None,
    breaks: np.ndarray | None = None,
) -> np.ndarray:
    """Greedy interval starts (row indices, ascending, first 0) for ``values`` (R x C).

    ``budgets`` broadcasts to (R, C); the budget of an interval is read at its start row
    (callers put a break wherever a row's budget changes). ``breaks[r]`` forbids an
    interval holding both rows r-1 and r.
    """
    values = np.asarray(values, dtype=np.int64)
    rows, cols = values.shape
    if rows == 0:
        return np.zeros(0, dtype=np.int64)
    budgets = np.broadcast_to(np.asarray(budgets, dtype=np.int64), (rows, cols))
    # Rows r-1 and r that cannot share an interval (some column differs by more than
    # twice its budget) are a forced break: intervals never cross it. Only starts whose
    # block has more rows than one need the lifting below.
    brk = np.zeros(rows, dtype=bool)
    if breaks is not None:
        brk |= np.asarray(breaks, dtype=bool)
    if rows > 1:
        apart = np.abs(values[1:] - values[:-1]) > 2 * budgets[:-1]
        if measured is not None:
            apart &= measured[1:] & measured[:-1]
        brk[1:] |= apart.any(axis=1)
    brk[0] = False
    cut = np.flatnonzero(brk)
    starts_all = np.arange(rows, dtype=np.int64)
    k = np.searchsorted(cut, starts_all, side="right")
    ends = np.where(
        k < len(cut), cut[np.minimum(k, max(len(cut) - 1, 0))] if len(cut) else rows, rows
    )
    active = np.flatnonzero(ends - starts_all > 1)
    tables = []
    levels = 0
    if len(active):
        longest = int((ends - starts_all).max())
        levels = max(0, min(LIFT_LEVELS, int(np.floor(np.log2(longest)))))
        # a lift from start s reads table rows below s + reach only: the starts are
        # lifted a window of rows at a time over tables of that window plus reach rows
        # (the same ends as whole-matrix tables; memory bounded by TABLE_BYTES)
        reach = 1 << (levels + 1)
        window = max(reach, int(TABLE_BYTES // (16 * (levels + 2) * cols)))
        per_col = 16 * min(rows, window + reach) * (levels + 2)
        batch = max(1, int(TABLE_BYTES // max(per_col, 1)))
        starts = starts_all[active]
        for r0 in range(0, rows, window):
            i0, i1 = np.searchsorted(starts, [r0, r0 + window])
            if i0 == i1:
                continue
            here = active[i0:i1]
            # table origin: at most r0, and at least 2^levels rows before the end
            t0 = min(r0, max(0, rows - reach))
            t1 = min(rows, r0 + window + reach)
            for c0 in range(0, cols, batch):
                sl = slice(c0, min(cols, c0 + batch))
                hi, lo = _hi_lo(
                    values[t0:t1, sl], None if measured is None else measured[t0:t1, sl]
                )
                mx, mn = _tables(hi, lo, levels)
                thr = 2 * budgets[starts[i0:i1], sl]
                cmx = np.full((i1 - i0, hi.shape[1]), -SENTINEL, dtype=np.int64)
                cmn = np.full((i1 - i0, hi.shape[1]), SENTINEL, dtype=np.int64)
                pos, _, _ = _lift(mx, mn, starts[i0:i1] - t0, cmx, cmn, thr, t1 - t0, levels)
                ends[here] = np.minimum(ends[here], pos + t0)
                del mx, mn, hi, lo
    cap = (1 << (levels + 1)) - 1
    if not len(active):
        return starts_all
    out = []
    a = 0
    while a < rows:
        out.append(a)
        b = int(ends[a])
        if b - a >= cap and b < rows and not brk[b]:
            b = _extend(values, measured, budgets, brk, a, b, tables)
        a = b
    return np.asarray(out, dtype=np.int64)


def _extend(values, measured, budgets, breaks, a: int, b: int, tables) -> int:
    """Longest feasible end for an interval from ``a`` already known feasible to ``b``
    (the lifting passes stop at their cap; rare: only very long intervals)."""
    rows = values.shape[0]
    limit = rows
    if breaks is not None:
        later = np.flatnonzero(np.asarray(breaks, dtype=bool)[a + 1 :])
        if len(later):
            limit = a + 1 + int(later[0])
    hi, lo = _hi_lo(values, measured)
    cmx = hi[a:b].max(axis=0)
    cmn = lo[a:b].min(axis=0)
    thr = 2 * budgets[a]
    step = 1024
    while b < limit:
        hi_chunk = np.maximum.accumulate(np.maximum(hi[b : min(limit, b + step)], cmx), axis=0)
        lo_chunk = np.minimum.accumulate(np.minimum(lo[b : min(limit, b + step)], cmn), axis=0)
        bad = ((hi_chunk - lo_chunk) > thr).any(axis=1)
        if bad.any():
            return b + int(np.argmax(bad))
        cmx, cmn = hi_chunk[-1], lo_chunk[-1]
        b += len(hi_chunk)
        step *= 2
    return b


def summarize(
    values: np.ndarray, starts: np.ndarray, measured: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per interval and column: (representative, has_measured, max abs error).

    The representative is the integer midrange of the measured entries; columns with no
    measured entry in an interval have ``has_measured`` False (representative and error
    then meaningless, written as null)."""
    values = np.asarray(values, dtype=np.int64)
    hi, lo = _hi_lo(values, measured)
    mx = np.maximum.reduceat(hi, starts, axis=0)
    mn = np.minimum.reduceat(lo, starts, axis=0)
    if measured is None:
        has = np.ones(mx.shape, dtype=bool)
    else:
        has = np.logical_or.reduceat(measured, starts, axis=0)
    rep = np.where(has, (mx + mn) // 2, 0)
    err = np.where(has, np.maximum(mx - rep, rep - mn), 0)
    return rep, has, err
