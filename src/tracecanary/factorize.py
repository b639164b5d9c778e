"""Factorizing integer keys in order of first appearance, without pandas for small inputs.

``first_seen`` gives what ``pandas.factorize(keys, sort=False)`` gives: each key's index
among the distinct keys numbered in order of first appearance, and those keys. Up to
``PANDAS_FACTORIZE_ROWS`` keys it sorts with numpy (no pandas import, which costs more
than the work on a small trace); above, it uses pandas' hash table, whose import is then
a small part of the work. Both give the same result (pinned by tests).
"""

from __future__ import annotations

import numpy as np

PANDAS_FACTORIZE_ROWS = 1 << 16


def first_seen(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int64 code per key, the distinct keys in order of first appearance) of a 1-D
    integer array: ``uniques[codes] == keys``, and code i first appears before code i+1."""
    keys = np.asarray(keys)
    if keys.size > PANDAS_FACTORIZE_ROWS:
        import pandas as pd

        codes, uniques = pd.factorize(keys, sort=False)
        return codes.astype(np.int64, copy=False), np.asarray(uniques)
    n = keys.size
    if n == 0:
        return np.zeros(0, dtype=np.int64), keys[:0].copy()
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    sorted_id = np.cumsum(new) - 1  # per sorted position: its key's index in sorted order
    first = order[new]  # per distinct key (sorted): its first position (the sort is stable)
    by_first = np.argsort(first, kind="stable")
    code_of_sorted = np.empty(by_first.size, dtype=np.int64)
    code_of_sorted[by_first] = np.arange(by_first.size, dtype=np.int64)
    codes = np.empty(n, dtype=np.int64)
    codes[order] = code_of_sorted[sorted_id]
    return codes, ordered[new][by_first]
