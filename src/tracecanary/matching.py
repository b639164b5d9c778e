"""Matching per-rank events into collective occurrences (the core of merge and of
every trace -> Program conversion).

Guarantees of ``build_program``:
- a collective instance is the k-th event of each member rank in that group (or the
  event's explicit ``instance``); a send is paired with the recv of the same (src,
  dst, k);
- it refuses (MergeError, exit 2, naming group, instance, ranks and field): two
  contributions of one rank to one instance; conflicting op/bytes/dtype/root across
  members; latency or overlap measured on some members only; a captured rank missing
  an instance its group peers recorded; a send or recv without its partner;
- skew follows the trace's declared status (``skew``: the ingest sidecar's, decided once by
  ``tracecanary.clocks.status``); with a ``clock_map`` (merge) it is known with the
  mapping's uncertainty unless a group was captured on only some of its ranks; no skew
  value is used when it is unknown;
- occurrences are in time order (earliest member arrival, ties by group then instance),
  or with ``order="canonical"`` in ``canonical_order`` (timing-independent; gaps signed);
  the program says "canonical" only where that order differs from the time order.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tracecanary.clocks.status import SkewStatus, decide_skew
from tracecanary.columns import CodedText, IntColumn
from tracecanary.errors import MergeError
from tracecanary.factorize import cumcount, factorize, sorted_distinct
from tracecanary.formats.trace import split_text, split_values
from tracecanary.formats.vocab import DTYPE_BYTES
from tracecanary.program import (
    MEMBER_COLUMNS,
    MEMBER_INDEX_LIMIT,
    OCCURRENCE_ORDERS,
    SPLITS_COLUMN,
    Program,
    make_program,
)

if TYPE_CHECKING:  # a Series is read where one is given: numpy columns need no pandas
    import pandas as pd

    from tracecanary.clocks.calibration import ClockMap  # given only where clocks are mapped

TAIL_OVERLAP_FACTOR = 3.0
_CHUNK = 1 << 20  # member events per step where a whole-trace temporary is avoided


def _refuse(field: str, group: str, instance, ranks, message: str) -> MergeError:
    ranks_txt = ",".join(str(int(r)) for r in ranks)
    return MergeError(
        message, record=f"collective {group}#{instance} ranks {ranks_txt}", field=field
    )


def _instance_keys(
    columns, op: CodedText, rank: np.ndarray
) -> tuple[np.ndarray, list[str], np.ndarray]:
    """(key code per event, key names, key instance per event).

    The key of a collective is its group id; of a send/recv, ``p2p:<src>-><dst>``. Codes
    index ``names`` (one code per distinct name, so a group literally named like a p2p
    key shares its key, as the string keys always did). The instance is the event's
    explicit ``instance`` when every event has one, else its per-(rank, key) count in
    row order. Built on integer codes: no per-event Python string is created."""
    n = len(rank)
    is_p2p = _label_mask(op, ("send", "recv"))
    group = _texts(columns["group"])
    code = np.asarray(group.codes, dtype=np.int64)
    names = list(group.labels)
    if is_p2p.any():
        peer = _ints(columns["peer"]).filled(-1)[is_p2p]
        is_send = _label_mask(op, ("send",))[is_p2p]
        r = rank[is_p2p].astype(np.int64)
        src, dst = np.where(is_send, r, peer), np.where(is_send, peer, r)
        # one int64 key per (src, dst): both lie in [-1, span - 1)
        span = int(max(src.max(), dst.max())) + 2
        pair_codes, pair_keys = factorize((src + 1) * span + (dst + 1))
        pair_names = [f"p2p:{k // span - 1}->{k % span - 1}" for k in pair_keys.tolist()]
        code[is_p2p] = len(names) + pair_codes
        names += pair_names
    # unify equal names (a declared group may be called like a p2p key)
    index: dict[str, int] = {}
    unified = np.array([index.setdefault(name, len(index)) for name in names], dtype=np.int64)
    if len(index) != len(names):
        code = unified[code] if n else code
    names = list(index)
    instance_column = _ints(columns["instance"]) if "instance" in columns else None
    if instance_column is not None and n and _all_present(instance_column):
        instance = instance_column.values
    else:
        instance = cumcount(code * (int(rank.max()) + 1 if n else 1) + rank)
    return code, names, instance


def instance_keys(events) -> tuple[np.ndarray, list[str], np.ndarray]:
    """(key code per event, key names, key instance per event) of a mapping of event
    columns (pandas Series or the numpy forms): see ``_instance_keys``."""
    rank = events["rank"]
    ranks = rank.values if isinstance(rank, IntColumn) else rank.to_numpy()
    return _instance_keys(events, _texts(events["op"]), ranks)


def _all_present(column: IntColumn) -> bool:
    return column.present is None or bool(column.present.all())


def _label_mask(text: CodedText, wanted: tuple[str, ...]) -> np.ndarray:
    """Per row: whether its text is one of ``wanted``."""
    hits = np.flatnonzero(np.isin(np.asarray(text.labels, dtype=object), list(wanted)))
    return np.isin(text.codes, hits)


def _ints(column) -> IntColumn:
    """An integer column (a pandas Series: NaN/NA is absent) as an ``IntColumn``."""
    if isinstance(column, IntColumn):
        return column
    present = column.notna().to_numpy(dtype=bool)
    if present.all():
        return IntColumn(column.to_numpy(dtype=np.int64), None)
    # a Series with gaps holds floats: each present value is an integer
    values = column.to_numpy(dtype=np.float64, na_value=0.0).astype(np.int64)
    return IntColumn(values, present)


def _texts(column) -> CodedText:
    """A text column as a ``CodedText``: a categorical Series' own codes (a byte or two
    per row), another Series' codes in order of first appearance. The codes are only
    compared for equality and looked up, so either numbering serves."""
    if isinstance(column, CodedText):
        return column
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        codes, labels = column.cat.codes.to_numpy(), column.cat.categories
    else:
        codes, labels = pd.factorize(column, sort=False)
    return CodedText(codes, tuple(str(label) for label in labels))


def assign_instances(events: pd.DataFrame) -> pd.DataFrame:
    """Add ``key_group`` and ``key_instance`` identifying each event's occurrence."""
    code, names, instance = instance_keys(events)
    key_group = np.asarray(names, dtype=object)[code] if len(code) else np.zeros(0, object)
    return events.assign(key_group=key_group, key_instance=instance)


