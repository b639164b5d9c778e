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

Lossless mode also encodes, exactly and as vectors like skew, each member's own latency
and overlap where some member's differs from its occurrence's (``MEMBER_STREAMS``: the
occurrence's value minus the member's own; ``TimingArrays.deficits``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracecanary import factorize as fz
from tracecanary.compile import intervals as iv
from tracecanary.compile import jsonsize as js
from tracecanary.compile import sequence
from tracecanary.compile.source import SourceSerialization
from tracecanary.compile.structure import Span, member_positions, top_level_spans
from tracecanary.compile.timing_streams import MASKED, MEMBER_STREAMS, VALUE_BLOCK, VALUE_RUN

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
    # flat per member: the occurrence's value minus the member's own (MEMBER_STREAMS),
    # None where every member's value is its occurrence's
    deficits: dict | None = None

    @property
    def n(self) -> int:
        return len(self.gap)

    def vectors(self, name: str) -> np.ndarray:
        """The flat per-member values of a vector stream: ``skew`` or a member stream."""
        return self.skew if name == "skew" else self.deficits[name]

    def values(self, name: str) -> tuple[np.ndarray, np.ndarray | None]:
        if name == "gap":
            return self.gap, None
        if name == "overlap":
            return self.overlap, self.has_overlap
        if name == "latency":
            return self.latency, self.has_latency
        raise KeyError(name)


def timing_arrays(program) -> TimingArrays:
    """The timing columns of ``program`` (read through its column accessors)."""
    n = program.n
    member_occ = program.member_column("occ")  # int32: only counted
    counts = np.bincount(member_occ, minlength=n) if len(member_occ) else np.zeros(n, np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    deficits = {}
    for stream, field in MEMBER_STREAMS.items():
        if f"{field}_ns" in program.held_member_values():
            occ_value = program.column(f"{field}_ns", np.int64)[member_occ]
            own = program.member_column(f"{field}_ns", np.int64)
            has = program.column(f"has_{field}", bool)[member_occ]
            deficits[stream] = np.where(has, occ_value - own, 0)
    return TimingArrays(
        gap=program.column("gap_ns", np.int64),
        overlap=program.column("overlap_ns", np.int64),
        has_overlap=program.column("has_overlap", bool),
        latency=program.column("latency_ns", np.int64),
        has_latency=program.column("has_latency", bool),
        skew=program.member_column("skew_ns", np.int64) if program.skew_known else None,
        member_offsets=offsets,
        deficits=deficits or None,
    )


# ------------------------------------------------------------------------- exact


def _bool_records(mask: np.ndarray) -> list[dict]:
    grammar = sequence.encode_sequence(mask.astype(np.int64))
    return sequence.grammar_records(grammar, run_key=VALUE_RUN, block_key=VALUE_BLOCK, value=bool)


def _skew_vector_ids(t: TimingArrays, name: str = "skew") -> tuple[np.ndarray, np.ndarray]:
    """Id per occurrence of its skew vector (ids in first-seen order), and the first
    occurrence holding each id.

    Rows are keyed by a 64-bit polynomial hash of (size, values); rows with equal keys
    are then confirmed element by element, so a hash collision cannot merge different
    vectors (a collision falls back to exact tuples). ``name``: the vector stream
    (``TimingArrays.vectors``)."""
    flat = t.vectors(name)
    offsets = t.member_offsets
    sizes = np.diff(offsets)
    if t.n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    row_hash = np.zeros(t.n, dtype=np.uint64)
    for lo in range(0, t.n, _HASH_CHUNK):  # chunks of rows: bounded temporaries
        hi = min(t.n, lo + _HASH_CHUNK)
        m0, m1 = int(offsets[lo]), int(offsets[hi])
        local, chunk_sizes = offsets[lo:hi] - m0, sizes[lo:hi]
        slot = np.arange(m1 - m0, dtype=np.int64) - np.repeat(local, chunk_sizes)
        h = sequence._mix(flat[m0:m1]) * sequence._mix(slot + 0x5BD1E995)
        nonempty = chunk_sizes > 0
        if len(h):
            row_hash[lo:hi][nonempty] = np.add.reduceat(h, local[nonempty])
    row_hash ^= sequence._mix(sizes)
    codes, _ = fz.factorize(row_hash.view(np.int64))
    first = fz.first_rows(codes)
    rep_rows = first[codes]
    same = np.array_equal(sizes[rep_rows], sizes) and all(
        np.array_equal(
            flat[member_positions(offsets[rep_rows[lo:hi]], sizes[lo:hi])],
            flat[offsets[lo] : offsets[hi]],
        )
        for lo, hi in ((lo, min(t.n, lo + _HASH_CHUNK)) for lo in range(0, t.n, _HASH_CHUNK))
    )
    if not same:
        index: dict[tuple, int] = {}  # exact vectors, numbered in order of first appearance
        codes = np.fromiter(
            (
                index.setdefault(tuple(flat[offsets[i] : offsets[i + 1]].tolist()), len(index))
                for i in range(t.n)
            ),
            dtype=np.int64,
            count=t.n,
        )
        first = fz.first_rows(codes)
    return codes, first


def _skew_vectors(t: TimingArrays, first: np.ndarray, name: str = "skew") -> list[list[int]]:
    """The vectors (skew, or stream ``name``) of rows ``first`` as lists (one Python
    list per vector)."""
    flat = t.vectors(name)
    offsets = t.member_offsets
    sizes = np.diff(offsets)
    vectors: list = [None] * len(first)
    first_sizes = sizes[first]
    for k in np.flatnonzero(np.bincount(first_sizes)):  # each size, ascending
        which_all = np.flatnonzero(first_sizes == k)
        for lo in range(0, len(which_all), _VECTOR_CHUNK):  # bounded temporaries
            which = which_all[lo : lo + _VECTOR_CHUNK]
            rows = first[which]
            block = flat[member_positions(offsets[rows], np.full(len(rows), k))].reshape(
                len(rows), int(k)
            )
            for w, vec in zip(which.tolist(), block.tolist(), strict=True):
                vectors[w] = vec
    return vectors


_VECTOR_CHUNK = 1 << 16
_HASH_CHUNK = 1 << 18


def _vector_text_len(t: TimingArrays, rows: np.ndarray, name: str = "skew") -> np.ndarray:
    """Canonical JSON length of the vector (skew, or stream ``name``: a list of
    integers) of each row in ``rows``, computed in chunks of rows so temporaries stay
    small."""
    flat = t.vectors(name)
    offsets = t.member_offsets
    sizes = np.diff(offsets)[rows]
    out = np.empty(len(rows), dtype=np.int64)
    for lo in range(0, len(rows), _VECTOR_CHUNK):
        chunk_rows, chunk_sizes = rows[lo : lo + _VECTOR_CHUNK], sizes[lo : lo + _VECTOR_CHUNK]
        digits = js.int_len(flat[member_positions(offsets[chunk_rows], chunk_sizes)])
        sums = np.zeros(len(chunk_rows), dtype=np.int64)
        nonempty = chunk_sizes > 0
        if len(digits):
            starts = np.cumsum(chunk_sizes) - chunk_sizes
            sums[nonempty] = np.add.reduceat(digits, starts[nonempty])
        out[lo : lo + _VECTOR_CHUNK] = 2 + sums + np.maximum(chunk_sizes - 1, 0)
    return out


def exact_bytes_lower_bound(name: str, t: TimingArrays) -> int:
    """A lower bound on the canonical JSON size of ``encode_exact(name, t)``: every
    distinct value must be written at least once, with its digits and a delimiter."""
    if name == "skew" or name in MEMBER_STREAMS:
        values = t.vectors(name)
    else:
        values, mask = t.values(name)
        if mask is not None:
            values = values[mask]
    distinct = fz.distinct(values)
    if len(distinct) == 0:
        return 0
    digits = np.where(
        distinct > 0, np.floor(np.log10(np.maximum(distinct, 1))).astype(np.int64) + 1, 1
    )
    return int(digits.sum() + len(distinct))


@dataclass
class ExactPlan:
    """The exact encoding of one field before its records are built: the grammar of the
    values (of the skew vector ids for skew) and of the measured mask. Its canonical
    size and record count are computed from the grammars (``jsonsize``), so a stream
    that loses the size comparison is never built."""

    name: str
    grammar: sequence.Grammar
    leaf_len: np.ndarray  # text length of each run token's value
    mask_grammar: sequence.Grammar | None
    t: TimingArrays
    skew_first: np.ndarray | None = None  # skew: first row of each vector id
    _sizes: tuple | None = None

    def _measure(self) -> tuple[int, int]:
        if self._sizes is None:
            vlen, vcount = js.grammar_records_len(
                self.grammar, self.leaf_len, run_key=VALUE_RUN, block_key=VALUE_BLOCK
            )
            members = [("encoding", len('"exact"')), ("values", vlen)]
            count = vcount
            if self.mask_grammar is not None:
                mlen, mcount = js.grammar_records_len(
                    self.mask_grammar,
                    js.bool_len(self.mask_grammar.run_values),
                    run_key=VALUE_RUN,
                    block_key=VALUE_BLOCK,
                )
                members.append(("measured", mlen))
                count += mcount
            self._sizes = (js.object_len(members) + 1, count)
        return self._sizes

    def stream_bytes(self) -> int:
        """``len(canonical_json_bytes(self.encode()))`` (trailing newline included)."""
        return self._measure()[0]

    def records(self) -> int:
        """``count_stream_records(self.encode())``."""
        return self._measure()[1]

    def encode(self) -> dict:
        if self.skew_first is not None:  # a vector stream
            vectors = _skew_vectors(self.t, self.skew_first, self.name)
            records = sequence.grammar_records(
                self.grammar, run_key=VALUE_RUN, block_key=VALUE_BLOCK, table=vectors
            )
            return {"encoding": "exact", "values": records}
        records = sequence.grammar_records(self.grammar, run_key=VALUE_RUN, block_key=VALUE_BLOCK)
        if self.mask_grammar is None:
            return {"encoding": "exact", "values": records}
        return {
            "encoding": "exact",
            "measured": sequence.grammar_records(
                self.mask_grammar, run_key=VALUE_RUN, block_key=VALUE_BLOCK, value=bool
            ),
            "values": records,
        }


def plan_exact(name: str, t: TimingArrays) -> ExactPlan:
    """The exact encoding of ``name`` (grammars only; see ``ExactPlan``)."""
    if name == "skew" or name in MEMBER_STREAMS:
        ids, first = _skew_vector_ids(t, name)
        grammar = sequence.encode_sequence(ids)
        vec_len = _vector_text_len(t, first, name)
        leaf = vec_len[grammar.run_values] if len(vec_len) else np.zeros(0, np.int64)
        return ExactPlan(name, grammar, leaf, None, t, skew_first=first)
    values, mask = t.values(name)
    if mask is not None:
        values = values[mask]
    grammar = sequence.encode_sequence(values)
    mask_grammar = None if mask is None else sequence.encode_sequence(mask.astype(np.int64))
    return ExactPlan(name, grammar, js.int_len(grammar.run_values), mask_grammar, t)


def encode_exact(name: str, t: TimingArrays) -> dict:
    return plan_exact(name, t).encode()


def bool_records_len(mask: np.ndarray) -> tuple[int, int]:
    """(canonical length, record count) of ``_bool_records(mask)``."""
    grammar = sequence.encode_sequence(np.asarray(mask).astype(np.int64))
    return js.grammar_records_len(
        grammar, js.bool_len(grammar.run_values), run_key=VALUE_RUN, block_key=VALUE_BLOCK
    )


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
COMMITMENT_LEN = 2 + 64  # a quoted SHA-256 hex digest
# an interval's keys, separators and commitment: everything but its five numbers/lists
_INTERVAL_CONST = js.object_len(
    [(k, 0) for k in ("start", "stop", "period", "rep", "max_error_ns")]
    + [("commitment", COMMITMENT_LEN)]
)


@dataclass
class _Summary:
    """Per interval of a segment: representatives, measured flags, errors."""

    rep: np.ndarray  # intervals x columns
    has: np.ndarray  # intervals x columns
    pos_err: np.ndarray  # intervals x positions: max error per body position, -1 = none
    stops: np.ndarray  # interval stop rows


@dataclass
class BoundedPlan:
    """The interval partition of one field, before intervals are materialized."""

    name: str
    segments: list
    _summaries: list | None = None

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

    def release(self) -> None:
        """Drop the cached summaries (they are recomputed if needed again)."""
        self._summaries = None

    def summaries(self) -> list[_Summary]:
        """Representatives and errors of every interval, per segment (computed once)."""
        if self._summaries is None:
            out = []
            for seg in self.segments:
                rep, has, err = iv.summarize(seg.matrix, seg.starts, seg.measured)
                out.append(
                    _Summary(
                        rep, has, _per_position(err, has, seg), np.append(seg.starts[1:], seg.reps)
                    )
                )
            self._summaries = out
        return self._summaries

    def stream_bytes(self, measured_len: int | None) -> int:
        """``len(canonical_json_bytes(encode_bounded(...)))`` of this plan (trailing
        newline included), from the arrays alone; ``measured_len``: the canonical length
        of the measured-mask records (masked fields), None for the others."""
        total = 0
        count = 0
        overall = 0
        skew = self.name == "skew"
        for seg, sm in zip(self.segments, self.summaries(), strict=True):
            k = len(seg.starts)
            if k == 0:
                continue
            count += k
            period = int(seg.period)
            occ0 = int(seg.start) + seg.starts.astype(np.int64) * period
            occ1 = int(seg.start) + sm.stops.astype(np.int64) * period
            numbers = int(js.int_len(occ0).sum() + js.int_len(occ1).sum())
            numbers += k * len(str(period))
            errs = sm.pos_err
            err_text = np.where(errs >= 0, js.int_len(errs), js.NULL_LEN)
            err_lists = k * (2 + max(errs.shape[1] - 1, 0)) + int(err_text.sum())
            if (errs >= 0).any():
                overall = max(overall, int(errs.max()))
            cols = sm.rep.shape[1]
            if skew:
                digits = int(js.int_len(sm.rep).sum())
                if period == 1:  # [[v, ...]]
                    rep_lists = k * (2 + 2 + max(cols - 1, 0)) + digits
                else:  # [[slot values of position 0], [...], ...]
                    inner = int(np.maximum(seg.slots.astype(np.int64) - 1, 0).sum())
                    rep_lists = k * (2 + (period - 1) + 2 * period + inner) + digits
            else:
                rep_text = np.where(sm.has, js.int_len(sm.rep), js.NULL_LEN)
                rep_lists = k * (2 + max(cols - 1, 0)) + int(rep_text.sum())
            total += k * _INTERVAL_CONST + numbers + err_lists + rep_lists
        members = [
            ("encoding", len('"bounded_intervals"')),
            ("intervals", js.list_len(total, count)),
            ("max_error_ns", len(str(overall))),
        ]
        if measured_len is not None:
            members.append(("measured", measured_len))
        return js.object_len(members) + 1


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
    plan = plan or plan_bounded(name, t, spans, budget_occ)
    out_intervals: list[dict] = []
    overall = 0
    for seg, sm in zip(plan.segments, plan.summaries(), strict=True):
        if len(seg.starts) == 0:
            continue
        period = int(seg.period)
        occ0 = (int(seg.start) + seg.starts.astype(np.int64) * period).tolist()
        occ1 = (int(seg.start) + sm.stops.astype(np.int64) * period).tolist()
        if (sm.pos_err >= 0).any():
            overall = max(overall, int(sm.pos_err.max()))
        reps_out = _rep_lists(name, sm, seg)
        errs_out = _nullable_rows(sm.pos_err, sm.pos_err >= 0)
        for a, b, rep, err in zip(occ0, occ1, reps_out, errs_out, strict=True):
            out_intervals.append(
                {
                    "start": a,
                    "stop": b,
                    "period": period,
                    "rep": rep,
                    "max_error_ns": err,
                    "commitment": ser.segment(a, b),
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


def _nullable_rows(values: np.ndarray, present: np.ndarray) -> list[list]:
    """Each row of ``values`` as a list, None where ``present`` is False."""
    rows = values.tolist()
    if present.all():
        return rows
    for i in np.flatnonzero(~present.all(axis=1)).tolist():
        rows[i] = [v if h else None for v, h in zip(rows[i], present[i].tolist(), strict=True)]
    return rows


def _rep_lists(name: str, sm: _Summary, seg: _Segment) -> list[list]:
    """The ``rep`` list of every interval of a segment: values (None where nothing is
    measured) per position; for skew one list of slot values per position."""
    if name != "skew":
        return _nullable_rows(sm.rep, sm.has)
    if seg.period == 1:
        return [[row] for row in sm.rep.tolist()]
    bounds = np.concatenate(([0], np.cumsum(seg.slots))).tolist()
    parts = [sm.rep[:, a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    return [list(row) for row in zip(*parts, strict=True)]


# ------------------------------------------------------------------------ decode
