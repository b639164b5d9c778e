"""Grouped running sums and maxima in numpy alone (no pandas import).

Exact replacements for the few pandas group operations of the simulator and the junction
compiler, so that a replay pays no pandas import:

- ``grouped_cumsum(v, g)`` == ``pd.Series(v).groupby(g, sort=False).cumsum()``
- ``grouped_cummax(v, g)`` == ``pd.Series(v).groupby(g, sort=False).cummax()``
- ``Grouping.by(g).previous_max(v, fill)``: the largest ``v`` of an earlier row of the
  same group (``fill`` where there is none)
- ``Grouping.by(g).queue_starts(ready, service)``: start times of one FIFO server per
  group (the running sum and the running max of ``channel_fifo`` on one sort)
- ``Grouping.by(a, b).first_positions()``: the rows kept by
  ``~DataFrame.duplicated([a, b])`` (first occurrence of each key tuple)
- ``Grouping.by(a, b).max(v)``: ``groupby([a, b], sort=True)[v].max()``

Method: rows are taken in chunks of consecutive rows (one chunk when there are many
groups); within a chunk a stable sort of the group codes (numpy's radix sort: codes
spanning fewer than 2**16 values are narrowed to uint8/uint16) makes each group a
contiguous run, scanned with numpy's accumulate, and a per-group carry passes each group's
running value on to the next chunk. A chunk fits in cache, so the gathers into and out of
the sorted order stay cheap however the groups interleave. One group needs no sort.

Arithmetic is int64 throughout, never float: keys and values must be integer arrays (a
float, object or uint64 one is refused with a TypeError, never truncated). Running sums are int64 modulo 2**64, as in
pandas (and numpy): equal to the exact sums whenever those fit in int64, bit-identical to
pandas' otherwise. Maxima are exact for every int64 value (the one offset trick used is
checked beforehand, in Python integers, not to leave int64).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["Grouping", "grouped_cummax", "grouped_cumsum"]

_CHUNK_ROWS = 1 << 16  # rows per chunk when groups are few (int64 chunk: 512 KiB)
_ROWS_PER_RUN = 64  # chunks grow so that a group's run averages at least this many rows
# one Python step per run beats whole-chunk passes below this many runs per row
# (measured: ~1 us per step against a few ns per row and pass)
_ROWS_PER_LOOPED_RUN = 512
_INT64_LIMIT = 1 << 63  # exclusive bound of int64 (as a Python int)
_INT64_MIN = np.iinfo(np.int64).min


@dataclass(frozen=True, eq=False)
class _Chunk:
    """Rows ``lo:hi``; ``order``: the stable permutation of them that sorts their codes
    (``None``: identity); ``starts``: where each code's run begins in that order;
    ``codes``: the run's code less the grouping's lowest code (int64, ascending)."""

    lo: int
    hi: int
    order: np.ndarray | None
    starts: np.ndarray
    codes: np.ndarray

    def ends(self) -> np.ndarray:
        """Last position of each run, in sorted order."""
        return np.r_[self.starts[1:], self.hi - self.lo] - 1

    def take(self, values: np.ndarray) -> np.ndarray:
        """A new int64 array: this chunk's rows of ``values`` in sorted order."""
        part = values[self.lo : self.hi]
        return part.copy() if self.order is None else part[self.order]

    def put(self, out: np.ndarray, in_sorted_order: np.ndarray) -> None:
        """Write values given in sorted order into this chunk's rows of ``out``."""
        if self.order is None:
            out[self.lo : self.hi] = in_sorted_order
        else:
            out[self.lo : self.hi][self.order] = in_sorted_order


def _stable_order(rel: np.ndarray, span: int) -> np.ndarray:
    """A stable permutation sorting ``rel`` (values 0 .. ``span``)."""
    if span < (1 << 16):
        return np.argsort(rel, kind="stable")  # uint8/uint16: a radix sort
    if span < (1 << 32):
        rel = rel.astype(np.int64, copy=False)
        order = np.argsort((rel & 0xFFFF).astype(np.uint16), kind="stable")
        high = (rel >> 16).astype(np.uint16)[order]
        return order[np.argsort(high, kind="stable")]  # LSD radix: two stable passes
    return np.argsort(rel, kind="stable")