@dataclass(frozen=True)
class _Occurrences:
    """Events grouped into occurrences: ``occ_of`` per event (0..G-1 in order of first
    appearance, as ``groupby(sort=False)`` numbers them), events sorted by occurrence
    (``order``, stable: file order inside one) with segment ``bounds``."""

    occ_of: np.ndarray
    order: np.ndarray
    bounds: np.ndarray

    @property
    def count(self) -> int:
        return self.bounds.size - 1

    def rows(self, g: int) -> np.ndarray:
        """Event rows of occurrence ``g`` in file order."""
        return self.order[self.bounds[g] : self.bounds[g + 1]]

    def reduce(
        self, ufunc, values: np.ndarray, where: np.ndarray | None = None, floor=None
    ) -> np.ndarray:
        """Per occurrence: ``ufunc`` reduced over its events' ``values`` (``floor`` in
        place of a value where ``where`` is False). Taken a block of occurrences at a
        time: no permuted copy of a whole per-event column."""
        out = np.empty(self.count, dtype=values.dtype)
        g0 = 0
        while g0 < self.count:
            # occurrences [g0, g1): at least one, then up to _CHUNK events
            last = int(np.searchsorted(self.bounds, self.bounds[g0] + _CHUNK, "right")) - 1
            g1 = max(g0 + 1, last)
            g1 = min(g1, self.count)
            rows = self.order[self.bounds[g0] : self.bounds[g1]]
            chunk = values[rows]
            if where is not None:
                chunk = np.where(where[rows], chunk, floor)
            out[g0:g1] = ufunc.reduceat(chunk, self.bounds[g0:g1] - self.bounds[g0])
            g0 = g1
        return out

    def first_valid(self, valid: np.ndarray) -> np.ndarray:
        """Per occurrence: the first row (file order) where ``valid``, else -1."""
        if valid.all():  # every event's: the first row of each occurrence
            return self.order[self.bounds[:-1]].astype(np.int64)
        pos = np.flatnonzero(valid[self.order])
        at = np.searchsorted(pos, self.bounds[:-1])
        ok = at < pos.size
        ok[ok] = pos[at[ok]] < self.bounds[1:][ok]
        out = np.full(self.count, -1, dtype=np.int64)
        out[ok] = self.order[pos[at[ok]]]
        return out


