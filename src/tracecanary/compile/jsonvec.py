"""Vectorized canonical-JSON fragments: one string per row, built column by column.

A *fragment column* holds one text per row; element i of a column made by ``int_text``,
``float_text``, ``bool_text`` or ``str_text`` is exactly the text
``tracecanary.canonical.canonical_json_bytes`` writes for the i-th value (without the
trailing newline): integers in decimal, booleans ``true``/``false``, strings escaped by
``json.dumps(..., ensure_ascii=False)``, floats by their shortest ``repr``.

Two builders make and combine such columns, with the same methods and the same texts:

* ``ARROW``: columns are pyarrow ``large_string`` arrays, built with pyarrow compute (a
  few C++ passes per column instead of a Python call per row: a million-row table
  serializes in about a second);
* ``PYTHON``: columns are lists of str, built by plain Python (no pandas or pyarrow
  import, which would cost more than the whole work for a few thousand rows).

``builder(rows)`` picks one by size, at the compiler's threshold for pandas
(``factorize.use_pandas``: a small program is compiled without importing either);
a caller picks once and passes every column it builds back to the same builder (the two
column kinds do not mix). Importing this module imports neither pandas nor pyarrow.
"""

from __future__ import annotations

import json
from itertools import repeat
from typing import TYPE_CHECKING

import numpy as np

from tracecanary.factorize import use_pandas

if TYPE_CHECKING:
    import pyarrow as pa


