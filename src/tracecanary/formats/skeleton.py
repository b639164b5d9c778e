"""Schema validation of large documents by representatives.

A JSON Schema validator walks a list element by element, far too slowly for lists of
millions of numbers (a lossless canary's timing streams, a replay report's samples).
``skeleton(doc)`` replaces every list longer than ``SKELETON_MIN`` whose items are all
scalars (or all lists of scalars) by representatives: the first item of each distinct
type (shape) present, the items holding the smallest and the largest integer, and the
shortest and longest item. Guarantee: a schema that constrains such lists only by item
type, ``minimum``/``maximum`` and ``minItems`` accepts the skeleton exactly when it
accepts the full document. Every dict and every short list is kept in full.
"""

from __future__ import annotations

from typing import Any

SKELETON_MIN = 64
_SCALARS = (int, float, str, bool, type(None))


def _is_scalar(x) -> bool:
    return isinstance(x, _SCALARS)


def _representatives(items: list) -> list | None:
    """Representatives of a long list of scalars / scalar vectors, or None if the list
    holds containers of other kinds (then it is walked in full)."""
    types = set(map(type, items))
    if types <= set(_SCALARS):
        keep = {}
        for i, x in enumerate(items):
            keep.setdefault(type(x), i)
            if len(keep) == len(types):
                break
        ints = [x for x in items if type(x) is int] if int in types else []
        idx = set(keep.values())
        if ints:
            lo, hi = min(ints), max(ints)
            idx.add(items.index(lo))
            idx.add(items.index(hi))
        return [items[i] for i in sorted(idx)]
    if types == {list} and all(all(map(_is_scalar, v)) for v in items):
        shapes: dict = {}
        lo_val = hi_val = None
        lo_i = hi_i = 0
        short_i = long_i = 0
        for i, v in enumerate(items):
            shapes.setdefault(frozenset(map(type, v)), i)
            ints = [x for x in v if type(x) is int]
            if ints:
                a, b = min(ints), max(ints)
                if lo_val is None or a < lo_val:
                    lo_val, lo_i = a, i
                if hi_val is None or b > hi_val:
                    hi_val, hi_i = b, i
            if len(v) < len(items[short_i]):
                short_i = i
            if len(v) > len(items[long_i]):
                long_i = i
        idx = set(shapes.values()) | {lo_i, hi_i, short_i, long_i}
        return [items[i] for i in sorted(idx)]
    return None


def skeleton(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: skeleton(v) for k, v in doc.items()}
    if isinstance(doc, list):
        if len(doc) > SKELETON_MIN:
            reps = _representatives(doc)
            if reps is not None:
                return reps
        return [skeleton(v) for v in doc]
    return doc