def _group_occurrences(code: np.ndarray, instance: np.ndarray) -> _Occurrences:
    """Occurrences numbered in order of first appearance of their (key, instance), as
    ``groupby(sort=False).ngroup()`` numbers them: one int64 key per event (when the
    instances' span allows) factorized, not a grouped DataFrame."""
    n = code.size
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return _Occurrences(empty, empty, np.zeros(1, dtype=np.int64))
    lo, hi = int(instance.min()), int(instance.max())
    span = hi - lo + 1
    if span * (int(code.max()) + 1) < 1 << 62:
        key = code * span + (instance - lo)
        occ_of, _ = factorize(key)
        del key
    else:  # explicit instances too far apart for one int64 key
        import pandas as pd

        occ_of = (
            pd.DataFrame({"k": code, "i": instance})
            .groupby(["k", "i"], sort=False)
            .ngroup()
            .to_numpy(dtype=np.int64)
        )
    # held per event through matching: as int32 (indices below the event count)
    small = np.int32 if n <= np.iinfo(np.int32).max else np.int64
    occ_of = occ_of.astype(small, copy=False)
    order = np.argsort(occ_of, kind="stable").astype(small)
    count = int(occ_of.max()) + 1
    bounds = np.searchsorted(occ_of[order], np.arange(count + 1))
    return _Occurrences(occ_of, order, bounds)


def build_program(
    events: pd.DataFrame,
    *,
    groups: dict[str, list[int]],
    world_size: int,
    clocks: dict[int, str],
    clock_map: ClockMap | None = None,
    skew: SkewStatus | None = None,
    notes: tuple[str, ...] = (),
    order: str = "time",
) -> Program:
    """Occurrence-level program of a normalized trace (rows in per-rank issue order).

    Vectorized over integer codes (memory and time grow with the events, not with
    Python objects per event); refusals name the same collective, field and ranks as a
    per-collective scan in order of first appearance would. ``events`` is not modified
    (see ``build_program_from_columns``)."""
    ev = events.reset_index(drop=True)
    return build_program_from_columns(
        {name: ev[name] for name in ev.columns},
        groups=groups,
        world_size=world_size,
        clocks=clocks,
        clock_map=clock_map,
        skew=skew,
        notes=notes,
        order=order,
    )