def _literal(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _float_bits(values) -> np.ndarray:
    """The float64 values (as int64 bit patterns: -0.0 and 0.0 differ) or ValueError
    for NaN/inf, which canonical JSON refuses."""
    arr = np.asarray(values, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise ValueError("non-finite float cannot be written as canonical JSON")
    return np.ascontiguousarray(arr).view(np.int64)


class _ArrowBuilder:
    """Fragment columns as pyarrow ``large_string`` arrays (module doc)."""

    @staticmethod
    def _pa():
        import pyarrow as pa

        return pa

    def texts(self, strings: list[str]) -> pa.Array:
        """A column holding ``strings`` (e.g. a table of literals for ``take``)."""
        pa = self._pa()
        return pa.array(strings, type=pa.large_string())

    def take(self, table: pa.Array, codes: np.ndarray) -> pa.Array:
        """Row i: ``table[codes[i]]``."""
        return table.take(self._pa().array(codes))

    def int_text(self, values: np.ndarray) -> pa.Array:
        """Decimal text of int64 values."""
        import pyarrow.compute as pc

        pa = self._pa()
        return pc.cast(pa.array(np.asarray(values, dtype=np.int64)), pa.large_string())

    def str_text(self, values) -> pa.Array:
        """JSON string literals (quoted, escaped) of str values, via their distinct values."""
        import pandas as pd

        codes, uniques = pd.factorize(
            values if isinstance(values, pd.Series) else pd.Series(values)
        )
        literals = self.texts([_literal(str(u)) for u in uniques])
        return self.take(literals, codes.astype(np.int64))

    def float_text(self, values: np.ndarray) -> pa.Array:
        """JSON float literals (shortest repr, e.g. ``1.0``) via distinct values; NaN/inf
        refused."""
        uniques, codes = np.unique(_float_bits(values), return_inverse=True)
        literals = self.texts([json.dumps(u) for u in uniques.view(np.float64).tolist()])
        return self.take(literals, codes.astype(np.int64))

    def bool_text(self, values: np.ndarray) -> pa.Array:
        arr = np.asarray(values, dtype=bool)
        return self.take(self.texts(["false", "true"]), arr.view(np.int8))

    def concat(self, *parts) -> pa.Array:
        """Element-wise concatenation of columns and plain string constants."""
        import pyarrow.compute as pc

        pa = self._pa()
        string = pa.large_string()
        args = [pa.scalar(p, type=string) if isinstance(p, str) else p for p in parts]
        return pc.binary_join_element_wise(*args, pa.scalar("", type=string))

    def optional(self, mask: np.ndarray, text: pa.Array) -> pa.Array:
        """``text`` where mask is True, the empty string elsewhere (an omitted key)."""
        import pyarrow.compute as pc

        pa = self._pa()
        return pc.if_else(
            pa.array(np.asarray(mask, dtype=bool)), text, pa.scalar("", type=pa.large_string())
        )

    def _contiguous(self, column: pa.Array) -> tuple[pa.Array, np.ndarray]:
        """``column`` as one large_string array and its n+1 element offsets (a view)."""
        pa = self._pa()
        column = column.cast(pa.large_string())
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        offsets = np.frombuffer(column.buffers()[1], dtype=np.int64)[
            column.offset : column.offset + len(column) + 1
        ]
        return column, offsets

    def regroup(self, elements: pa.Array, offsets: np.ndarray) -> pa.Array:
        """Concatenate consecutive ``elements`` per group without copying: group g is the
        concatenation of elements[offsets[g]:offsets[g+1]] (elements carry their own
        separators)."""
        pa = self._pa()
        elements, elem_offsets = self._contiguous(elements)
        group_offsets = elem_offsets[np.asarray(offsets, dtype=np.int64)]
        return pa.LargeStringArray.from_buffers(
            len(offsets) - 1,
            pa.py_buffer(np.ascontiguousarray(group_offsets)),
            elements.buffers()[2],
        )

    def buffer_and_offsets(self, lines: pa.Array) -> tuple[memoryview, np.ndarray]:
        """The contiguous UTF-8 bytes of all elements and the byte offset of each element
        (n+1 offsets, starting at 0)."""
        lines, offs = self._contiguous(lines)
        data = lines.buffers()[2]
        base = int(offs[0]) if len(offs) else 0
        end = int(offs[-1]) if len(offs) else 0
        view = memoryview(data)[base:end] if data is not None else memoryview(b"")
        return view, (offs - base).astype(np.int64)


class _PythonBuilder:
    """Fragment columns as lists of str; the same methods and texts as ``ARROW``."""

    def texts(self, strings: list[str]) -> list[str]:
        return list(strings)

    def take(self, table: list[str], codes: np.ndarray) -> list[str]:
        return [table[c] for c in np.asarray(codes).tolist()]

    def int_text(self, values: np.ndarray) -> list[str]:
        return list(map(str, np.asarray(values, dtype=np.int64).tolist()))

    def str_text(self, values) -> list[str]:
        seen: dict[str, str] = {}
        return [
            seen.get(v) or seen.setdefault(v, _literal(str(v))) for v in np.asarray(values).tolist()
        ]

    def float_text(self, values: np.ndarray) -> list[str]:
        bits = _float_bits(values)
        seen: dict[int, str] = {}
        return [
            seen.get(b) or seen.setdefault(b, json.dumps(v))
            for b, v in zip(bits.tolist(), bits.view(np.float64).tolist(), strict=True)
        ]

    def bool_text(self, values: np.ndarray) -> list[str]:
        return ["true" if b else "false" for b in np.asarray(values, dtype=bool).tolist()]

    def concat(self, *parts) -> list[str]:
        rows = next(len(p) for p in parts if not isinstance(p, str))
        merged: list = []  # adjacent constants joined once
        for p in parts:
            if isinstance(p, str) and merged and isinstance(merged[-1], str):
                merged[-1] += p
            else:
                merged.append(p)
        columns = [repeat(p, rows) if isinstance(p, str) else p for p in merged]
        return ["".join(row) for row in zip(*columns, strict=True)]

    def optional(self, mask: np.ndarray, text: list[str]) -> list[str]:
        return [
            t if m else "" for m, t in zip(np.asarray(mask, dtype=bool).tolist(), text, strict=True)
        ]

    def regroup(self, elements: list[str], offsets: np.ndarray) -> list[str]:
        bounds = np.asarray(offsets, dtype=np.int64).tolist()
        return ["".join(elements[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def buffer_and_offsets(self, lines: list[str]) -> tuple[memoryview, np.ndarray]:
        encoded = [line.encode("utf-8") for line in lines]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
        return memoryview(b"".join(encoded)), offsets


ARROW = _ArrowBuilder()
PYTHON = _PythonBuilder()
Builder = _ArrowBuilder | _PythonBuilder


def builder(rows: int) -> Builder:
    """The builder for columns of up to about ``rows`` rows: ``ARROW`` where the
    compiler uses pandas for that many rows, else ``PYTHON`` (the texts are the same)."""
    return ARROW if use_pandas(rows) else PYTHON
