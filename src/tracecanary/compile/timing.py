"""Timing encoding per field: ``gap`` (issue-to-issue, ns), ``overlap`` (compute
overlapping the communication, ns, where measured), ``latency`` (measured, ns, where
measured) and ``skew`` (per member slot: the occurrence's members in rank order).

Every stream is indexed by logical occurrence. Two encodings:

``exact`` (lossless mode; also used in bounded mode for a field whose budget is 0
everywhere): the values are run-length / periodic-motif encoded exactly
(``tracecanary.compile.sequence``): ``{"v": value, "repeat": r}``, ``{"values": [...]}``,
``{"body": [...], "repeat": r}``. Skew leaves are whole per-occurrence vectors.

``bounded_intervals``: the occurrences are partitioned into ordered intervals that
follow the structure: inside a motif record an interval covers whole repetitions and
stores one representative per body position (``period`` = body length), elsewhere it
covers consecutive occurrences with ``period`` 1. Each interval stores ``rep`` (what
replay uses), ``max_error_ns`` (the largest absolute error actually incurred, per
position: |source - rep| maximized over the interval, all slots for skew) and
``commitment`` (``segment_commitment`` of exactly the occurrences [start, stop)).
Every error is <= the budget of the position's signature (overrides applied).

Measured masks (overlap, latency) are always exact: ``measured`` records of booleans;
values exist only where measured (an exact stream lists measured values only; a
representative is null where an interval position has no measured value). Unknown
skew is not encoded at all (the stream is null).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracecanary.compile import intervals as iv
from tracecanary.compile import sequence
from tracecanary.compile.source import SourceSerialization
from tracecanary.compile.structure import Span, member_positions, top_level_spans
from tracecanary.errors import InputError

FIELDS = ("gap", "overlap", "latency", "skew")
MASKED = ("overlap", "latency")
VALUE_RUN = "v"
VALUE_BLOCK = "values"
_VAL_COST = 14  # rough bytes of one representative + its error in canonical JSON
_INTERVAL_COST = 120  # rough bytes of an interval's keys, range and commitment
DESCEND_MIN_PERIOD = 16  # a motif body longer than this ...
DESCEND_MAX_REPS = 64  # ... repeated at most this often may be segmented inside


@dataclass(frozen=True)
class TimingArrays:
    """Per-occurrence timing columns and the member layout (members in rank order)."""

    gap: np.ndarray
    overlap: np.ndarray
    has_overlap: np.ndarray
    latency: np.ndarray
    has_latency: np.ndarray
    skew: np.ndarray | None  # flat per member, None when unknown
    member_offsets: np.ndarray  # n+1

    @property
    def n(self) -> int:
        return len(self.gap)

    def values(self, name: str) -> tuple[np.ndarray, np.ndarray | None]:
        if name == "gap":
            return self.gap, None
        if name == "overlap":
            return self.overlap, self.has_overlap
        if name == "latency":
            return self.latency, self.has_latency
        raise KeyError(name)


def timing_arrays(program) -> TimingArrays:
    occ = program.occurrences
    n = program.n
    member_occ = program.members["occ"].to_numpy(dtype=np.int64)
    counts = np.bincount(member_occ, minlength=n) if len(member_occ) else np.zeros(n, np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return TimingArrays(
        gap=occ["gap_ns"].to_numpy(dtype=np.int64),
        overlap=occ["overlap_ns"].to_numpy(dtype=np.int64),
        has_overlap=occ["has_overlap"].to_numpy(dtype=bool),
        latency=occ["latency_ns"].to_numpy(dtype=np.int64),
        has_latency=occ["has_latency"].to_numpy(dtype=bool),
        skew=program.members["skew_ns"].to_numpy(dtype=np.int64) if program.skew_known else None,
        member_offsets=offsets,
    )


# ------------------------------------------------------------------------- exact


def _exact_records(values: np.ndarray) -> list[dict]:
    grammar = sequence.encode_sequence(values)
    return sequence.grammar_records(grammar, run_key=VALUE_RUN, block_key=VALUE_BLOCK)


def _bool_records(mask: np.ndarray) -> list[dict]:
    grammar = sequence.encode_sequence(mask.astype(np.int64))
    return sequence.grammar_records(grammar, run_key=VALUE_RUN, block_key=VALUE_BLOCK, value=bool)


def _skew_vector_ids(t: TimingArrays) -> tuple[np.ndarray, list[list[int]]]:
    """Id per occurrence of its skew vector, and the vectors by id (first-seen order).

    Rows are keyed by a 64-bit polynomial hash of (size, values); rows with equal keys
    are then confirmed element by element, so a hash collision cannot merge different
    vectors (a collision falls back to exact tuples)."""
    offsets = t.member_offsets
    sizes = np.diff(offsets)
    if t.n == 0:
        return np.zeros(0, dtype=np.int64), []
    slot = np.arange(len(t.skew), dtype=np.int64) - np.repeat(offsets[:-1], sizes)
    h = sequence._mix(t.skew) * sequence._mix(slot + 0x5BD1E995)
    row_hash = np.zeros(t.n, dtype=np.uint64)
    nonempty = sizes > 0
    if len(h):
        row_hash[nonempty] = np.add.reduceat(h, offsets[:-1][nonempty])
    row_hash ^= sequence._mix(sizes)
    codes, _ = pd.factorize(row_hash.view(np.int64), sort=False)
    codes = codes.astype(np.int64)
    _, first = np.unique(codes, return_index=True)
    rep_rows = first[codes]
    same = np.array_equal(sizes[rep_rows], sizes) and np.array_equal(
        t.skew[member_positions(offsets[rep_rows], sizes)], t.skew
    )
    if not same:
        keys = [tuple(t.skew[offsets[i] : offsets[i + 1]]) for i in range(t.n)]
        codes, _ = pd.factorize(pd.Series(keys, dtype=object), sort=False)
        codes = codes.astype(np.int64)
        _, first = np.unique(codes, return_index=True)
    vectors: list = [None] * len(first)
    first_sizes = sizes[first]
    for k in np.unique(first_sizes):
        which = np.flatnonzero(first_sizes == k)
        rows = first[which]
        block = t.skew[member_positions(offsets[rows], np.full(len(rows), k))].reshape(
            len(rows), int(k)
        )
        for w, vec in zip(which.tolist(), block.tolist(), strict=True):
            vectors[w] = vec
    return codes, vectors


def exact_bytes_lower_bound(name: str, t: TimingArrays) -> int:
    """A lower bound on the canonical JSON size of ``encode_exact(name, t)``: every
    distinct value must be written at least once, with its digits and a delimiter."""
    if name == "skew":
        values = t.skew
    else:
        values, mask = t.values(name)
        if mask is not None:
            values = values[mask]
    distinct = pd.unique(values)
    if len(distinct) == 0:
        return 0
    digits = np.where(
        distinct > 0, np.floor(np.log10(np.maximum(distinct, 1))).astype(np.int64) + 1, 1
    )
    return int(digits.sum() + len(distinct))


def encode_exact(name: str, t: TimingArrays) -> dict:
    if name == "skew":
        ids, vectors = _skew_vector_ids(t)
        grammar = sequence.encode_sequence(ids)
        records = sequence.grammar_records(
            grammar, run_key=VALUE_RUN, block_key=VALUE_BLOCK, table=vectors
        )
        return {"encoding": "exact", "values": records}
    values, mask = t.values(name)
    if mask is None:
        return {"encoding": "exact", "values": _exact_records(values)}
    return {
        "encoding": "exact",
        "measured": _bool_records(mask),
        "values": _exact_records(values[mask]),
    }


# ----------------------------------------------------------------------- bounded


@dataclass
class _Segment:
    start: int  # first occurrence
    period: int
    reps: int
    starts: np.ndarray  # interval start rows
    matrix: np.ndarray  # rows x cols values
    measured: np.ndarray | None
    col_position: np.ndarray  # body position of each column
    slots: np.ndarray  # columns per position (skew) or ones


def _flat_matrices(name, t, lo, hi):
    """(row offset, matrix, measured, slots, budgets per row) pieces of a flat range."""
    if name != "skew":
        values, mask = t.values(name)
        yield lo, values[lo:hi, None], None if mask is None else mask[lo:hi, None], 1
        return
    sizes = np.diff(t.member_offsets[lo : hi + 1])
    change = np.flatnonzero(sizes[1:] != sizes[:-1]) + 1
    bounds = np.concatenate(([0], change, [hi - lo]))
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        k = int(sizes[a])
        m0, m1 = t.member_offsets[lo + a], t.member_offsets[lo + b]
        yield lo + a, t.skew[m0:m1].reshape(b - a, k), None, k


def _flat_segments(name, t, lo, hi, budget_occ) -> list[_Segment]:
    segs = []
    for row0, matrix, measured, k in _flat_matrices(name, t, lo, hi):
        rows = matrix.shape[0]
        b_rows = budget_occ[row0 : row0 + rows]
        breaks = np.zeros(rows, dtype=bool)
        breaks[1:] = b_rows[1:] != b_rows[:-1]
        starts = iv.partition(matrix, b_rows[:, None], measured=measured, breaks=breaks)
        segs.append(
            _Segment(
                row0,
                1,
                rows,
                starts,
                matrix,
                measured,
                np.zeros(matrix.shape[1], np.int64),
                np.array([k]),
            )
        )
    return segs


def _periodic_segment(name, t, span: Span, budget_occ) -> _Segment:
    s, p, r = span.start, span.period, span.reps
    b_pos = budget_occ[s : s + p]
    if name == "skew":
        sizes = np.diff(t.member_offsets[s : s + p + 1])
        m0, m1 = t.member_offsets[s], t.member_offsets[span.stop]
        matrix = t.skew[m0:m1].reshape(r, int(sizes.sum()))
        measured = None
        col_position = np.repeat(np.arange(p), sizes)
        slots = sizes
    else:
        values, mask = t.values(name)
        matrix = values[s : span.stop].reshape(r, p)
        measured = None if mask is None else mask[s : span.stop].reshape(r, p)
        col_position = np.arange(p)
        slots = np.ones(p, dtype=np.int64)
    starts = iv.partition(matrix, b_pos[col_position][None, :], measured=measured)
    return _Segment(s, p, r, starts, matrix, measured, col_position, slots)


def _cost(seg: _Segment) -> int:
    return len(seg.starts) * (_INTERVAL_COST + _VAL_COST * seg.matrix.shape[1])


def _segments(name, t, spans: list[Span], budget_occ) -> list[_Segment]:
    """Interval segments for consecutive spans, choosing per motif the cheapest of:
    intervals over whole repetitions (periodic), intervals over single occurrences
    (flat), or, for a long body repeated a few times, the body's own segmentation in
    every repetition (descend: inner motifs get their own periodic intervals)."""
    out: list[_Segment] = []
    flat_lo = None
    for span in spans:
        if not span.motif or span.reps < 2:
            if flat_lo is None:
                flat_lo = span.start
            continue
        if flat_lo is not None:
            out.extend(_flat_segments(name, t, flat_lo, span.start, budget_occ))
            flat_lo = None
        periodic = _periodic_segment(name, t, span, budget_occ)
        if len(periodic.starts) * 4 <= span.reps:
            out.append(periodic)
            continue
        options = [[periodic]]
        if span.period > DESCEND_MIN_PERIOD and span.reps <= DESCEND_MAX_REPS:
            inner: list[_Segment] = []
            for r in range(span.reps):
                body = top_level_spans(list(span.body), span.start + r * span.period)
                inner.extend(_segments(name, t, body, budget_occ))
            options.append(inner)
        else:
            options.append(_flat_segments(name, t, span.start, span.stop, budget_occ))
        out.extend(min(options, key=lambda segs: sum(_cost(s) for s in segs)))
    if flat_lo is not None:
        out.extend(_flat_segments(name, t, flat_lo, spans[-1].stop, budget_occ))
    return out


MIN_INTERVAL_BYTES = 100  # an interval's canonical JSON is never smaller (64-hex commitment)


@dataclass
class BoundedPlan:
    """The interval partition of one field, before intervals are materialized."""

    name: str
    segments: list

    @property
    def intervals(self) -> int:
        return sum(len(s.starts) for s in self.segments)

    def bytes_lower_bound(self) -> int:
        """The stream's canonical JSON is at least this long: every interval costs
        MIN_INTERVAL_BYTES, every representative and error entry >= 2 bytes."""
        entries = sum(len(s.starts) * (s.matrix.shape[1] + s.period) for s in self.segments)
        return self.intervals * MIN_INTERVAL_BYTES + 2 * entries

    def interval_start(self, k: int) -> int:
        """First occurrence of the k-th interval."""
        for seg in self.segments:
            if k < len(seg.starts):
                return int(seg.start) + int(seg.starts[k]) * int(seg.period)
            k -= len(seg.starts)
        raise IndexError(k)


def plan_bounded(
    name: str, t: TimingArrays, spans: list[Span], budget_occ: np.ndarray
) -> BoundedPlan:
    """Partition one field into intervals (``budget_occ``: budget in ns per occurrence)."""
    return BoundedPlan(name, _segments(name, t, spans, budget_occ))


def encode_bounded(
    name: str,
    t: TimingArrays,
    spans: list[Span],
    budget_occ: np.ndarray,
    ser: SourceSerialization,
    plan: BoundedPlan | None = None,
) -> dict:
    """Bounded-interval stream of one field. ``budget_occ``: budget (ns) per occurrence."""
    segs = (plan or plan_bounded(name, t, spans, budget_occ)).segments
    out_intervals: list[dict] = []
    overall = 0
    for seg in segs:
        rep, has, err = iv.summarize(seg.matrix, seg.starts, seg.measured)
        stops = np.append(seg.starts[1:], seg.reps)
        pos_err = _per_position(err, has, seg)
        for i, (a, b) in enumerate(zip(seg.starts, stops, strict=True)):
            occ0 = int(seg.start) + int(a) * int(seg.period)
            occ1 = int(seg.start) + int(b) * int(seg.period)
            reps_out, errs_out = _interval_values(name, rep[i], has[i], pos_err[i], seg)
            overall = max(overall, max((e for e in errs_out if e is not None), default=0))
            out_intervals.append(
                {
                    "start": occ0,
                    "stop": occ1,
                    "period": int(seg.period),
                    "rep": reps_out,
                    "max_error_ns": errs_out,
                    "commitment": ser.segment(occ0, occ1),
                }
            )
    stream = {
        "encoding": "bounded_intervals",
        "intervals": out_intervals,
        "max_error_ns": int(overall),
    }
    if name in MASKED:
        _, mask = t.values(name)
        stream["measured"] = _bool_records(mask)
    return stream


def _per_position(err, has, seg: _Segment) -> np.ndarray:
    """Max error per body position (over its slot columns); -1 where nothing measured."""
    e = np.where(has, err, -1)
    if seg.period == 1:
        return e.max(axis=1, keepdims=True)
    bounds = np.concatenate(([0], np.cumsum(seg.slots)[:-1]))
    return np.maximum.reduceat(e, bounds, axis=1)


def _interval_values(name, rep_row, has_row, pos_err_row, seg: _Segment):
    errs = [e if e >= 0 else None for e in pos_err_row.tolist()]
    if name == "skew":
        values = rep_row.tolist()
        if seg.period == 1:
            return [values], errs
        bounds = np.concatenate(([0], np.cumsum(seg.slots))).tolist()
        return [values[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)], errs
    values = rep_row.tolist()
    if not has_row.all():
        values = [v if h else None for v, h in zip(values, has_row.tolist(), strict=True)]
    return values, errs


# ------------------------------------------------------------------------ decode


def _expand_vectors(records: list[dict], table: list) -> np.ndarray:
    """Leaf ids of vector-valued records; every literal leaf gets its own id in ``table``."""
    parts: list[np.ndarray] = []
    for rec in records:
        if VALUE_BLOCK in rec:
            items = rec[VALUE_BLOCK]
            parts.append(np.arange(len(table), len(table) + len(items), dtype=np.int64))
            table.extend(items)
        elif "body" in rec:
            parts.append(np.tile(_expand_vectors(rec["body"], table), int(rec["repeat"])))
        else:
            parts.append(np.full(int(rec["repeat"]), len(table), dtype=np.int64))
            table.append(rec[VALUE_RUN])
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def decode_bool(records) -> np.ndarray:
    return sequence.expand_records(records, run_key=VALUE_RUN, block_key=VALUE_BLOCK).astype(bool)


def decode_ints(records) -> np.ndarray:
    return sequence.expand_records(records, run_key=VALUE_RUN, block_key=VALUE_BLOCK)


def decode_stream(name: str, stream: dict, n: int, member_offsets: np.ndarray):
    """(values, measured mask or None) per occurrence; skew: flat per member."""
    where = f"timing.{name}"
    mask = None
    if name in MASKED:
        mask = decode_bool(stream["measured"])
        if len(mask) != n:
            raise InputError(f"measured mask covers {len(mask)} occurrences, not {n}", field=where)
    if stream["encoding"] == "exact":
        if name == "skew":
            table: list = []
            ids = _expand_vectors(stream["values"], table)
            if len(ids) != n:
                raise InputError(f"skew stream covers {len(ids)} occurrences, not {n}", field=where)
            lens = np.fromiter(map(len, table), dtype=np.int64, count=len(table))
            if not np.array_equal(lens[ids], np.diff(member_offsets)):
                raise InputError("skew vectors do not match the group sizes", field=where)
            flat_table = np.fromiter(itertools.chain.from_iterable(table), dtype=np.int64)
            table_off = np.concatenate(([0], np.cumsum(lens)))
            return flat_table[member_positions(table_off[ids], lens[ids])], None
        vals = decode_ints(stream["values"])
        if mask is None:
            if len(vals) != n:
                raise InputError(f"stream covers {len(vals)} occurrences, not {n}", field=where)
            return vals, None
        if len(vals) != int(mask.sum()):
            raise InputError("values do not match the measured mask", field=where)
        out = np.zeros(n, dtype=np.int64)
        out[mask] = vals
        return out, mask
    return _decode_intervals(name, stream["intervals"], n, member_offsets, mask), mask


def _decode_intervals(name, intervals, n, member_offsets, mask):
    where = f"timing.{name}.intervals"
    skew = name == "skew"
    out = np.zeros(int(member_offsets[-1]) if skew else n, dtype=np.int64)
    pos = 0
    p1_start, p1_len, p1_val = [], [], []
    for k, itv in enumerate(intervals):
        s, e, p, rep = int(itv["start"]), int(itv["stop"]), int(itv["period"]), itv["rep"]
        if s != pos or e <= s or p < 1 or (e - s) % p or len(rep) != p:
            raise InputError(
                f"interval [{s}, {e}) period {p} does not continue the partition at {pos}",
                record=k,
                field=where,
            )
        pos = e
        if skew:
            sizes = np.diff(member_offsets[s : s + p + 1]) if p > 1 else None
            flat = [x for part in rep for x in part]
            m0, m1 = int(member_offsets[s]), int(member_offsets[e])
            if p == 1:
                widths = np.diff(member_offsets[s : e + 1])
                if (widths != len(flat)).any():
                    raise InputError(
                        "skew representative has the wrong slot count", record=k, field=where
                    )
            elif sum(len(part) for part in rep) != int(sizes.sum()) or any(
                len(part) != int(w) for part, w in zip(rep, sizes, strict=True)
            ):
                raise InputError(
                    "skew representative has the wrong slot count", record=k, field=where
                )
            out[m0:m1] = np.tile(np.asarray(flat, dtype=np.int64), (e - s) // p)
            continue
        vals = np.array([0 if v is None else int(v) for v in rep], dtype=np.int64)
        if mask is not None:
            block = mask[s:e].reshape(-1, p)
            nulls = np.array([v is None for v in rep])
            if (block[:, nulls]).any():
                raise InputError(
                    "a measured occurrence has no representative", record=k, field=where
                )
        elif any(v is None for v in rep):
            raise InputError("representative is null", record=k, field=where)
        if p == 1:
            p1_start.append(s)
            p1_len.append(e - s)
            p1_val.append(vals[0])
        else:
            out[s:e] = np.tile(vals, (e - s) // p)
    if pos != n:
        raise InputError(f"intervals cover {pos} occurrences, not {n}", field=where)
    if p1_start:
        lens = np.asarray(p1_len, dtype=np.int64)
        idx = np.repeat(np.asarray(p1_start, dtype=np.int64), lens) + (
            np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
        )
        out[idx] = np.repeat(np.asarray(p1_val, dtype=np.int64), lens)
    if mask is not None:
        out = np.where(mask, out, 0)
    return out


def count_stream_records(stream: dict | None) -> int:
    if stream is None:
        return 0
    total = 0
    if "measured" in stream:
        total += sequence.count_records(stream["measured"], VALUE_BLOCK)
    if stream["encoding"] == "exact":
        total += sequence.count_records(stream["values"], VALUE_BLOCK)
    else:
        total += len(stream["intervals"])
    return total