def build_program_from_columns(
    columns: MutableMapping[str, pd.Series | IntColumn | CodedText],
    *,
    groups: dict[str, list[int]],
    world_size: int,
    clocks: dict[int, str],
    clock_map: ClockMap | None = None,
    skew: SkewStatus | None = None,
    notes: tuple[str, ...] = (),
    frames: bool = True,
    order: str = "time",
) -> Program:
    """``build_program`` of the normalized columns in ``columns`` (name -> column of one
    length: a Series with a default index, string columns possibly categorical, or a
    numpy form, ``IntColumn`` / ``CodedText``; a dict, or a mapping that reads each
    column when first asked for it), which it takes over: each column is
    asked for only where needed, in the order matching needs them, and removed once
    read, and every per-event array is dropped once its per-occurrence result is taken,
    so a caller holding no other reference to the columns has its events' memory
    released while the occurrences are built. The peak is a few arrays per event (int32
    where the values are indices or counts below the event count) on top of the columns
    in use, not a table of Python objects. The same program and refusals as
    ``build_program``; ``frames``: its tables as DataFrames, else as column arrays
    (``make_program(..., columns=True)``: no pandas needed). ``order``: "time" (by
    earliest member arrival, ties by group then instance) or "canonical"
    (``canonical_order``; gaps are then signed)."""
    if order not in OCCURRENCE_ORDERS:
        raise ValueError(f"order must be one of {OCCURRENCE_ORDERS}, not {order!r}")
    op = _texts(columns.pop("op"))
    rank = _member_ranks(columns.pop("rank"))
    code, names, instance = _instance_keys(columns, op, rank)
    for name in ("group", "peer", "instance"):
        if name in columns:  # dropped unread where not read yet (a lazily read mapping)
            del columns[name]
    occs = _group_occurrences(code, instance)
    G = occs.count
    first_row = occs.order[occs.bounds[:-1]] if G else np.zeros(0, dtype=np.int64)
    # every event of an occurrence has its key and instance: keep them per occurrence only
    code_first = code[first_row] if G else np.zeros(0, dtype=np.int64)
    inst_first = instance[first_row] if G else np.zeros(0, dtype=np.int64)
    del code, instance
    seen = set(sorted_distinct(rank).tolist())
    names_arr = np.asarray(names, dtype=object)

    # duplicate contributions: the first row (file order) of any duplicated (occ, rank)
    width = int(rank.max()) + 1 if rank.size else 1
    pair = occs.occ_of.astype(np.int64)  # occ * width + rank, in place: one int64 array
    pair *= width
    pair += rank
    sorted_pair = np.sort(pair)
    repeated = sorted_pair[1:][sorted_pair[1:] == sorted_pair[:-1]]
    del sorted_pair
    if repeated.size:
        row = int(np.flatnonzero(np.isin(pair, repeated))[0])
        g = int(occs.occ_of[row])
        raise _refuse(
            "rank",
            str(names_arr[code_first[g]]),
            int(inst_first[g]),
            [rank[row]],
            "two contributions of the same rank to one collective",
        )
    del pair, repeated

    # conflicting metadata (op kind, bytes, dtype, root), first field then first collective
    op_codes = op.codes
    op_names = np.asarray(op.labels, dtype=object)
    is_p2p_ev = _label_mask(op, ("send", "recv"))
    is_send = _label_mask(op, ("send",))
    del op
    root = columns.pop("root", None)  # absent: no root anywhere (-1)
    root_f = None if root is None else _ints(root).filled(-1)
    del root
    kind_codes = np.where(is_p2p_ev, -2, op_codes)
    dtype = _texts(columns.pop("dtype"))
    dtype_codes = dtype.codes
    dtype_names = np.asarray(list(dtype.labels) + [np.nan], dtype=object)  # code -1: missing
    del dtype
    bytes_v = _ints(columns.pop("bytes")).values
    send_col, recv_col = columns.pop("send_splits", None), columns.pop("recv_splits", None)
    split_rows = None  # per event: whether it carries splits (None: no split column)
    if send_col is not None:
        send_splits, recv_splits = _texts(send_col), _texts(recv_col)
        split_rows = send_splits.codes >= 0
    del send_col, recv_col
    uneven = np.zeros(G, dtype=bool)  # per occurrence: a member carries splits
    if split_rows is not None and G:
        uneven = np.bincount(occs.occ_of[split_rows], minlength=G) > 0
    # an all_to_allv's members differ in bytes: theirs are checked by their splits
    bytes_checked = bytes_v if not uneven.any() else np.where(uneven[occs.occ_of], 0, bytes_v)
    for field, values, shown, labels in (  # a value shown is labels[shown] (or shown)
        ("op", kind_codes, op_codes, op_names),
        ("bytes", bytes_checked, bytes_v, None),
        ("dtype", dtype_codes, dtype_codes, dtype_names),
        ("root", root_f, root_f, None),
    ):
        if not G:
            break
        if values is None:
            continue
        bad = np.flatnonzero(occs.reduce(np.minimum, values) != occs.reduce(np.maximum, values))
        if bad.size:
            g, k = _occurrence_key(names_arr, code_first, inst_first, int(bad[0]))
            idx = occs.rows(int(bad[0]))
            got = shown[idx] if labels is None else labels[shown[idx]]
            text = ", ".join(
                f"rank {r}: {v}" for r, v in zip(rank[idx].tolist(), list(got), strict=True)
            )
            message = f"conflicting {field} across members ({text})"[:300]
            if field == "bytes" and op_names[op_codes[idx[0]]] == "all_to_all":
                message += UNEVEN_ALL_TO_ALL_HINT
            raise _refuse(field, g, k, rank[idx], message)
    del values, shown, labels, kind_codes, bytes_checked
    # per occurrence from here on: the first member's values (all members agree)
    op_first = op_names[op_codes[first_row]]
    bytes_first = bytes_v[first_row]
    dtype_first = dtype_names[dtype_codes[first_row]]
    root_first = np.full(G, -1, dtype=np.int64) if root_f is None else root_f[first_row]
    splits_first = None
    if split_rows is not None:
        splits_first = np.full(G, "", dtype=object)
        for g_occ in np.flatnonzero(uneven).tolist():
            idx = occs.rows(g_occ)
            bytes_first[g_occ] = int(bytes_v[idx].max())  # the largest member's buffer
            key, k = _occurrence_key(names_arr, code_first, inst_first, g_occ)
            splits_first[g_occ] = _split_matrix(
                key,
                k,
                groups[key],
                rank[idx],
                send_splits,
                recv_splits,
                idx,
                bytes_v,
                dtype_names[dtype_codes[idx]],
            )
        del send_splits, recv_splits
    del op_codes, bytes_v, dtype_codes, root_f, split_rows, uneven
    size = np.diff(occs.bounds)
    # p2p pairing: each pair must have exactly one send and one recv
    if is_p2p_ev.any():
        sends = np.bincount(occs.occ_of[is_send], minlength=G)
        p2p_rows = np.bincount(occs.occ_of[is_p2p_ev], minlength=G)
        recvs = p2p_rows - sends
        bad = np.flatnonzero((p2p_rows > 0) & ~((sends == 1) & (recvs == 1)))
        if bad.size:
            g, k = _occurrence_key(names_arr, code_first, inst_first, int(bad[0]))
            idx = occs.rows(int(bad[0]))
            idx = idx[is_p2p_ev[idx]]
            found = ["recv"] * int(recvs[bad[0]]) + ["send"] * int(sends[bad[0]])
            raise _refuse(
                "peer", g, k, rank[idx], f"send/recv do not pair (found {', '.join(found)})"
            )
    del is_p2p_ev, is_send
    # membership: every captured rank of the group must contribute
    expected = {}
    partially_captured = []
    for gid, ranks in groups.items():
        captured = [r for r in ranks if r in seen]
        expected[gid] = len(captured)
        if len(captured) < len(ranks):
            partially_captured.append(gid)
    key_names = names_arr[code_first] if G else names_arr[:0]
    want_by_code = np.array(
        [2 if k.startswith("p2p:") else expected.get(k, 0) for k in names], dtype=np.int64
    )
    want = want_by_code[code_first] if G else np.zeros(0, dtype=np.int64)
    short = np.flatnonzero(size < want)
    if short.size:
        g, k = _occurrence_key(names_arr, code_first, inst_first, int(short[0]))
        members = rank[occs.rows(int(short[0]))].tolist()
        missing = [r for r in groups[g] if r in seen and r not in members]
        raise _refuse(
            "rank",
            g,
            k,
            members,
            f"rank(s) {','.join(map(str, missing))} of group {g} did not record this collective",
        )
    # measured fields: all members or none; the max over members where measured
    measured_top = {}
    for field in ("latency_ns", "overlap_ns"):
        column = _ints(columns.pop(field))
        values, floor = column.values, np.iinfo(np.int64).min
        present = np.ones(len(values), dtype=bool) if column.present is None else column.present
        del column
        count = np.bincount(occs.occ_of[present], minlength=G) if G else np.zeros(0, np.int64)
        bad = np.flatnonzero((count > 0) & (count < size))
        if bad.size:
            g, k = _occurrence_key(names_arr, code_first, inst_first, int(bad[0]))
            idx = occs.rows(int(bad[0]))
            which = rank[idx][~present[idx]].tolist()
            raise _refuse(
                field,
                g,
                k,
                rank[idx],
                f"{field} partially measured (absent on rank(s) {','.join(map(str, which))})",
            )
        top = occs.reduce(np.maximum, values, present, floor) if G else np.zeros(0, values.dtype)
        # each member's own value is kept only where some member's differs from the max
        own = None
        if G and (present & (values != top[occs.occ_of])).any():
            own = np.where(present, values, 0).astype(np.int64)
        del present
        measured_top[field] = (top, count, own)
        del values
    phase_first = _first_text(occs, columns.pop("phase", None))
    stream_first = _first_text(occs, columns.pop("stream", None))

    # clocks -> arrival on one timeline
    issue = _ints(columns.pop("issue_ns")).values
    arrival_col = columns.pop("arrival_ns", None)
    local = issue if arrival_col is None else _ints(arrival_col).filled(issue)
    del issue, arrival_col
    if clock_map is not None:
        from tracecanary.clocks.calibration import mapped_skew_uncertainty_ns

        mapped = SkewStatus(
            True, uncertainty_ns=mapped_skew_uncertainty_ns(clock_map, sorted(seen))
        )
        one_clock = {r: "reference" for r in seen}
        status = decide_skew(one_clock, sorted(seen), groups, mapped.to_json())
        arrival = clock_map.to_reference(rank, local)
    else:
        status = skew if skew is not None else decide_skew(clocks, sorted(seen), groups)
        arrival = local
    skew_known, skew_reason = status.known, status.reason
    if not skew_known and clock_map is None:
        # arrivals stay on their own clocks: only differences inside one clock are used
        clock_index: dict[str, int] = {}
        clock_of_rank = np.array(
            [clock_index.setdefault(clocks[r], len(clock_index)) for r in range(width)],
            dtype=np.int64,
        )
        clock_codes = clock_of_rank[rank]
        origin = np.full(
            int(clock_codes.max()) + 1 if clock_codes.size else 0, np.iinfo(np.int64).max
        )
        np.minimum.at(origin, clock_codes, local)
        arrival = local - origin[clock_codes]
        del clock_codes
    del local
    arrival = np.asarray(arrival, dtype=np.int64)

    # one row per occurrence (first appearance order), then sorted by (T, key, instance)
    T_g = occs.reduce(np.minimum, arrival) if G else np.zeros(0, dtype=np.int64)
    is_p2p_g = np.array([k.startswith("p2p:") for k in names], dtype=bool)[code_first]
    declared = {gid: len(ranks) for gid, ranks in groups.items()}
    declared_by_code = np.array([declared.get(k, 0) for k in names], dtype=np.int64)
    group_size_g = np.where(is_p2p_g, 2, declared_by_code[code_first]).astype(np.int64)
    name_rank = np.empty(len(names), dtype=np.int64)
    name_rank[np.argsort(np.asarray(names, dtype=object), kind="stable")] = np.arange(len(names))
    perm = np.lexsort((inst_first, name_rank[code_first], T_g))
    if order == "canonical":
        canonical = canonical_order(occs.occ_of, rank, name_rank[code_first], inst_first)
        # declared canonical only where it differs: a program in both orders (one group,
        # or groups in lockstep) stays a time-order program, byte for byte
        if np.array_equal(canonical, perm):
            order = "time"
        perm = canonical
    # numbered in the members' occ dtype (make_program refuses a count past its limit)
    new_index = np.empty(G, dtype=MEMBER_COLUMNS["occ"] if G <= MEMBER_INDEX_LIMIT else np.int64)
    new_index[perm] = np.arange(G, dtype=np.int64)

    measured = {}  # field -> (max over members, 0 where unmeasured; measured?) in issue order
    for field in ("overlap_ns", "latency_ns"):
        top, count, own = measured_top[field]
        has = count > 0
        measured[field] = (np.where(has, top, 0).astype(np.int64)[perm], has[perm])
        measured_top[field] = own
        del top, count, has, own

    T = T_g[perm]
    del T_g
    gap = np.diff(T, prepend=T[:1]) if len(T) else T
    overlap, has_overlap = measured.pop("overlap_ns")
    latency, has_latency = measured.pop("latency_ns")
    tail = _tail_windows(overlap, has_overlap)
    op_first[is_p2p_g] = "send"  # shared str objects, not one new str per occurrence
    # each per-occurrence column put in issue order, its first-appearance copy dropped
    unordered = {
        "op": op_first,
        "bytes": bytes_first,
        "dtype": dtype_first,
        "group": key_names,
        "group_size": group_size_g,
        "root": root_first,
        "phase": phase_first,
        "stream": stream_first,
    }
    if splits_first is not None:
        unordered[SPLITS_COLUMN] = splits_first
    del op_first, bytes_first, dtype_first, key_names, group_size_g, root_first, splits_first
    del phase_first, stream_first, code_first, inst_first, is_p2p_g, size, want, first_row
    occurrence_columns = {name: unordered.pop(name)[perm] for name in list(unordered)}
    occurrence_columns.update(
        gap_ns=gap,
        overlap_ns=overlap,
        has_overlap=has_overlap,
        latency_ns=latency,
        has_latency=has_latency,
        tail=tail,
    )
    del perm, gap, overlap, has_overlap, latency, has_latency, tail

    # members sorted by (occurrence, rank); skew = arrival - the occurrence's issue time
    member_occ = new_index[occs.occ_of]
    del occs, new_index
    mem_order = np.lexsort((rank, member_occ))
    member_occ = member_occ[mem_order]
    rank = rank[mem_order]
    member_values = {  # members' own latency / overlap, where they differ from the max
        field: own[mem_order] for field, own in measured_top.items() if own is not None
    }
    del measured_top
    if skew_known:
        skew_ns = arrival[mem_order]  # arrival may be the caller's column: not in place
        del arrival, mem_order
        for lo in range(0, skew_ns.size, _CHUNK):  # no whole-trace temporary
            hi = lo + _CHUNK
            skew_ns[lo:hi] -= T[member_occ[lo:hi]]
    else:
        del arrival
        skew_ns = np.zeros(len(mem_order), dtype=np.int64)
        del mem_order
    del T
    return make_program(
        occurrence_columns,
        {"occ": member_occ, "rank": rank, "skew_ns": skew_ns, **member_values},
        world_size=world_size,
        skew_known=skew_known,
        skew_reason=skew_reason,
        notes=notes,
        skew_uncertainty_ns=status.uncertainty_ns or 0,
        take_columns=True,  # every array above is this call's own: no copy
        columns=not frames,
        occurrence_order=order,
    )


