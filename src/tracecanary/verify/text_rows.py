"""Row-wise inequality of a source program's text column and a canary's expansion of it,
a chunk of rows at a time, in the form the source holds the column.

The canary's side of a text column is its signatures' values (``literals``) indexed by
each occurrence's signature id. The source's side is compared in one of two ways, which
give the same rows (tests/test_verify_text_rows.py):

- ``TextRows`` (numpy, no pandas): a column-form source (``Program.holds_columns``)
  whose texts, like the canary's, are all ``str``. A ``TextColumn`` is compared by its
  codes, mapped once into one vocabulary with the canary's literals (no Python step per
  row); an object array of str by numpy's element-wise comparison.
- ``arrow_differs`` (pandas ``str`` arrays compared in Arrow): a source held as
  DataFrames, whose text columns are Arrow strings already (taking them out as Python
  strings would cost one object per row), and any column with a value that is not a
  ``str`` (pandas' conversion to ``str`` then decides what is equal, as it did when the
  expansion was built as a program).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from tracecanary.program import TextColumn

if TYPE_CHECKING:
    import pandas as pd

    from tracecanary.program import Program


def arrow_differs(a: pd.Series, b: pd.Series) -> np.ndarray:
    """Row-wise ``a != b`` as a numpy bool array (string columns compared in Arrow,
    without materializing one Python string per row; missing compares unequal, as
    numpy's object comparison of NaN does)."""
    import pandas as pd

    if isinstance(a.dtype, pd.StringDtype) and isinstance(b.dtype, pd.StringDtype):
        return np.asarray(a.array != b.array, dtype=bool)
    return np.asarray(a.to_numpy() != b.to_numpy(), dtype=bool)


def _all_str(values: Sequence) -> bool:
    return all(type(v) is str for v in values)


def _object_all_str(values: np.ndarray, block: int) -> bool:
    """Whether every row of the object array ``values`` is a ``str`` (read ``block`` rows
    at a time: no list of the whole column)."""
    step = max(1, block)
    return all(_all_str(values[lo : lo + step].tolist()) for lo in range(0, len(values), step))


class TextRows:
    """The text column of a column-form source against a canary's text column (codes
    into ``literals``): ``differs`` gives, per row, whether the two texts differ."""

    def __init__(self, source: TextColumn | np.ndarray, literals: Sequence[str]) -> None:
        self.source, self.literals = source, tuple(literals)
        vocabulary: dict[str, int] = {}
        self._canary_ids = np.array(
            [vocabulary.setdefault(t, len(vocabulary)) for t in self.literals], dtype=np.int64
        )
        if isinstance(source, TextColumn):  # the source's literals in the same vocabulary
            self._source_ids = np.array(
                [vocabulary.get(t, -1) for t in source.literals], dtype=np.int64
            )
        else:
            self._canary_text = np.array(self.literals, dtype=object)

    def differs(self, lo: int, hi: int, codes: np.ndarray) -> np.ndarray:
        """Per row r in [lo, hi): whether the source's text differs from
        ``literals[codes[r - lo]]`` (a bool array of ``hi - lo``)."""
        if isinstance(self.source, TextColumn):
            return self._source_ids[self.source.codes[lo:hi]] != self._canary_ids[codes]
        return np.asarray(self.source[lo:hi] != self._canary_text[codes], dtype=bool)

    def source_value(self, i: int) -> str:
        """The source's text in row ``i``."""
        if isinstance(self.source, TextColumn):
            return self.source.literals[int(self.source.codes[i])]
        return self.source[i]


def text_rows(source: Program, col: str, literals: Sequence, block: int) -> TextRows | None:
    """``TextRows`` of ``source``'s text column ``col`` against a canary's ``literals``,
    or None when the comparison is ``arrow_differs``' (see module doc): ``source`` holds
    DataFrames, or a text on either side is not a ``str``. ``block``: how many rows of
    an object array are read at once to check them."""
    if not source.holds_columns or not _all_str(literals):
        return None
    held = source.raw_column(col)
    if isinstance(held, TextColumn):
        return TextRows(held, literals) if _all_str(held.literals) else None
    return TextRows(held, literals) if _object_all_str(held, block) else None
