"""Recompute every receipt a canary carries from the source it claims to summarize.

``verify_commitments(source, canary)`` returns a list of mismatches, each
``{"segment": where, "expected": what the canary states, "found": what the source
gives}``; an empty list means every receipt holds. Checked:

- ``source``: the whole source's ``source_digest`` against ``source.digest``;
- ``source_commitment``: the segment commitment of the covered occurrences [0, N);
- every bounded interval's ``commitment`` (segment [start, stop));
- every interval's stated ``max_error_ns`` against the error the representative really
  has on the source, and against the budget of its signature;
- exactness of everything stated exactly: the signature sequence, groups, measured
  masks, tail flags, and every lossless timing stream, each member's own latency and
  overlap included (``timing.latency_members`` / ``overlap_members``);
- ``execution``: the stated reduced execution is exactly what the recorded
  ``execution.policy`` selects on this canary (no policy: nothing reduced), so what a
  replay runs and with which weights is recomputable, not merely asserted.

Memory: the content checks (exact columns, members, timing) compare the canary's
logical expansion with the source in chunks of at most ``CHUNK_MEMBERS`` occurrences or
member events. The expansion is never built as a program: its text columns and member
ranks are made from the decoded canary (``compile.expand.decode_canary``) a chunk at a
time, so beyond the source and the decoded arrays (timing values, one per occurrence or
member event) the check holds arrays of a chunk's length, not of the trace's; the
mismatches are the same for any chunk size. The source is read through the Program's
accessors, its text columns in the form it holds them (``verify.text_rows``), so a
column-form source is checked without pandas or pyarrow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tracecanary.compile import timing
from tracecanary.compile.budget import FIELDS, parse_overrides
from tracecanary.compile.document import declared_order
from tracecanary.compile.execution import check_execution
from tracecanary.compile.expand import (
    Decoded,
    check_member_ranks,
    decode_canary,
    signature_column,
)
from tracecanary.compile.source import SourceSerialization, serialize_source
from tracecanary.compile.splits import FIELD as SPLITS_FIELD
from tracecanary.compile.splits import split_bytes
from tracecanary.compile.timing_streams import MEMBER_STREAMS
from tracecanary.errors import InputError
from tracecanary.factorize import sorted_distinct
from tracecanary.program import OCCURRENCE_COLUMNS, SPLITS_COLUMN, Program
from tracecanary.verify.text_rows import arrow_differs, text_rows

if TYPE_CHECKING:
    import pandas as pd

CHUNK_MEMBERS = 1 << 20
"""Most occurrences, or member events, the content check compares at once: its own
arrays are a few of this length (8 MiB each at 8 bytes), not of the trace's."""

# the occurrence columns a canary states exactly, compared in this order
_EXACT_COLUMNS = (
    "op",
    "bytes",
    "dtype",
    "group",
    "root",
    "phase",
    "stream",
    "group_size",
    "tail",
    "has_overlap",
    "has_latency",
)

_COLS = {
    "gap": ("gap_ns", None),
    "overlap": ("overlap_ns", "has_overlap"),
    "latency": ("latency_ns", "has_latency"),
}


def _mismatch(segment: str, expected, found) -> dict:
    return {"segment": segment, "expected": expected, "found": found}


