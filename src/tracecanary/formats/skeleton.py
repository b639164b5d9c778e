"""Schema validation of large documents by representatives.

A JSON Schema validator walks a list element by element, far too slowly for lists of
millions of numbers (a lossless canary's timing streams, a replay report's samples).
``skeleton(doc)`` replaces every list longer than ``SKELETON_MIN`` whose items are all
scalars (or all lists of scalars) by some of its items, in their order: those a schema
could refuse where another item of the list passes (``_scalar_picks``: for numbers the
smallest and largest integer and float and the first float with a fraction; every
distinct string, boolean and null; the first repeated value), then the first items not
yet taken until more than ``SKELETON_MIN`` are kept; for a list of vectors, the vectors
holding those picks among all their scalars, the first of each shape, the shortest and
longest, the first with a repeated value and the first repeated vector.

Guarantee: a schema that constrains such lists by item type, ``enum``/``const``/
``pattern``/length of strings and booleans, ``minimum``/``maximum`` (exclusive or not) of
numbers, ``minItems``/``maxItems`` up to ``SKELETON_MIN`` + 1 and ``uniqueItems`` (of the
list, or of each vector) accepts the skeleton exactly when it accepts the full document.
Not covered: ``enum``, ``const`` or ``multipleOf`` on numbers and per-position schemas
inside vectors (no shipped schema puts them on a long list). Every dict and every short
list is kept in full. Cost: a few passes of builtins (``min``, ``max``, ``set``) per
list, numpy for the fractions of floats.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from typing import Any

SKELETON_MIN = 64
_SCALARS = (int, float, str, bool, type(None))


def _is_scalar(x) -> bool:
    return isinstance(x, _SCALARS)


def _first_repeat(keys) -> tuple[int, int] | None:
    """Indices (first, second) of the first value seen twice, or None."""
    seen: dict = {}
    for i, key in enumerate(keys):
        j = seen.setdefault(key, i)
        if j != i:
            return j, i
    return None


def _unique_keys(items: list, types: set) -> list:
    """Keys equal exactly where JSON Schema's ``uniqueItems`` calls items equal: ``1`` and
    ``1.0`` are, ``true`` and ``1`` are not."""
    if bool not in types:
        return items
    return [(type(x) is bool, x) for x in items]


def _scalar_picks(items: list, types: set, *, repeats: bool = True) -> set[int]:
    """Indices of the items of a list of scalars a schema could tell apart from the rest
    (see the module's guarantee); with ``repeats``, the first value seen twice too."""
    first: dict = {}
    for i, x in enumerate(items):  # the first item of each type
        first.setdefault(type(x), i)
        if len(first) == len(types):
            break
    picks = set(first.values())

    def index_of(kind, value) -> int:
        if types == {kind}:
            return items.index(value)
        # by type too: ``1 == True == 1.0`` must not stand for another type's item
        return next(i for i, x in enumerate(items) if type(x) is kind and x == value)

    floats = None
    if types == {float}:  # one numpy array: extremes, fractions and repeats vectorized
        import numpy as np

        floats = np.asarray(items, dtype=np.float64)
        picks.update((int(floats.argmin()), int(floats.argmax())))
        fractional = np.flatnonzero(floats != np.floor(floats))
        picks.update(fractional[:1].tolist())
    for kind in (int, float) if floats is None else ():
        if kind not in types:
            continue
        values = items if types == {kind} else [x for x in items if type(x) is kind]
        picks.update((index_of(kind, min(values)), index_of(kind, max(values))))
        if kind is float:
            fraction = next((x for x in values if not x.is_integer()), None)
            if fraction is not None:
                picks.add(index_of(float, fraction))
    if types & {str, bool, type(None)}:
        distinct: dict = {}
        for i, x in enumerate(items):
            if type(x) in (str, bool, type(None)):
                distinct.setdefault((type(x), x), i)
        picks.update(distinct.values())
    if repeats:
        picks.update(_repeat_pair(items, types, floats) or ())
    return picks


def _repeat_pair(items: list, types: set, floats=None) -> tuple[int, int] | None:
    """Two indices holding equal items (as ``uniqueItems`` sees them), or None. A sorted
    list of numbers is compared with its neighbours, ``floats`` sorted by numpy; a
    dictionary scan, stopping at the first repeat, does the rest (a set of a million
    Python numbers costs 0.5 s)."""
    if types <= {int, float} and items:
        following = itertools.islice(items, 1, None)
        if not any(map(operator.gt, items, following)):  # non-decreasing: repeats adjacent
            equal = list(map(operator.eq, items, itertools.islice(items, 1, None)))
            return (equal.index(True), equal.index(True) + 1) if True in equal else None
        if floats is not None:  # ``items`` as a float64 array
            import numpy as np

            values = floats
            ordered = np.sort(values)
            same = np.flatnonzero(ordered[1:] == ordered[:-1])
            if not same.size:
                return None
            at = np.flatnonzero(values == ordered[same[0]])
            return int(at[0]), int(at[1])
    return _first_repeat(_unique_keys(items, types))


def _vector_picks(items: list) -> set[int]:
    """Indices of the vectors of a list of scalar vectors a schema could tell apart."""
    picks: set[int] = set()
    shapes: dict = {}
    short_i = long_i = 0
    inner_repeat = None
    for i, v in enumerate(items):
        shape = frozenset(map(type, v))
        shapes.setdefault(shape, i)
        if len(v) < len(items[short_i]):
            short_i = i
        if len(v) > len(items[long_i]):
            long_i = i
        if inner_repeat is None and len(set(v)) < len(v):  # bools: 1 == True, look closer
            if bool not in shape or _repeat_pair(v, set(shape)) is not None:
                inner_repeat = i
    picks.update(shapes.values())
    picks.update((short_i, long_i))
    if inner_repeat is not None:
        picks.add(inner_repeat)
    flat = list(itertools.chain.from_iterable(items))
    flat_types = set(map(type, flat))
    if flat:
        ends = list(itertools.accumulate(map(len, items)))
        for at in _scalar_picks(flat, flat_types, repeats=False):
            picks.add(bisect.bisect_right(ends, at))
    if bool in flat_types:
        keys = (tuple(_unique_keys(v, set(map(type, v)))) for v in items)
    else:
        keys = map(tuple, items)
    picks.update(_first_repeat(keys) or ())
    return picks


def _representatives(items: list) -> list | None:
    """The skeleton of a long list of scalars / scalar vectors, or None if the list holds
    containers of other kinds (then it is walked in full)."""
    types = set(map(type, items))
    if types <= set(_SCALARS):
        picks = _scalar_picks(items, types)
    elif types == {list} and all(all(map(_is_scalar, v)) for v in items):
        picks = _vector_picks(items)
    else:
        return None
    # more than SKELETON_MIN items, as the full list has: minItems / maxItems hold alike
    filler = (i for i in range(len(items)) if i not in picks)
    picks.update(itertools.islice(filler, max(0, SKELETON_MIN + 1 - len(picks))))
    return [items[i] for i in sorted(picks)]


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