def _chunk(lo: int, rel: np.ndarray, span: int) -> _Chunk:
    """Sort one chunk's relative codes ``rel`` (0 .. ``span``) into runs."""
    hi = lo + rel.size
    if span < (1 << 16) or span <= 4 * rel.size:  # run lengths by counting
        counts = np.bincount(rel)
        codes = np.flatnonzero(counts).astype(np.int64)
        if codes.size == 1:
            return _Chunk(lo, hi, None, np.zeros(1, dtype=np.int64), codes)
        order = _stable_order(rel, span)
        starts = np.zeros(codes.size, dtype=np.int64)
        np.cumsum(counts[codes[:-1]], out=starts[1:])
        return _Chunk(lo, hi, order, starts, codes)
    order = _stable_order(rel, span)
    s = rel[order]
    starts = np.r_[0, np.flatnonzero(s[1:] != s[:-1]) + 1].astype(np.int64)
    return _Chunk(lo, hi, order, starts, s[starts].astype(np.int64))


def _few_runs(runs: int, rows: int) -> bool:
    return runs <= 1 or runs * _ROWS_PER_LOOPED_RUN <= rows


def _runs_cumsum(v: np.ndarray, starts: np.ndarray) -> None:
    """Running sum within each run of ``v`` (runs begin at ``starts``), in place."""
    if _few_runs(starts.size, v.size):
        bounds = [*starts.tolist(), v.size]
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            np.cumsum(v[lo:hi], out=v[lo:hi])
        return
    # restart the running sum at each run: its first element less the total of the run
    # before (sums modulo 2**64: exact where the true sums fit)
    totals = np.add.reduceat(v, starts)
    v[starts[1:]] -= totals[:-1]
    np.cumsum(v, out=v)


def _runs_cummax(v: np.ndarray, starts: np.ndarray) -> None:
    """Running maximum within each run of ``v`` (runs begin at ``starts``), in place;
    exact for every int64 value."""
    runs, rows = starts.size, v.size
    if not _few_runs(runs, rows):
        low, high = int(v.min()), int(v.max())
        width = high - low + 1
        if width * runs <= _INT64_LIMIT:
            # run j's values moved into [j * width, (j + 1) * width): a running maximum
            # never carries a value across runs; checked above to stay within int64
            offset = np.zeros(rows, dtype=np.int64)
            offset[starts[1:]] = width
            np.cumsum(offset, out=offset)
            v -= low
            v += offset
            np.maximum.accumulate(v, out=v)
            v -= offset
            v += low
            return
        # too wide for offsets: a doubling scan (log2 of the longest run steps), unless
        # one step per run is cheaper
        lengths = np.diff(np.r_[starts, rows])
        longest = int(lengths.max())
        if runs * _ROWS_PER_LOOPED_RUN > 3 * (longest - 1).bit_length() * rows:
            rank = np.arange(rows, dtype=np.int64)  # position within the run
            rank -= np.repeat(starts, lengths)
            d = 1
            while d < longest:
                # v[i] = max(v[i], v[i - d]) where i - d is in the same run (numpy reads
                # the overlapping input as it was before this step)
                np.maximum(v[d:], v[:-d], out=v[d:], where=rank[d:] >= d)
                d *= 2
            return
    bounds = [*starts.tolist(), rows]
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        np.maximum.accumulate(v[lo:hi], out=v[lo:hi])


def _int64(values: np.ndarray, n: int) -> np.ndarray:
    """``values`` as int64, refused unless they are integers that int64 holds: a float,
    object or uint64 array would be truncated or wrapped by the cast, not summed."""
    values = np.asarray(values)
    if values.dtype.kind not in "iub" or values.dtype == np.uint64:
        raise TypeError(f"grouped values must be integers (int64 arithmetic), not {values.dtype}")
    values = values.astype(np.int64, copy=False)
    if values.shape != (n,):
        raise ValueError(f"expected {n} values, got shape {values.shape}")
    return values