def verify_commitments(
    source: Program,
    canary: dict,
    *,
    serialization: SourceSerialization | None = None,
    decoded: Decoded | None = None,
) -> list[dict]:
    """Mismatches between ``canary``'s receipts and ``source`` (see module doc).

    ``serialization``: ``serialize_source(source)`` when the caller already holds it
    (the behavior search); used only if it was made from this very ``source`` object,
    else recomputed. ``decoded``: ``decode_canary(canary, ranks=False)`` when the caller
    already holds it and has made ``check_member_ranks`` of it (``expand_canary``'s
    refusals). Neither changes the result, only what is recomputed."""
    out: list[dict] = []
    order = declared_order(canary)
    if source.occurrence_order != order:  # the digest below differs too: say why
        out.append(_mismatch("source occurrence_order", order, source.occurrence_order))
    ser = (
        serialization
        if serialization is not None and serialization.program is source
        else serialize_source(source)
    )
    digest = ser.digest()
    if digest != canary["source"]["digest"]:
        out.append(_mismatch("source", canary["source"]["digest"], digest))
    sc = canary["source_commitment"]
    stop = int(sc["stop"])
    if stop > source.n:
        out.append(
            _mismatch(
                f"source_commitment [0, {stop})", sc["sha256"], f"source has {source.n} occurrences"
            )
        )
        return out
    found = ser.segment(int(sc["start"]), stop)
    if found != sc["sha256"]:
        out.append(_mismatch(f"source_commitment [{sc['start']}, {stop})", sc["sha256"], found))
    for name in FIELDS:
        stream = canary["timing"].get(name)
        if stream is None or stream["encoding"] != "bounded_intervals":
            continue
        for k, itv in enumerate(stream["intervals"]):
            s, e = int(itv["start"]), int(itv["stop"])
            where = f"timing.{name}.intervals[{k}] [{s}, {e})"
            if not 0 <= s < e <= ser.n:
                out.append(_mismatch(where, itv["commitment"], "range outside the source"))
                continue
            got = ser.segment(s, e)
            if got != itv["commitment"]:
                out.append(_mismatch(where, itv["commitment"], got))
    del ser, serialization  # no more commitments to read: free the lines if ours
    out.extend(_check_content(source, stop, canary, decoded))
    out.extend(
        _mismatch("execution", "the reduction execution.policy selects", found)
        for found in check_execution(canary)
    )
    return out


def _spans(total: int) -> range:
    """Starts of consecutive ranges of at most ``CHUNK_MEMBERS`` items in [0, total)."""
    return range(0, total, max(1, CHUNK_MEMBERS))


class _Expansion:
    """The canary's logical expansion (``expand_canary(canary)``) as the content check
    reads it: column chunks made from the decoded arrays on demand, with the dtypes and
    values the expanded program's columns hold."""

    _MASKS = {"has_overlap": "overlap", "has_latency": "latency"}  # column: timing field

    def __init__(self, canary: dict, d: Decoded) -> None:
        self.canary, self.d = canary, d
        self.n = len(d.sig_ids)
        self.n_members = int(d.member_offsets[-1])

    def values(self, col: str, lo: int, hi: int) -> np.ndarray:
        """Rows [lo, hi) of the occurrence column ``col`` that is not text, of its dtype."""
        d = self.d
        if col == "group_size":
            values = d.sizes[lo:hi]
        elif col == "tail":
            values = d.tail[lo:hi]
        elif col in self._MASKS:
            values = d.masks[self._MASKS[col]][lo:hi]
        else:
            values = signature_column(self.canary, col, d.sig_ids[lo:hi])
            if col == "bytes" and d.split_codes is not None:  # an all_to_allv's own buffer
                values = split_bytes(self.canary, d.sig_ids[lo:hi], d.split_codes[lo:hi], values)
        return np.asarray(values, dtype=OCCURRENCE_COLUMNS[col])

    def literals(self, col: str) -> list:
        """The signatures' values of the text column ``col``: row i is
        ``literals[sig_ids[i]]``."""
        return [s[col] for s in self.canary["signatures"]]

    def text(self, col: str, lo: int, hi: int) -> pd.Series:
        """Rows [lo, hi) of the text column ``col`` as the expanded program holds them (a
        pandas ``str`` Series)."""
        import pandas as pd

        values = signature_column(self.canary, col, self.d.sig_ids[lo:hi])
        if not (isinstance(values, pd.api.extensions.ExtensionArray) and values.dtype == "str"):
            values = pd.array(np.asarray(values, dtype=object), dtype="str")  # as _make_program
        return pd.Series(values, copy=False)

    def timing(self, name: str) -> np.ndarray:
        """The int64 values of timing field ``name`` (skew: per member event; zero when
        the canary says skew is unknown, as the expansion holds it)."""
        if name == "skew" and not bool(self.canary["source"]["skew_known"]):
            return np.zeros(self.n_members, dtype=np.int64)
        return np.asarray(self.d.values[name], dtype=np.int64)

    def same_ranks(self, ranks: np.ndarray) -> bool:
        """Whether the members' ranks, in order, are ``ranks`` (compared a block at a time)."""
        if len(ranks) != self.n_members:
            return False
        return all(
            np.array_equal(block, ranks[m0 : m0 + block.size]) for m0, block in self.d.rank_blocks()
        )


