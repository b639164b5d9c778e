"""Nesting depth of a JSON text, measured on its bytes before it is parsed.

Walking a parsed document to bound its depth costs a Python step per container (the
larger part of importing a Kineto trace); scanning the text costs a few vectorized
passes over its bytes. Only four byte classes matter: quotes, backslashes, openers
(``[``, ``{``) and closers (``]``, ``}``); brackets inside strings do not count, a quote
preceded by an odd run of backslashes does not end a string.

Guarantee: for a valid JSON text, ``max_nesting_depth`` equals the deepest chain of
nested arrays/objects (the root container is depth 1, a scalar document depth 0). For
an invalid text the figure is some number; the parser refuses such a text anyway. Work
is in chunks, so memory is bounded by the chunk size, not the document.
"""

from __future__ import annotations

import numpy as np

CHUNK_BYTES = 1 << 24

_QUOTE, _BACKSLASH, _OPEN, _CLOSE = 1, 2, 3, 4
_STRUCTURAL = b'"\\[{]}'
_TABLE = bytearray(256)  # bytes.translate table: byte -> its class, 0 for all others
for _byte, _class in zip(
    _STRUCTURAL, (_QUOTE, _BACKSLASH, _OPEN, _OPEN, _CLOSE, _CLOSE), strict=True
):
    _TABLE[_byte] = _class
_CLASSES = bytes(_TABLE)
_OTHERS = bytes(b for b in range(256) if b not in _STRUCTURAL)  # deleted in the fast path


class _Scanner:
    """The state carried from one chunk to the next: depth, whether the scan is inside a
    string, and whether the previous chunk ended on an escaping backslash."""

    def __init__(self) -> None:
        self.depth = 0
        self.deepest = 0
        self.in_string = False
        self.escape_next = False

    def feed(self, chunk: bytes) -> None:
        if self.escape_next:  # an escaped byte is never structural
            chunk, self.escape_next = chunk[1:], False
        if b"\\" in chunk:
            classes = np.frombuffer(chunk.translate(_CLASSES), dtype=np.uint8)
            pos = np.flatnonzero(classes)
            cls = classes[pos]
            cls[self._escaped(pos, cls, len(chunk))] = 0
        else:  # the common case: only the structural bytes matter, not where they are
            cls = np.frombuffer(chunk.translate(_CLASSES, _OTHERS), dtype=np.uint8)
        self._count(cls)

    def _count(self, cls: np.ndarray) -> None:
        """Advance over a sequence of byte classes (escaped bytes already zeroed)."""
        if cls.size == 0:
            return
        quotes_before = np.cumsum(cls == _QUOTE, dtype=np.int64)
        brackets = np.flatnonzero(cls >= _OPEN)
        if brackets.size:
            outside = ((quotes_before[brackets] + self.in_string) & 1) == 0
            step = np.where(cls[brackets] == _OPEN, 1, -1)
            levels = np.cumsum(step * outside) + self.depth
            self.deepest = max(self.deepest, int(levels.max()))
            self.depth = int(levels[-1])
        self.in_string = bool((int(quotes_before[-1]) + self.in_string) & 1)

    def _escaped(self, pos: np.ndarray, cls: np.ndarray, size: int) -> np.ndarray:
        """Which structural bytes of the chunk are escaped (right after an escaping
        backslash); sets ``escape_next`` when the chunk ends on an escaping backslash."""
        backslash = cls == _BACKSLASH
        index = np.arange(pos.size)
        follows = np.zeros(pos.size, dtype=bool)  # the byte right after the previous one
        follows[1:] = np.diff(pos) == 1
        run_start = backslash & ~(follows & np.concatenate(([False], backslash[:-1])))
        first_of_run = np.maximum.accumulate(np.where(run_start, index, 0))
        # in a run of backslashes the 1st, 3rd, ... escape the byte after them
        escaper = backslash & (((index - first_of_run) & 1) == 0)
        escaped = np.zeros(pos.size, dtype=bool)
        escaped[1:] = escaper[:-1] & follows[1:]
        self.escape_next = bool(escaper[-1]) and int(pos[-1]) == size - 1
        return escaped


def max_nesting_depth(text: bytes | str, chunk_bytes: int = CHUNK_BYTES) -> int:
    """The deepest nesting of arrays/objects in a JSON text (see the module docstring)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    scanner = _Scanner()
    for start in range(0, len(data), chunk_bytes):
        scanner.feed(bytes(data[start : start + chunk_bytes]))
    return scanner.deepest