@dataclass(frozen=True, eq=False)
class Grouping:
    """Rows grouped by integer codes, ready for several grouped operations on one sort.

    Groups are taken in ascending code order, the rows of a group in array order.
    ``chunks``: consecutive row ranges, each sorted by code; ``span``: the highest code
    less the lowest (several chunks only when it is below 2**16).
    """

    n: int
    span: int
    chunks: tuple[_Chunk, ...]

    @classmethod
    def by(cls, *keys: np.ndarray) -> Grouping:
        """Group rows by one or more integer code arrays of equal length; with several,
        groups are the distinct key tuples in lexicographic order."""
        if not keys:
            raise ValueError("Grouping.by needs at least one key")
        arrays = [np.asarray(k) for k in keys]
        arrays = [a.view(np.uint8) if a.dtype == np.bool_ else a for a in arrays]
        for a in arrays:
            if a.ndim != 1 or a.dtype.kind not in "iu" or a.dtype == np.uint64:
                raise TypeError("group keys must be 1-d integer arrays (not uint64)")
            if a.shape != arrays[0].shape:
                raise ValueError("group keys must have equal lengths")
        n = int(arrays[0].size)
        if n == 0:
            return cls(0, 0, ())
        codes = _combined_codes(arrays)
        if codes is None:  # the key tuples span more than int64: a lexicographic sort
            order = np.lexsort(arrays[::-1])
            changed = np.zeros(n - 1, dtype=bool)
            for a in arrays:
                s = a[order]
                changed |= s[1:] != s[:-1]
            starts = np.r_[0, np.flatnonzero(changed) + 1].astype(np.int64)
            runs = np.arange(starts.size, dtype=np.int64)
            return cls(n, int(starts.size) - 1, (_Chunk(0, n, order, starts, runs),))
        low, high = int(codes.min()), int(codes.max())
        span = high - low
        if span == 0:
            one = np.zeros(1, dtype=np.int64)
            return cls(n, 0, (_Chunk(0, n, None, one, one),))
        if span < (1 << 16):
            # the subtraction may wrap in a narrow code dtype (int8 - (-3)); its low bits,
            # all that the cast keeps, are exact
            rel = (codes - low).astype(np.uint8 if span < (1 << 8) else np.uint16)
            step = max(_CHUNK_ROWS, _ROWS_PER_RUN * (span + 1))
        else:
            rel = codes.astype(np.int64) - low  # exact: 0 .. span < 2**63
            step = n
        chunks = tuple(_chunk(lo, rel[lo : lo + step], span) for lo in range(0, n, step))
        return cls(n, span, chunks)

    @property
    def groups(self) -> int:
        """Number of distinct groups."""
        if len(self.chunks) <= 1:
            return sum(int(c.codes.size) for c in self.chunks)
        return int(np.unique(np.concatenate([c.codes for c in self.chunks])).size)

    def _carry(self, fill: int) -> np.ndarray | None:
        """One running value per code, passed from chunk to chunk (None: one chunk)."""
        if len(self.chunks) <= 1:
            return None
        return np.full(self.span + 1, fill, dtype=np.int64)

    def _scan(self, values: tuple[np.ndarray, ...], kernel: Callable) -> np.ndarray:
        """Apply ``kernel(chunk, *chunk values in sorted order)`` chunk after chunk, in
        array order; its int64 result (sorted order) is put back in row order."""
        values = tuple(_int64(v, self.n) for v in values)
        out = np.empty(self.n, dtype=np.int64)
        for chunk in self.chunks:
            chunk.put(out, kernel(chunk, *(chunk.take(v) for v in values)))
        return out

    def cumsum(self, values: np.ndarray) -> np.ndarray:
        """Running sum of ``values`` within each group, in array order (int64, modulo
        2**64 like pandas: exact when the sums fit)."""
        carry = self._carry(0)

        def kernel(chunk: _Chunk, v: np.ndarray) -> np.ndarray:
            if carry is not None:
                v[chunk.starts] += carry[chunk.codes]
            _runs_cumsum(v, chunk.starts)
            if carry is not None:
                carry[chunk.codes] = v[chunk.ends()]
            return v

        return self._scan((values,), kernel)

    def cummax(self, values: np.ndarray) -> np.ndarray:
        """Running maximum of ``values`` within each group, in array order (int64)."""
        carry = self._carry(_INT64_MIN)  # max(int64 min, x) == x: no flag needed

        def kernel(chunk: _Chunk, v: np.ndarray) -> np.ndarray:
            if carry is not None:
                v[chunk.starts] = np.maximum(v[chunk.starts], carry[chunk.codes])
            _runs_cummax(v, chunk.starts)
            if carry is not None:
                carry[chunk.codes] = v[chunk.ends()]
            return v

        return self._scan((values,), kernel)

    def previous_max(self, values: np.ndarray, fill: int) -> np.ndarray:
        """Per row, the largest of ``values`` over the earlier rows of its group
        (``fill`` for a group's first row), int64."""
        fill = operator.index(fill)  # an integer: a float would be truncated
        carry = self._carry(_INT64_MIN)
        seen = None if carry is None else np.zeros(self.span + 1, dtype=bool)

        def kernel(chunk: _Chunk, v: np.ndarray) -> np.ndarray:
            first = np.full(chunk.starts.size, fill, dtype=np.int64)
            if carry is not None:  # the running max of earlier chunks enters each run
                known = seen[chunk.codes]
                first[known] = carry[chunk.codes[known]]
                v[chunk.starts] = np.maximum(v[chunk.starts], carry[chunk.codes])
            _runs_cummax(v, chunk.starts)
            before = np.empty_like(v)
            before[1:] = v[:-1]
            before[chunk.starts] = first
            if carry is not None:
                carry[chunk.codes] = v[chunk.ends()]
                seen[chunk.codes] = True
            return before

        return self._scan((values,), kernel)

    def queue_starts(self, ready: np.ndarray, service: np.ndarray) -> np.ndarray:
        """Start times of one FIFO server per group serving rows in array order: row i
        starts at max(ready_i, end of the group's previous row), end = start + service.

        Computed as S = P + cummax(R - P), P the exclusive running sum of service within
        the group (int64; exact when the sums fit, else modulo 2**64 like pandas)."""
        sums = self._carry(0)
        slacks = self._carry(_INT64_MIN)

        def kernel(chunk: _Chunk, r: np.ndarray, s: np.ndarray) -> np.ndarray:
            prior = s.copy()
            if sums is not None:
                prior[chunk.starts] += sums[chunk.codes]
            _runs_cumsum(prior, chunk.starts)
            if sums is not None:
                sums[chunk.codes] = prior[chunk.ends()]
            prior -= s  # P
            r -= prior  # R - P
            if slacks is not None:
                r[chunk.starts] = np.maximum(r[chunk.starts], slacks[chunk.codes])
            _runs_cummax(r, chunk.starts)
            if slacks is not None:
                slacks[chunk.codes] = r[chunk.ends()]
            r += prior
            return r

        return self._scan((ready, service), kernel)

    def first_positions(self) -> np.ndarray:
        """Row of each group's first occurrence (int64), groups in ascending code order."""
        if len(self.chunks) == 1:
            c = self.chunks[0]
            return np.zeros(1, dtype=np.int64) if c.order is None else c.order[c.starts]
        first = np.full(self.span + 1, -1, dtype=np.int64)
        for c in reversed(self.chunks):  # earlier chunks overwrite later ones
            at = c.starts if c.order is None else c.order[c.starts]
            first[c.codes] = c.lo + at
        return first[first >= 0]

    def first_mask(self) -> np.ndarray:
        """Boolean per row: the row is its group's first occurrence (pandas'
        ``~duplicated(keep="first")``)."""
        mask = np.zeros(self.n, dtype=bool)
        mask[self.first_positions()] = True
        return mask

    def max(self, values: np.ndarray) -> np.ndarray:
        """Largest of ``values`` per group (int64), groups in ascending code order."""
        values = _int64(values, self.n)
        if self.n == 0:
            return np.zeros(0, dtype=np.int64)
        if len(self.chunks) == 1:
            c = self.chunks[0]
            return np.maximum.reduceat(c.take(values), c.starts)
        best = np.full(self.span + 1, _INT64_MIN, dtype=np.int64)
        seen = np.zeros(self.span + 1, dtype=bool)
        for c in self.chunks:
            part = np.maximum.reduceat(c.take(values), c.starts)
            best[c.codes] = np.maximum(best[c.codes], part)
            seen[c.codes] = True
        return best[seen]