def _first_difference(e: _Expansion, col: str, source: Program, stop: int) -> tuple | None:
    """(row, the expansion's value, the source's value) at the first row < ``stop`` where
    the expansion's occurrence column ``col`` and the source's differ, compared chunk by
    chunk; None when none does. Text is compared in the form the source holds it
    (``verify.text_rows``); other columns as numpy arrays."""
    if OCCURRENCE_COLUMNS[col] != "str":
        held = source.column(col)

        def differs(lo: int, hi: int) -> np.ndarray:
            return held[lo:hi] != e.values(col, lo, hi)

        def values(i: int) -> tuple:
            return _py(e.values(col, i, i + 1)[0]), _py(held[i])

    elif (rows := text_rows(source, col, literals := e.literals(col), CHUNK_MEMBERS)) is not None:
        sig_ids = e.d.sig_ids

        def differs(lo: int, hi: int) -> np.ndarray:
            return rows.differs(lo, hi, sig_ids[lo:hi])

        def values(i: int) -> tuple:
            return literals[int(sig_ids[i])], rows.source_value(i)

    else:  # pandas str arrays: the source's, or any with a value that is not text (the
        # canary schema refuses one; a column-form source's DataFrames are then built)
        frame = source.occurrences[col]

        def differs(lo: int, hi: int) -> np.ndarray:
            return arrow_differs(e.text(col, lo, hi), frame.iloc[lo:hi])

        def values(i: int) -> tuple:
            return _py(e.text(col, i, i + 1).iloc[0]), _py(frame.iloc[i])

    for lo in _spans(stop):
        hi = min(stop, lo + CHUNK_MEMBERS)
        diff = np.flatnonzero(differs(lo, hi))
        if len(diff):
            i = lo + int(diff[0])
            return (i, *values(i))
    return None


def _first_split_difference(canary: dict, d: Decoded, source: Program, stop: int) -> tuple | None:
    """(row, the canary's send matrix, the source's) at the first of the first ``stop``
    occurrences where an all_to_allv's matrix (the canary's ``splits`` stream, the
    source's ``program.SPLITS_COLUMN``; "" for none) differs; None when none does or
    neither side has matrices."""
    if d.split_codes is None and SPLITS_COLUMN not in source.column_names:
        return None
    stated = np.array(["", *canary.get(SPLITS_FIELD, {}).get("values", [])], dtype=object)
    for lo in _spans(stop):
        hi = min(stop, lo + CHUNK_MEMBERS)
        if SPLITS_COLUMN in source.column_names:
            held = np.asarray(source.column(SPLITS_COLUMN, object)[lo:hi], dtype=object)
        else:
            held = np.full(hi - lo, "", dtype=object)
        if d.split_codes is None:
            expected = np.full(hi - lo, "", dtype=object)
        else:
            expected = stated[d.split_codes[lo:hi] + 1]
        diff = np.flatnonzero(held != expected)
        if len(diff):
            i = int(diff[0])
            return lo + i, str(expected[i]), str(held[i])
    return None


