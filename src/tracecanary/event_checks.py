"""The semantic checks of native trace events, over numpy columns: one implementation
for every reader (ingest's Arrow batches, a JSON document's event objects).

Guarantees of ``check_events``:
- it refuses (``InputError`` subclasses, exit 2) naming the file, the event's index in
  the file and the field, in a fixed order of checks (required fields, signs and the
  resource limits, op names, empty texts, rank, declared group, membership, peer and root,
  timing), each naming the first offending event: the same refusal whatever batching or
  reader produced the columns;
- on success it returns the events' issue times (``ts_ns`` where given, else the rank's
  previous issue plus ``gap_ns``; a rank's first gap counts from its clock's origin) and
  carries what later batches and files need in the ``TraceState``.

Importing this module imports neither pandas nor pyarrow.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tracecanary.clocks.status import SkewStatus, decide_skew
from tracecanary.columns import CodedText, IntColumn
from tracecanary.errors import InputError, ResourceLimitExceeded, SchemaError, TimingError
from tracecanary.formats.trace import (
    INT_FIELDS,
    SPLIT_FIELDS,
    STR_FIELDS,
    TIME_FIELDS,
    split_text,
    split_values,
)
from tracecanary.formats.vocab import DTYPE_BYTES, OP_RE, OPS, P2P_OPS, ROOTED_OPS
from tracecanary.limits import Limits, current_limits

_OP_INDEX = {name: i for i, name in enumerate(OPS)}
# position in OPS -> class; the extra last entry is index -1: not a plain op name
_IS_P2P = np.array([name in P2P_OPS for name in OPS] + [False])
_IS_ROOTED = np.array([name in ROOTED_OPS for name in OPS] + [False])
assert all(OP_RE.fullmatch(name) for name in OPS)

CHECKED_TEXT_FIELDS = ("op", "dtype", "group")  # the text fields the checks read
assert set(CHECKED_TEXT_FIELDS) <= set(STR_FIELDS)
_NON_NEGATIVE_FIELDS = INT_FIELDS  # every integer field of an event is >= 0
_LIMITED_FIELDS = (("bytes", "max_message_bytes"),) + tuple((t, "max_time_ns") for t in TIME_FIELDS)
assert all(name in _NON_NEGATIVE_FIELDS for name, _ in _LIMITED_FIELDS)


@dataclass(frozen=True)
class EventColumns:
    """One batch of events as numpy columns, in file order.

    ``ints[name]`` (every ``INT_FIELDS`` name): int64, 0 where the event lacks the field;
    ``present[name]``: bool per event, or None when every event has the field.
    ``texts[name]`` (at least every ``CHECKED_TEXT_FIELDS`` name; ``from_dicts`` gives
    every ``STR_FIELDS`` name): (codes, labels), integer codes with -1 where the event
    lacks the field, labels the distinct texts (code i is labels[i]); the
    ``SPLIT_FIELDS`` are texts too (``split_text``), present only where a batch has them."""

    n: int
    ints: dict[str, np.ndarray]
    present: dict[str, np.ndarray | None]
    texts: dict[str, tuple[np.ndarray, list[str]]]

    def has(self, name: str) -> np.ndarray:
        """Per event: whether it carries the field ``name``."""
        if name in self.texts:
            return self.texts[name][0] >= 0
        mask = self.present[name]
        return np.ones(self.n, dtype=bool) if mask is None else mask

    def int_column(self, name: str) -> IntColumn:
        """The integer field ``name`` of every event."""
        return IntColumn(self.ints[name], self.present[name])

    def text_column(self, name: str) -> CodedText:
        """The text field ``name`` of every event."""
        codes, labels = self.texts[name]
        return CodedText(codes, tuple(labels))

    def text(self, name: str, row: int) -> str | None:
        """The text field ``name`` of event ``row`` (None when absent)."""
        codes, labels = self.texts[name]
        code = int(codes[row])
        return None if code < 0 else labels[code]

    @classmethod
    def from_dicts(cls, events: list[dict]) -> EventColumns:
        """Columns of event objects already checked field by field (``check_event_dict``:
        known fields, integers in range, texts as str)."""
        n = len(events)
        ints: dict[str, np.ndarray] = {}
        present: dict[str, np.ndarray | None] = {}
        for name in INT_FIELDS:
            values = [event.get(name) for event in events]
            mask = np.fromiter((v is not None for v in values), dtype=bool, count=n)
            if mask.all():
                ints[name], present[name] = np.array(values, dtype=np.int64).reshape(n), None
            else:
                filled = (0 if v is None else v for v in values)
                ints[name] = np.fromiter(filled, dtype=np.int64, count=n)
                present[name] = mask
        texts = {}
        for name in STR_FIELDS:
            index: dict[str, int] = {}
            codes = np.fromiter(
                (
                    -1 if (v := event.get(name)) is None else index.setdefault(v, len(index))
                    for event in events
                ),
                dtype=np.int64,
                count=n,
            )
            texts[name] = (codes, list(index))
        if any(name in event for event in events for name in SPLIT_FIELDS):
            for name in SPLIT_FIELDS:
                index = {}
                codes = np.fromiter(
                    (
                        -1
                        if (v := event.get(name)) is None
                        else index.setdefault(split_text(v), len(index))
                        for event in events
                    ),
                    dtype=np.int64,
                    count=n,
                )
                texts[name] = (codes, list(index))
        return cls(n, ints, present, texts)


class Membership:
    """Which ranks belong to which declared group, as sorted ``group * world + rank``
    codes: memory grows with the declared members, not groups x world size.
    ``membership[g, r]`` (arrays) is True where rank ``r`` is a member of group ``g``."""

    def __init__(self, groups: dict[str, list[int]], world_size: int) -> None:
        self.world_size = world_size
        parts = [
            g * world_size + np.asarray(ranks, dtype=np.int64)
            for g, ranks in enumerate(groups.values())
        ]
        self.codes = np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.int64)

    def __getitem__(self, key: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        group, rank = key
        codes = np.asarray(group, dtype=np.int64) * self.world_size + np.asarray(rank, np.int64)
        pos = np.searchsorted(self.codes, codes)
        found = pos < len(self.codes)
        found[found] = self.codes[pos[found]] == codes[found]
        return found


@dataclass
class TraceState:
    """What the checks carry across batches and files."""

    groups: dict[str, list[int]]
    clocks: dict[int, str]
    world_size: int
    limits: Limits = field(default_factory=current_limits)
    events: int = 0
    ts_present: int = 0
    ts_absent: int = 0
    # first (file, record) lacking ts_ns / gap_ns, for the end-of-trace semantics check
    first_without_ts: tuple[str, int] | None = None
    first_without_gap: tuple[str, int] | None = None
    # per rank: last seq and issue time seen, and whether any event was seen
    last_seq: np.ndarray = field(init=False)
    last_issue: np.ndarray = field(init=False)
    seen: np.ndarray = field(init=False)
    member: Membership = field(init=False)
    declared: dict[str, int] = field(init=False)  # group id -> its index in ``groups``
    clock_names: list[str] = field(init=False)  # rank -> its clock domain

    def __post_init__(self) -> None:
        self.last_seq = np.full(self.world_size, -1, dtype=np.int64)
        self.last_issue = np.zeros(self.world_size, dtype=np.int64)
        self.seen = np.zeros(self.world_size, dtype=bool)
        self.declared = {gid: i for i, gid in enumerate(self.groups)}
        self.member = Membership(self.groups, self.world_size)
        self.clock_names = [self.clocks[r] for r in range(self.world_size)]

    def conclude(self, file: str, declared_skew: dict | None) -> tuple[str, SkewStatus]:
        """(timing semantics, skew status) of the trace once every event is checked
        (``declared_skew``: the header's ``meta.skew``); refuses (InputError) a trace
        without events, and mixed timing as ``timing_semantics`` does."""
        if self.events == 0:  # nothing to compile, replay or verify: say so here
            raise InputError(
                "no collectives found: the trace has no events; capture the part of the run "
                "that communicates",
                file=file,
                field="events",
            )
        timing = self.timing_semantics()
        ranks_seen = np.flatnonzero(self.seen).tolist()
        skew = decide_skew(self.clocks, ranks_seen, self.groups, declared_skew, file=file)
        return timing, skew

    def timing_semantics(self) -> str:
        """The trace's timing semantics once every event is checked: ``timestamps``,
        ``gaps`` or ``mixed_with_gaps``; refuses (TimingError) mixed timing where an
        event lacking ``ts_ns`` also lacks ``gap_ns``."""
        if self.ts_absent == 0:
            return "timestamps"
        if self.ts_present == 0:
            return "gaps"
        if self.first_without_gap is not None:
            path, record = self.first_without_gap
            raise TimingError(
                "mixed timing semantics: some events carry ts_ns and some do not, so every event needs its own gap_ns",
                file=path,
                record=record,
                field="gap_ns",
            )
        return "mixed_with_gaps"


def _first_false(mask: np.ndarray) -> int | None:
    bad = np.flatnonzero(~mask)
    return int(bad[0]) if bad.size else None


def _refuse_at(path: str, first_index: int, row: int, field: str, message: str, cls=SchemaError):
    raise cls(message, file=path, record=first_index + row, field=field)


def _segment_shift(values: np.ndarray, starts: np.ndarray, first: np.ndarray) -> np.ndarray:
    """``values`` shifted by one inside each segment (segments begin at ``starts``), the
    first element of each segment taken from ``first``."""
    out = np.empty_like(values)
    out[1:] = values[:-1]
    out[starts] = first
    return out


def _issue_times(
    path: str,
    first_index: int,
    rank: np.ndarray,
    seq: np.ndarray,
    ts: np.ndarray,
    gap: np.ndarray,
    has_ts: np.ndarray,
    has_gap: np.ndarray,
    state: TraceState,
) -> np.ndarray:
    """Per-rank ``seq`` order and issue times of one batch, vectorized over all ranks.

    Works on the batch sorted by rank (stable, so file order within a rank); segment-wise
    cumulative sums carry each rank's last issue time across batches. Refusals name the
    same event the per-rank scan would: the lowest rank with a fault, and in it the
    first ``seq`` fault, else the first backwards timestamp, else the first
    contradicting gap."""
    n = rank.size
    issue = np.empty(n, dtype=np.int64)
    if n == 0:
        return issue
    order = np.argsort(rank, kind="stable")
    r_sorted = rank[order]
    starts = np.flatnonzero(np.concatenate(([True], r_sorted[1:] != r_sorted[:-1])))
    seg_rank = r_sorted[starts]
    seg_id = np.repeat(np.arange(starts.size), np.diff(np.append(starts, n)))
    pos = np.arange(n) - starts[seg_id]  # position inside the rank's segment
    s, t, g = seq[order], ts[order], gap[order]
    hts, hgap = has_ts[order], has_gap[order]

    prev_seq = _segment_shift(s, starts, state.last_seq[seg_rank])
    seq_bad = s <= prev_seq
    # issue = last timestamp at or before the event + the gaps since; else the rank's
    # previous issue + the gaps since the segment start
    cum_all = np.cumsum(g)
    cum = cum_all - np.repeat(cum_all[starts] - g[starts], np.diff(np.append(starts, n)))
    last_ts = np.maximum.accumulate(np.where(hts, np.arange(n), -1))
    in_seg = last_ts >= starts[seg_id]
    anchor = np.maximum(last_ts, 0)
    base = np.where(in_seg, t[anchor] - cum[anchor], state.last_issue[r_sorted])
    seg_issue = np.where(hts, t, base + cum)
    prev_issue = _segment_shift(seg_issue, starts, state.last_issue[seg_rank])
    has_prev = (pos > 0) | state.seen[r_sorted]
    back_bad = has_prev & hts & (t < prev_issue)
    contra_bad = has_prev & hts & hgap & (g != t - prev_issue)
    bad = seq_bad | back_bad | contra_bad
    if bad.any():
        seg = seg_id[int(np.flatnonzero(bad)[0])]
        lo = starts[seg]
        hi = starts[seg + 1] if seg + 1 < starts.size else n
        r = int(seg_rank[seg])
        faults = ((seq_bad, "seq"), (back_bad, "ts"), (contra_bad, "gap"))
        mask, kind = next((m, name) for m, name in faults if m[lo:hi].any())
        k = lo + int(np.flatnonzero(mask[lo:hi])[0])
        i = int(order[k])
        if kind == "seq":
            _refuse_at(
                path,
                first_index,
                i,
                "seq",
                f"seq {seq[i]} of rank {r} does not increase (previous {prev_seq[k]}); duplicate or out-of-order event",
            )
        if kind == "ts":
            _refuse_at(
                path,
                first_index,
                i,
                "ts_ns",
                f"timestamp goes backwards on rank {r} ({ts[i]} < previous issue {prev_issue[k]})",
                TimingError,
            )
        _refuse_at(
            path,
            first_index,
            i,
            "gap_ns",
            f"gap_ns {g[k]} contradicts ts_ns (difference to the previous event is {t[k] - prev_issue[k]})",
            TimingError,
        )
    issue[order] = seg_issue
    ends = np.append(starts[1:], n) - 1
    state.last_seq[seg_rank] = s[ends]
    state.last_issue[seg_rank] = seg_issue[ends]
    state.seen[seg_rank] = True
    return issue


def _label_lookup(labels: list[str], table) -> np.ndarray:
    """Per label: its value in ``table`` (a dict), -1 where absent; one extra trailing -1
    for code -1 (an absent field)."""
    return np.array([table.get(label, -1) for label in labels] + [-1], dtype=np.int64)


def check_events(path: str, first_index: int, ev: EventColumns, state: TraceState) -> np.ndarray:
    """Check one batch of events (``first_index``: the file index of its first event)
    against the trace's header and the events before it; return their issue times
    (module doc)."""
    n = ev.n

    def require(ok: np.ndarray, field: str, why, cls=SchemaError) -> None:
        """Refuse the first event where ``ok`` is False; ``why(row)`` says what is wrong."""
        row = _first_false(ok)
        if row is not None:
            raise cls(why(row), file=path, record=first_index + row, field=field)

    def text(name: str):
        return lambda row: ev.text(name, row)

    for name in ("rank", "seq", "op", "bytes", "dtype", "group"):
        require(ev.has(name), name, lambda row: "required field missing")
    # one min/max pass per integer column decides both the sign and the limit checks
    # (an absent value is held as 0: neither negative nor over a limit); rows are
    # located only when a check fails
    for name in _NON_NEGATIVE_FIELDS:
        values = ev.ints[name]
        if n and values.min() < 0:
            require(values >= 0, name, lambda row, v=values: f"must be non-negative, got {v[row]}")
    limits = state.limits
    for name, limit_name in _LIMITED_FIELDS:
        values = ev.ints[name]
        limit = getattr(limits, limit_name)
        if n and values.max() > limit:
            row = int(np.flatnonzero(values > limit)[0])
            limits.check(
                limit_name, int(values[row]), file=path, record=first_index + row, field=name
            )
    # a plain op name is found by one lookup per distinct name; only names outside them
    # (custom ops, or unknown ones) are matched against the pattern
    op_codes, op_labels = ev.texts["op"]
    op_index = _label_lookup(op_labels, _OP_INDEX)[op_codes]
    op = text("op")
    if (op_index < 0).any():
        valid = np.array([OP_RE.fullmatch(label) is not None for label in op_labels] + [False])
        require(
            valid[op_codes],
            "op",
            lambda row: f"unknown op {op(row)!r}: use a known op or custom:<name>",
        )
    for name in ("dtype", "group"):
        codes, labels = ev.texts[name]
        empty = np.array([label == "" for label in labels] + [False])
        require(~empty[codes], name, lambda row: "must not be empty")

    rank = ev.ints["rank"]
    seq = ev.ints["seq"]
    world = state.world_size
    require(rank < world, "rank", lambda row: f"rank {rank[row]} outside world_size {world}")
    group_codes, group_labels = ev.texts["group"]
    gindex = _label_lookup(group_labels, state.declared)[group_codes]
    group = text("group")
    require(gindex >= 0, "group", lambda row: f"group {group(row)!r} is not declared")
    member = state.member
    require(
        member[gindex, rank],
        "rank",
        lambda row: f"rank {rank[row]} is not a member of group {group(row)!r}",
    )

    is_p2p = _IS_P2P[op_index]
    is_rooted = _IS_ROOTED[op_index]
    peer_valid = ev.has("peer")
    root_valid = ev.has("root")
    require(~is_p2p | peer_valid, "peer", lambda row: f"{op(row)} needs a peer rank")
    require(is_p2p | ~peer_valid, "peer", lambda row: f"peer is meaningless for {op(row)}")
    require(~is_rooted | root_valid, "root", lambda row: f"{op(row)} needs a root rank")
    require(is_rooted | ~root_valid, "root", lambda row: f"root is meaningless for {op(row)}")
    peer = ev.ints["peer"]
    root = ev.ints["root"]

    def in_group(values: np.ndarray) -> np.ndarray:
        """Per event: whether ``values`` (a peer or a root rank) is a member of its group."""
        return (values < world) & member[gindex, np.minimum(values, world - 1)]

    require(
        ~is_p2p | in_group(peer),
        "peer",
        lambda row: f"peer {peer[row]} is not a member of group {group(row)!r}",
    )
    require(~is_p2p | (peer != rank), "peer", lambda row: "peer equals the rank itself")
    require(
        ~is_rooted | in_group(root),
        "root",
        lambda row: f"root {root[row]} is not a member of group {group(row)!r}",
    )

    # timing
    has_ts = ev.has("ts_ns")
    has_gap = ev.has("gap_ns")
    require(
        has_ts | has_gap, "gap_ns", lambda row: "event has neither ts_ns nor gap_ns", TimingError
    )
    ts = ev.ints["ts_ns"]
    gap = ev.ints["gap_ns"]
    # every value is <= max_time_ns < 2**63; issue times add gaps to the latest issue,
    # so bound their sum before int64 arithmetic could wrap around
    reach = max(int(state.last_issue.max(initial=0)), int(ts.max(initial=0)))
    reach += float(gap.sum(dtype=np.float64))
    if reach > limits.max_time_ns:
        raise ResourceLimitExceeded(
            f"issue times (timestamps plus gaps) reach {reach:.4g} ns, over "
            f"max_time_ns={limits.max_time_ns}",
            file=path,
            record=first_index,
            field="gap_ns",
        )
    state.ts_present += int(has_ts.sum())
    state.ts_absent += int(n - has_ts.sum())
    if state.first_without_ts is None and not has_ts.all():
        state.first_without_ts = (path, first_index + _first_false(has_ts))
    if state.first_without_gap is None and not has_gap.all():
        state.first_without_gap = (path, first_index + _first_false(has_gap))

    if any(name in ev.texts for name in SPLIT_FIELDS):
        _check_splits(ev, op_index, gindex, state, require)
    issue = _issue_times(path, first_index, rank, seq, ts, gap, has_ts, has_gap, state)
    state.events += n
    return issue


_ALL_TO_ALL = OPS.index("all_to_all")


def _check_splits(ev: EventColumns, op_index, gindex, state: TraceState, require) -> None:
    """An all_to_allv's splits, event by event: only on all_to_all, both or neither, one
    per member of the group, the send total (elements x the dtype's size) equal to
    ``bytes``. That a send split equals its peer's receive split is checked where the
    members meet (``matching``)."""
    n = ev.n
    has = {name: ev.has(name) if name in ev.texts else np.zeros(n, bool) for name in SPLIT_FIELDS}
    op = lambda row: ev.text("op", row)  # noqa: E731
    for name in SPLIT_FIELDS:
        require(
            ~has[name] | (op_index == _ALL_TO_ALL),
            name,
            lambda row: f"splits are meaningful only for all_to_all, not {op(row)}",
        )
    for name, other in (SPLIT_FIELDS, SPLIT_FIELDS[::-1]):
        require(
            ~has[other] | has[name],
            name,
            lambda row, name=name, other=other: f"an uneven all_to_all needs {name} beside {other}",
        )
    sizes = np.array([len(ranks) for ranks in state.groups.values()] + [0], dtype=np.int64)
    group_size = sizes[gindex]
    for name in SPLIT_FIELDS:
        if name not in ev.texts:
            continue
        codes, labels = ev.texts[name]
        lists = [split_values(label) for label in labels]
        negative = np.array([any(v < 0 for v in values) for values in lists] + [False])
        require(
            ~negative[codes],
            name,
            lambda row: "must be a list of non-negative integers (elements of dtype per member)",
        )
        length = np.array([len(v) for v in lists] + [0], dtype=np.int64)[codes]
        require(
            ~has[name] | (length == group_size),
            name,
            lambda row, length=length: (
                f"{length[row]} splits for a group of {group_size[row]} ranks "
                f"({ev.text('group', row)!r}): one per member"
            ),
        )
        if name != "send_splits":
            continue
        total = np.array([sum(v) for v in lists] + [0], dtype=object)[codes]
        dtype_codes, dtype_labels = ev.texts["dtype"]
        size = np.array([DTYPE_BYTES.get(d, 0) for d in dtype_labels] + [0], dtype=np.int64)
        element = size[dtype_codes]
        require(
            ~has[name] | (element > 0),
            "dtype",
            lambda row: (
                f"splits count elements: dtype {ev.text('dtype', row)!r} has no known size "
                f"(use one of {', '.join(DTYPE_BYTES)})"
            ),
        )
        wanted = ev.ints["bytes"]
        require(
            ~has[name] | np.asarray(total * element == wanted.astype(object), dtype=bool),
            name,
            lambda row, total=total, element=element, wanted=wanted: (
                f"send splits total {total[row]} elements x {element[row]} bytes = "
                f"{total[row] * element[row]} bytes, but bytes is {wanted[row]}"
            ),
        )