def canonical_order(
    occ_of: np.ndarray, rank: np.ndarray, group_rank: np.ndarray, instance: np.ndarray
) -> np.ndarray:
    """The canonical order of occurrences: occurrence indices (``occ_of``'s numbering) in
    the order Kahn's algorithm emits them over the happens-before graph whose edges are
    each rank's issue order (``occ_of`` / ``rank`` per event, events in per-rank issue
    order; a matched send/recv is one occurrence, so send -> recv is inside it), taking
    among the ready occurrences the smallest (step, group, instance): ``step`` the
    largest position any member holds in its own rank's issue order, ``group`` the
    group name's sorted position (``group_rank``), ``instance`` the per-group instance.

    Guarantees: it depends on the events' order per rank and their keys only, never on
    timestamps, so two runs whose concurrent groups interleave differently in time give
    the same order; it is a linear extension of every rank's issue order wherever those
    orders are acyclic together. Where they are not (asynchronous sends and receives
    issued in crossing orders on two ranks) Kahn's algorithm stalls; it then takes the
    smallest occurrence that heads some rank's remaining order, so each rank's order is
    broken only inside such a cycle. Each group's occurrences keep their instance order
    (instances are numbered in every member's issue order). Where the (step, group,
    instance) sort is itself a linear extension (the common case: ranks that issue in
    lockstep) that sort is the result, with no Python step per occurrence."""
    G = int(group_rank.size)
    if G == 0:
        return np.zeros(0, dtype=np.int64)
    occ_of = occ_of.astype(np.int64, copy=False)
    pos = cumcount(rank.astype(np.int64, copy=False)).astype(np.int64)
    step = np.zeros(G, dtype=np.int64)
    np.maximum.at(step, occ_of, pos)
    by_key = np.lexsort((instance, group_rank, step))
    key_pos = np.empty(G, dtype=np.int64)
    key_pos[by_key] = np.arange(G, dtype=np.int64)
    # each rank's events in issue order: the sort is an extension iff every chain rises
    chain = np.lexsort((np.arange(rank.size), rank))
    chain_occ = occ_of[chain]
    same_rank = rank[chain][1:] == rank[chain][:-1]
    if not (same_rank & (key_pos[chain_occ[1:]] <= key_pos[chain_occ[:-1]])).any():
        return by_key
    return _kahn(chain_occ, same_rank, key_pos, G)