def _check_content(
    source: Program, stop: int, canary: dict, decoded: Decoded | None = None
) -> list[dict]:
    """Mismatches between the canary's logical expansion and the first ``stop``
    occurrences of ``source``: structure, the exactly stated columns, members, skew
    status, then every timing stream (exact: the first differing value; bounded: each
    interval's stated ``max_error_ns`` and its budget). The expansion and the source are
    compared in chunks of at most ``CHUNK_MEMBERS`` occurrences or member events, so the
    check's own arrays stay that size whatever the trace's; the result is the same for
    any chunk size."""
    out: list[dict] = []
    if decoded is None:
        decoded = decode_canary(canary, ranks=False)
        check_member_ranks(decoded)
    expanded = _Expansion(canary, decoded)
    if expanded.n != stop:
        return [_mismatch("structure", f"{expanded.n} occurrences", f"{stop} occurrences")]
    for col in _EXACT_COLUMNS:
        first = _first_difference(expanded, col, source, stop)
        if first is not None:
            i, expected, found = first
            out.append(_mismatch(f"occurrence {i} field {col}", expected, found))
    split_row = _first_split_difference(canary, decoded, source, stop)
    if split_row is not None:
        i, expected, found = split_row
        out.append(_mismatch(f"occurrence {i} field {SPLITS_COLUMN}", expected, found))
    # members are sorted by occurrence: those of the first stop occurrences lead
    source_occ = source.member_column("occ")
    n_members = len(source_occ) if stop >= source.n else int(np.searchsorted(source_occ, stop))
    if expanded.n_members != n_members or not expanded.same_ranks(
        source.member_column("rank")[:n_members]
    ):
        out.append(
            _mismatch("members", "the canary's group members", "different members in the source")
        )
        return out
    if bool(canary["source"]["skew_known"]) != bool(source.skew_known):
        out.append(
            _mismatch("source.skew_known", canary["source"]["skew_known"], source.skew_known)
        )
        return out
    if out:
        return out
    offsets = np.concatenate(([0], np.cumsum(source.column("group_size", np.int64)[:stop])))
    timing_check = _TimingCheck(source, expanded, stop, n_members, offsets)
    overrides = parse_overrides(canary["budget"].get("overrides", {}))
    for name in FIELDS:
        stream = canary["timing"].get(name)
        if stream is None:
            continue
        if stream["encoding"] == "exact":
            out.extend(timing_check.first_difference(name))
            continue
        budget = np.full(
            len(canary["signatures"]), int(canary["budget"][f"{name}_ns"]), dtype=np.int64
        )
        overridden = False
        for sig, fields in overrides.items():
            if name in fields and 0 <= sig < len(budget):
                budget[sig] = fields[name]
                overridden = True
        if overridden:
            budget_occ = budget[timing_check.signature_ids()]
        else:  # one budget for every occurrence: a view, not an array per occurrence
            budget_occ = np.broadcast_to(np.int64(canary["budget"][f"{name}_ns"]), (stop,))
        out.extend(timing_check.intervals(name, stream["intervals"], budget_occ))
    if canary["timing_mode"] == "lossless":
        out.extend(_member_values_check(source, expanded, n_members, offsets))
    return out


def _member_values_check(
    source: Program, expanded: _Expansion, n_members: int, offsets: np.ndarray
) -> list[dict]:
    """A lossless canary states every member's own latency and overlap: the first
    member value (per member stream) that differs from the source's, where the stream is
    absent reading every member's value as its occurrence's."""
    out = []
    occ = source.member_column("occ")[:n_members]
    for name, field in MEMBER_STREAMS.items():
        own = source.member_values(f"{field}_ns")[:n_members]
        has = source.column(f"has_{field}", bool)[occ]
        occ_value = np.where(has, source.column(f"{field}_ns", np.int64)[occ], 0)
        stated = expanded.d.values.get(name)
        got = occ_value - (0 if stated is None else np.asarray(stated, dtype=np.int64))
        bad = np.flatnonzero(got != own)
        if len(bad):
            i = int(bad[0])
            occ_i = int(np.searchsorted(offsets, i, side="right") - 1)
            out.append(_mismatch(f"timing.{name} occurrence {occ_i}", int(got[i]), int(own[i])))
    return out


