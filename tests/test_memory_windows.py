"""Bounded-memory paths give the same results as the whole-array ones: the greedy
interval partition lifted a window of rows at a time, and matching's per-occurrence
reductions taken a block of occurrences at a time."""

from __future__ import annotations

import numpy as np
import pytest

from tracecanary import matching
from tracecanary.compile import intervals


def _greedy(values: np.ndarray, budgets: np.ndarray, breaks: np.ndarray) -> list[int]:
    """The longest-feasible-interval partition, row by row (the definition)."""
    rows = values.shape[0]
    out, a = [], 0
    while a < rows:
        out.append(a)
        b = a + 1
        while b < rows and not breaks[b]:
            block = values[a : b + 1]
            if ((block.max(axis=0) - block.min(axis=0)) > 2 * budgets[a]).any():
                break
            b += 1
        a = b
    return out


@pytest.mark.parametrize("levels", [1, 3, intervals.LIFT_LEVELS])
@pytest.mark.parametrize("seed", range(4))
def test_partition_in_row_windows_equals_whole_tables_and_the_greedy_definition(
    seed, levels, monkeypatch
):
    rng = np.random.default_rng(seed)
    rows, cols = int(rng.integers(50, 400)), int(rng.integers(1, 4))
    # slowly drifting values: intervals of many rows, some longer than a window
    values = np.cumsum(rng.integers(-3, 4, size=(rows, cols)), axis=0).astype(np.int64)
    budgets = np.full((rows, 1), int(rng.integers(1, 20)), dtype=np.int64)
    breaks = rng.random(rows) < 0.01
    monkeypatch.setattr(intervals, "LIFT_LEVELS", levels)  # low: many windows of 2^(L+1) rows
    whole = intervals.partition(values, budgets, breaks=breaks)
    monkeypatch.setattr(intervals, "TABLE_BYTES", 1)  # the smallest window: 2^(levels+1) rows
    windowed = intervals.partition(values, budgets, breaks=breaks)
    brk = breaks.copy()
    brk[0] = False
    assert windowed.tolist() == whole.tolist() == _greedy(values, budgets, brk)


@pytest.mark.parametrize("chunk", [1, 2, 7, 1 << 20])
def test_occurrence_reductions_in_blocks_equal_one_reduction(chunk, monkeypatch):
    rng = np.random.default_rng(chunk)
    events = 500
    occ_of = rng.integers(0, 60, size=events)
    occ_of = np.unique(occ_of, return_inverse=True)[1].astype(np.int64)  # 0..G-1, all used
    order = np.argsort(occ_of, kind="stable")
    count = int(occ_of.max()) + 1
    occs = matching._Occurrences(
        occ_of, order, np.searchsorted(occ_of[order], np.arange(count + 1))
    )
    values = rng.integers(-1000, 1000, size=events).astype(np.int64)
    present = rng.random(events) < 0.7
    floor = np.iinfo(np.int64).min
    want_max = np.full(count, floor)
    np.maximum.at(want_max, occ_of, np.where(present, values, floor))
    want_min = np.full(count, np.iinfo(np.int64).max)
    np.minimum.at(want_min, occ_of, values)
    monkeypatch.setattr(matching, "_CHUNK", chunk)
    assert occs.reduce(np.maximum, values, present, floor).tolist() == want_max.tolist()
    assert occs.reduce(np.minimum, values).tolist() == want_min.tolist()


@pytest.mark.parametrize("chunk", [1, 3, 1 << 20])
def test_compile_self_check_skew_error_in_blocks_equals_the_per_occurrence_maximum(
    chunk, monkeypatch
):
    from tracecanary.compile import canary

    rng = np.random.default_rng(chunk)
    sizes = rng.integers(0, 5, size=40)  # some occurrences without members
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    src = rng.integers(0, 100, size=int(offsets[-1])).astype(np.int64)
    got = src + rng.integers(-9, 10, size=src.size)
    want = [
        int(np.abs(src[a:b] - got[a:b]).max()) if b > a else 0
        for a, b in zip(offsets[:-1], offsets[1:], strict=True)
    ]
    monkeypatch.setattr(canary, "_SELF_CHECK_MEMBERS", chunk)
    assert canary._largest_member_error(src, got, offsets).tolist() == want