def _kahn(chain_occ: np.ndarray, same_rank: np.ndarray, key_pos: np.ndarray, G: int):
    """Kahn's algorithm over the rank chains (``chain_occ``: occurrence of each event,
    ranks one after another in issue order; ``same_rank[i]``: event i + 1 follows event i
    on its rank), smallest ``key_pos`` first; a stall takes the smallest chain head."""
    import heapq

    n = chain_occ.size
    nxt = np.full(n, -1, dtype=np.int64)
    nxt[:-1][same_rank] = np.arange(1, n)[same_rank]
    indeg = np.bincount(chain_occ[1:][same_rank], minlength=G)
    starts = np.flatnonzero(np.r_[True, ~same_rank])  # each rank's first event
    ends = np.r_[starts[1:], n]
    order_e = np.argsort(chain_occ, kind="stable")  # events of each occurrence
    bounds = np.searchsorted(chain_occ[order_e], np.arange(G + 1))
    rank_of_event = np.repeat(np.arange(starts.size), ends - starts)
    head = starts.copy()
    key_l, occ_l, nxt_l = key_pos.tolist(), chain_occ.tolist(), nxt.tolist()
    emitted = [False] * G
    ready = [(key_l[g], g) for g in np.flatnonzero(indeg == 0).tolist()]
    heapq.heapify(ready)
    indeg_l = indeg.tolist()
    out = []
    while len(out) < G:
        if ready:
            g = heapq.heappop(ready)[1]
            if emitted[g]:
                continue
        else:  # a cycle: the smallest occurrence heading a rank's remaining order
            g = min(
                (occ_l[h] for h, e in zip(head.tolist(), ends.tolist(), strict=True) if h < e),
                key=key_l.__getitem__,
            )
        emitted[g] = True
        out.append(g)
        for e in order_e[bounds[g] : bounds[g + 1]].tolist():
            s = nxt_l[e]
            if s >= 0:
                h = occ_l[s]
                indeg_l[h] -= 1
                if indeg_l[h] == 0 and not emitted[h]:
                    heapq.heappush(ready, (key_l[h], h))
            r = int(rank_of_event[e])
            while head[r] < ends[r] and emitted[occ_l[head[r]]]:
                head[r] += 1
    return np.asarray(out, dtype=np.int64)