class _TimingCheck:
    """A timing field's error (|source - expansion|, 0 where not measured) per
    occurrence, computed for one chunk of occurrences at a time (skew: the largest
    over the occurrence's members)."""

    def __init__(
        self, source: Program, expanded: _Expansion, stop: int, n_members: int, offsets: np.ndarray
    ) -> None:
        self.source, self.expanded = source, expanded
        self.stop, self.n_members, self.offsets = stop, n_members, offsets
        self._sig_ids: np.ndarray | None = None

    def signature_ids(self) -> np.ndarray:
        """The source's signature id per covered occurrence (first-seen order over the
        source, which numbers the covered prefix as the prefix alone would)."""
        if self._sig_ids is None:
            self._sig_ids = self.source.signature_rows()[0][: self.stop]
        return self._sig_ids

    def _columns(self, name: str):
        """(source values, expansion values, measured mask or None): whole columns,
        as views where the tables hold int64 / bool."""
        source = self.source
        if name == "skew":
            return source.member_column("skew_ns", np.int64), self.expanded.timing("skew"), None
        col, mcol = _COLS[name]
        mask = None if mcol is None else source.column(mcol, bool)
        return source.column(col, np.int64), self.expanded.timing(name), mask

    def first_difference(self, name: str) -> list[dict]:
        """The first value an exact stream states wrongly (none: empty)."""
        src, got, mask = self._columns(name)
        total = self.n_members if name == "skew" else self.stop
        for lo in _spans(total):
            hi = min(total, lo + CHUNK_MEMBERS)
            err = src[lo:hi] != got[lo:hi]
            if mask is not None:
                err &= mask[lo:hi]
            bad = np.flatnonzero(err)
            if len(bad):
                i = lo + int(bad[0])
                occ_i = (
                    int(np.searchsorted(self.offsets, i, side="right") - 1) if name == "skew" else i
                )
                return [_mismatch(f"timing.{name} occurrence {occ_i}", int(got[i]), int(src[i]))]
        return []

    def _chunk_end(self, name: str, lo: int) -> int:
        """End of the chunk of occurrences that starts at ``lo``: at most
        ``CHUNK_MEMBERS`` occurrences, and for skew at most that many members (but at
        least one occurrence)."""
        hi = min(self.stop, lo + max(1, CHUNK_MEMBERS))
        if name == "skew":
            limit = self.offsets[lo] + max(1, CHUNK_MEMBERS)
            hi = min(hi, int(np.searchsorted(self.offsets, limit, side="right")) - 1)
        return max(hi, lo + 1)

    def _errors(self, name: str, columns, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """(error per occurrence, measured per occurrence) over occurrences [lo, hi)."""
        src, got, mask = columns
        if name == "skew":
            m0, m1 = int(self.offsets[lo]), int(self.offsets[hi])
            per_member = np.abs(src[m0:m1] - got[m0:m1])
            sizes = np.diff(self.offsets[lo : hi + 1])
            per_occ = np.zeros(hi - lo, dtype=np.int64)
            some = sizes > 0
            if per_member.size:
                starts = self.offsets[lo:hi][some] - m0
                per_occ[some] = np.maximum.reduceat(per_member, starts)
            return per_occ, np.ones(hi - lo, dtype=bool)
        err = np.abs(src[lo:hi] - got[lo:hi])
        if mask is None:
            return err, np.ones(hi - lo, dtype=bool)
        has = mask[lo:hi]
        return np.where(has, err, 0), has

    def intervals(self, name: str, intervals: list[dict], budget_occ: np.ndarray) -> list[dict]:
        """Each bounded interval's stated ``max_error_ns`` (per period position, null
        where no occurrence there is measured) against the error its representative
        really has, and the first occurrence whose error exceeds its budget; in interval
        order, the error bound before the budget. The intervals partition the covered
        occurrences in order (``decode_canary`` refuses a canary whose intervals do not)."""
        starts, periods = _partition(name, intervals, self.stop)
        count = len(intervals)
        base = np.zeros(count + 1, dtype=np.int64)  # interval k's positions: base[k]..
        np.cumsum(periods, out=base[1:])
        actual = np.full(int(base[-1]), -1, dtype=np.int64)
        over_at = np.full(count, -1, dtype=np.int64)
        over_value = np.zeros(count, dtype=np.int64)
        columns = self._columns(name)
        lo = 0
        while lo < self.stop:
            hi = self._chunk_end(name, lo)
            per_occ, has = self._errors(name, columns, lo, hi)
            occ = np.arange(lo, hi, dtype=np.int64)
            k = np.searchsorted(starts, occ, side="right") - 1
            key = base[k] + (occ - starts[k]) % periods[k]
            del occ
            np.maximum.at(actual, key, np.where(has, per_occ, -1))
            del key
            above = np.flatnonzero(per_occ > budget_occ[lo:hi])
            if above.size:
                ks, first = sorted_distinct(k[above], return_index=True)
                fresh = over_at[ks] < 0
                over_at[ks[fresh]] = lo + above[first[fresh]]
                over_value[ks[fresh]] = per_occ[above[first[fresh]]]
            lo = hi
        differs = _stated_differs(intervals, actual, base, periods)
        out = []
        for k in np.flatnonzero(differs | (over_at >= 0)).tolist():
            itv = intervals[k]
            where = f"timing.{name}.intervals[{k}] [{int(itv['start'])}, {int(itv['stop'])})"
            if differs[k]:
                found = actual[base[k] : base[k + 1]].tolist()
                out.append(
                    _mismatch(
                        f"{where} max_error_ns",
                        itv["max_error_ns"],
                        [None if v < 0 else v for v in found],
                    )
                )
            if over_at[k] >= 0:
                i = int(over_at[k])
                out.append(
                    _mismatch(
                        f"{where} budget at occurrence {i}",
                        int(budget_occ[i]),
                        int(over_value[k]),
                    )
                )
        return out


def _partition(name: str, intervals: list[dict], stop: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, period) of each interval, refusing intervals that do not partition [0,
    ``stop``) in order into whole periods (as ``decode_canary`` does)."""
    count = len(intervals)
    starts = np.fromiter((int(i["start"]) for i in intervals), dtype=np.int64, count=count)
    stops = np.fromiter((int(i["stop"]) for i in intervals), dtype=np.int64, count=count)
    periods = np.fromiter((int(i["period"]) for i in intervals), dtype=np.int64, count=count)
    follows = np.concatenate(([0], stops[:-1]))
    bad = (starts != follows) | (stops <= starts) | (periods < 1)
    bad[~bad] = (stops[~bad] - starts[~bad]) % periods[~bad] != 0
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"interval [{starts[k]}, {stops[k]}) period {periods[k]} does not continue the "
            f"partition at {follows[k]}",
            record=k,
            field=f"timing.{name}.intervals",
        )
    covered = int(stops[-1]) if count else 0
    if covered != stop:
        raise InputError(
            f"intervals cover {covered} occurrences, not {stop}", field=f"timing.{name}.intervals"
        )
    return starts, periods


def _stated_differs(
    intervals: list[dict], actual: np.ndarray, base: np.ndarray, periods: np.ndarray
) -> np.ndarray:
    """Per interval, whether its stated ``max_error_ns`` (null read as -1) differs from
    ``actual[base[k]:base[k + 1]]``: compared as one flat array when every list has one
    entry per position and fits int64, else interval by interval."""
    stated = [itv["max_error_ns"] for itv in intervals]
    if not stated:
        return np.zeros(0, dtype=bool)
    lengths = np.fromiter(map(len, stated), dtype=np.int64, count=len(stated))
    if np.array_equal(lengths, periods):
        try:
            flat = np.fromiter(
                ((-1 if v is None else int(v)) for values in stated for v in values),
                dtype=np.int64,
                count=int(lengths.sum()),
            )
        except OverflowError:
            pass
        else:
            return np.logical_or.reduceat(flat != actual, base[:-1])
    return np.array(
        [
            [(-1 if v is None else int(v)) for v in values]
            != actual[base[k] : base[k + 1]].tolist()
            for k, values in enumerate(stated)
        ],
        dtype=bool,
    )


def _py(v):
    if isinstance(v, np.generic):
        return v.item()
    return v


__all__ = ["verify_commitments", "timing"]