def _combined_codes(arrays: list[np.ndarray]) -> np.ndarray | None:
    """One code per row ordering rows like the key tuples (mixed radix), or None when
    the codes would not fit in int64."""
    if len(arrays) == 1:
        return arrays[0]
    lows = [int(a.min()) for a in arrays]
    widths = [int(a.max()) - lo + 1 for a, lo in zip(arrays, lows, strict=True)]
    total = 1
    for w in widths:
        total *= w
    if total > _INT64_LIMIT:
        return None
    codes = np.zeros(arrays[0].size, dtype=np.int64)
    for a, lo, w in zip(arrays, lows, widths, strict=True):
        codes *= w
        codes += a.astype(np.int64) - lo  # exact: 0 .. w - 1
    return codes


def grouped_cumsum(values: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Running sum of ``values`` within each ``group`` code, in array order (int64).

    Equal to ``pd.Series(values).groupby(group, sort=False).cumsum().to_numpy(np.int64)``
    (int64 modulo 2**64, like pandas)."""
    return Grouping.by(np.asarray(group)).cumsum(values)


def grouped_cummax(values: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Running maximum of ``values`` within each ``group`` code, in array order (int64).

    Equal to ``pd.Series(values).groupby(group, sort=False).cummax().to_numpy(np.int64)``."""
    return Grouping.by(np.asarray(group)).cummax(values)