UNEVEN_ALL_TO_ALL_HINT = (
    ": an uneven all_to_all (all_to_allv) needs send_splits and recv_splits on every member"
    " (tracecanary capture -- CMD and tracecanary.record record all_to_all_single's "
    "input_split_sizes/output_split_sizes and list-form all_to_all; a Kineto trace carries "
    "them where the profiler ran with record_shapes=True)"
)


def _split_matrix(
    group: str,
    instance,
    ranks: list[int],
    members,
    send: CodedText,
    recv: CodedText,
    rows,
    nbytes: np.ndarray,
    dtypes: np.ndarray,
) -> str:
    """The send matrix (``program.SPLITS_COLUMN``, members in ascending rank order) of one
    all_to_allv occurrence (members: global ``members``, event ``rows``, their ``dtypes``);
    a member without splits sends and receives equal parts of its ``bytes`` (what an
    all_to_all without splits is). Refuses (MergeError naming the field) a member without
    splits whose bytes do not divide into equal parts, and a send split that differs from
    its peer's receive split."""
    position = {r: i for i, r in enumerate(ranks)}
    by_member = sorted(
        zip(members.tolist(), rows.tolist(), dtypes.tolist(), strict=True),
        key=lambda m: position[m[0]],
    )
    n = len(ranks)  # the group's size: what each split list is as long as
    sends, recvs = [], []
    for member, row, dtype in by_member:
        if send.codes[row] >= 0:
            sends.append(split_values(send.labels[send.codes[row]]))
            recvs.append(split_values(recv.labels[recv.codes[row]]))
            continue
        element = DTYPE_BYTES.get(str(dtype), 0)
        if not element or int(nbytes[row]) % (element * n):
            raise _refuse(
                "send_splits",
                group,
                instance,
                members,
                f"rank {member} records no splits, but its {int(nbytes[row])} bytes are not "
                f"{n} equal parts of {dtype} elements (an all_to_all without splits sends "
                "equal parts): record send_splits and recv_splits on every member"
                + UNEVEN_ALL_TO_ALL_HINT[UNEVEN_ALL_TO_ALL_HINT.index(" (") :],
            )
        part = int(nbytes[row]) // (element * n)
        sends.append([part] * n)
        recvs.append([part] * n)
    # the splits index the group's members; the occurrence's members may be fewer (a
    # group captured on some of its ranks): the pairs among them are checked and kept
    columns = [position[m] for m, _, _ in by_member]
    send_matrix = np.array(sends, dtype=object)[:, columns]  # exact integers, at once
    recv_matrix = np.array(recvs, dtype=object)[:, columns]
    differ = np.argwhere(np.asarray(send_matrix != recv_matrix.T, dtype=bool))
    if len(differ):
        i, j = (int(k) for k in differ[0])
        src, dst = by_member[i][0], by_member[j][0]
        raise _refuse(
            "recv_splits",
            group,
            instance,
            members,
            f"rank {src} sends {send_matrix[i, j]} elements to rank {dst}, but rank {dst} "
            f"receives {recv_matrix[j, i]} from rank {src} (send_splits of one rank must "
            "equal its peer's recv_splits; no splits: equal parts)",
        )
    sends = send_matrix.tolist()
    ascending = sorted(range(len(by_member)), key=lambda i: by_member[i][0])
    return ";".join(split_text([sends[i][j] for j in ascending]) for i in ascending)


