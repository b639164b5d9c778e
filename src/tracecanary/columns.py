"""The numpy forms of one per-event column that matching reads besides a pandas Series:
integers with a presence mask, and texts as codes into their distinct values. A reader
that builds them (``trace_columns``) needs neither pandas nor pyarrow."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class IntColumn:
    """``values`` int64 (0 where absent); ``present`` bool per row, None when every row
    has a value."""

    values: np.ndarray
    present: np.ndarray | None = None

    def filled(self, value) -> np.ndarray:
        """The values with ``value`` (a scalar or an array per row) where absent."""
        if self.present is None:
            return self.values
        return np.where(self.present, self.values, value)


@dataclass(frozen=True)
class CodedText:
    """``codes`` int64, -1 where absent; ``labels[code]`` the text of a code."""

    codes: np.ndarray
    labels: tuple[str, ...]
