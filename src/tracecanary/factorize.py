"""Hash-table routines on integer arrays (matching, the program model, the compiler), by
pandas for long arrays and by numpy sorting for short ones, so that a small trace is
loaded and compiled without importing pandas while a long array keeps pandas' speed (its hash tables are 3-10x faster than a
sort from a few thousand elements on).

Both implementations give identical results (tests/test_factorize.py):

- ``factorize(values)``: ``pd.factorize(values, sort=False)`` of a 1-D integer array:
  (int64 code per element, the distinct values in order of first appearance);
- ``distinct(values)``: ``pd.unique(values)``: the distinct values, in order of first
  appearance;
- ``first_rows(codes)``: where each code of such a numbering first appears;
- ``cumcount(keys)``: ``groupby(keys).cumcount()``, by one stable sort at any size;
- ``sorted_distinct(values)``: ``np.unique(values)`` (and ``return_index``), by numpy
  sorting without the numpy.ma import;
- ``group_medians(groups, values)``: ``pd.Series(values).groupby(groups).median()``
  (float64 ``values``, no NaN): (the group keys ascending, each group's median: the
  middle value, or the two middle values' sum halved).

Importing this module imports neither pandas nor pyarrow.
"""

from __future__ import annotations

import numpy as np

PANDAS_MIN_ROWS = 10_000
"""Arrays of at least this many elements are handled by pandas, shorter ones by numpy."""


def use_pandas(rows: int) -> bool:
    """Whether an array of ``rows`` elements goes to the pandas implementation."""
    return rows >= PANDAS_MIN_ROWS


def factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int64 code per element, the distinct values in order of first appearance) of a
    1-D integer array: code i means ``uniques[i]``."""
    values = np.asarray(values)
    if use_pandas(len(values)):
        import pandas as pd

        codes, uniques = pd.factorize(values, sort=False)
        return codes.astype(np.int64, copy=False), uniques
    return _factorize_sorted(values)


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of a 1-D integer array, in order of first appearance."""
    values = np.asarray(values)
    if use_pandas(len(values)):
        import pandas as pd

        return pd.unique(values)
    return _factorize_sorted(values)[1]


def group_medians(groups: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(group keys ascending, the median of each group's ``values``) for integer
    ``groups`` and float64 ``values`` of one length (no NaN)."""
    groups = np.asarray(groups)
    values = np.asarray(values, dtype=np.float64)
    if use_pandas(len(values)):
        import pandas as pd

        med = pd.Series(values).groupby(groups).median()
        return med.index.to_numpy(), med.to_numpy(dtype=np.float64)
    if not len(values):
        return groups[:0], np.zeros(0, dtype=np.float64)
    order = np.lexsort((values, groups))
    keys = groups[order]
    ordered = values[order]
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    counts = np.diff(np.append(starts, len(keys)))
    # odd count: the middle value (x + x) / 2 == x exactly; even: the two middle ones
    low = ordered[starts + (counts - 1) // 2]
    high = ordered[starts + counts // 2]
    return keys[starts], (high + low) / 2


def first_rows(codes: np.ndarray) -> np.ndarray:
    """The row of the first appearance of each code (int64, increasing), for codes that
    number values 0, 1, 2, ... in order of first appearance (as ``factorize`` does)."""
    if len(codes) == 0:
        return np.zeros(0, dtype=np.int64)
    running = np.maximum.accumulate(codes)  # grows exactly where a new code appears
    new = np.ones(len(codes), dtype=bool)
    new[1:] = running[1:] > running[:-1]
    return np.flatnonzero(new)


def cumcount(keys: np.ndarray) -> np.ndarray:
    """Per element: how many earlier elements share its key (row order); int32 (the
    counts and positions, below the element count, fit), int64 past 2**31 elements."""
    n = keys.size
    small = np.int32 if n <= np.iinfo(np.int32).max else np.int64
    out = np.empty(n, dtype=small)
    if n == 0:
        return out
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    new_run = np.empty(n, dtype=bool)
    new_run[0] = True
    np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=new_run[1:])
    del sorted_keys  # a few int64 arrays of the events at a time, not six
    position = np.arange(n, dtype=small)
    run_start = np.where(new_run, position, 0)
    del new_run
    np.maximum.accumulate(run_start, out=run_start)
    position -= run_start
    del run_start
    out[order] = position
    return out


def sorted_distinct(values: np.ndarray, *, return_index: bool = False):
    """The distinct values ascending, as ``np.unique(values)`` gives them (without the
    numpy.ma import np.unique brings: 17 ms of a small command's start); with
    ``return_index``, also where each first appears (``np.unique(...,
    return_index=True)``)."""
    order = np.argsort(values, kind="stable") if return_index else None
    ordered = np.sort(values) if order is None else values[order]
    first = np.ones(ordered.size, dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return ordered[first] if order is None else (ordered[first], order[first])


def _factorize_sorted(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``factorize`` by one stable sort: equal values are adjacent, the first of each
    run is its first appearance."""
    n = len(values)
    if n == 0:
        return np.zeros(0, dtype=np.int64), values[:0]
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.empty(n, dtype=bool)
    starts[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    run = np.cumsum(starts) - 1  # ascending-value index of each sorted element
    first = order[starts]  # first appearance of each distinct value, by value
    by_appearance = np.argsort(first, kind="stable")
    code_of_run = np.empty(len(first), dtype=np.int64)
    code_of_run[by_appearance] = np.arange(len(first), dtype=np.int64)
    codes = np.empty(n, dtype=np.int64)
    codes[order] = code_of_run[run]
    return codes, ordered[starts][by_appearance]