def _member_ranks(column: pd.Series | IntColumn) -> np.ndarray:
    """The rank column as the members' rank dtype (int32: the caller's array when it is
    one already); refuses (MergeError naming ``rank``) a rank that does not fit."""
    ranks = column.values if isinstance(column, IntColumn) else column.to_numpy()
    if ranks.dtype == MEMBER_COLUMNS["rank"]:
        return ranks
    lo, hi = (int(ranks.min()), int(ranks.max())) if ranks.size else (0, 0)
    if hi > MEMBER_INDEX_LIMIT or lo < -MEMBER_INDEX_LIMIT - 1:
        row = int(np.argmax(ranks) if hi > MEMBER_INDEX_LIMIT else np.argmin(ranks))
        raise MergeError(
            f"rank {int(ranks[row])} does not fit a program (below {MEMBER_INDEX_LIMIT + 1})",
            record=f"event {row}",
            field="rank",
        )
    return ranks.astype(MEMBER_COLUMNS["rank"])


def _occurrence_key(
    names: np.ndarray, code_first: np.ndarray, inst_first: np.ndarray, g: int
) -> tuple[str, int]:
    """(key name, instance) of occurrence ``g`` (those of its first event)."""
    return str(names[code_first[g]]), int(inst_first[g])


def _first_text(occs: _Occurrences, values: pd.Series | CodedText | None) -> np.ndarray:
    """Per occurrence: its first non-missing value of ``values`` (as groupby ``first``
    skips NA), or "" (everywhere when the column is absent). Taken through the
    column's codes: the result shares one ``str`` object per distinct value instead of
    creating one per occurrence."""
    out = np.full(occs.count, "", dtype=object)
    if values is not None:
        text = _texts(values)
        codes = text.codes
        first = occs.first_valid(codes >= 0)
        found = first >= 0
        labels = np.asarray(text.labels, dtype=object)
        out[found] = labels[codes[first[found]]]
    return out


def _tail_windows(overlap: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """Rare high-overlap windows: measured overlap above TAIL_OVERLAP_FACTOR x the
    median of the positive measured overlaps."""
    values = overlap[measured & (overlap > 0)]
    if values.size == 0:
        return np.zeros(overlap.shape, dtype=bool)
    threshold = TAIL_OVERLAP_FACTOR * float(np.median(values))
    return measured & (overlap > threshold)
