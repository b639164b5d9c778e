"""Happens-before constraints between clock domains, from matched collectives and send/recv.

A collective cannot complete on one member before every member whose data it needs has
started it; a recv cannot complete before its send started. With ``ref = local + offset``
per clock domain, each such pair (later event ``i`` on clock ``a`` ends at local ``e_i``,
earlier event ``j`` on clock ``b`` starts at local ``s_j``) bounds two offsets:

    offset[b] - offset[a] <= e_i - s_j

Which pairs hold, per op (``CAUSAL_ROLES``): every member's end after every member's
start (all_reduce, all_gather, reduce_scatter, all_to_all, barrier); each non-root's end
after the root's start (broadcast); the root's end after each member's start (reduce);
the recv's end after the send's start. ``custom:`` ops have no known data dependence and
give nothing. An event's start is its issue time (``issue_ns``, never later than the true
start, so the bound stays sound); its end is its arrival plus ``latency_ns`` (the trace
format's "time from arrival to completion"; arrival is ``arrival_ns``, else the issue time,
as matching reads it): an event without a measured latency has no end and gives nothing
(counted, said in the notes). A trace whose ``latency_ns`` starts later than its arrival
(e.g. a Kineto gloo import, where it is the gloo work's own duration) understates its ends;
the constraints then tighten past the truth and are usually refused as infeasible.

Guarantees of ``collect_constraints``: per ordered pair of domains it keeps the tightest
bound and the two event rows that give it (``ConstraintSet``); ``count`` holds how many
event pairs stood behind each bound; with ``bins > 0`` it also keeps, per pair and time
bin, the tightest constraint with its two local times (the drift model's input; bins
split each earlier clock's own span). Memory is
bounded: occurrences are paired in chunks, never all member pairs at once. Occurrences are
the matching module's (the same instance keys merge and every loader use).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracecanary.errors import MergeError
from tracecanary.matching import _group_occurrences, instance_keys

SYMMETRIC_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "barrier")
ROOT_STARTS_OPS = ("broadcast",)  # each non-root's end after the root's start
ROOT_ENDS_OPS = ("reduce",)  # the root's end after every member's start
CAUSAL_ROLES = {
    **{op: "every member's end after every member's start" for op in SYMMETRIC_OPS},
    **{op: "each non-root's end after the root's start" for op in ROOT_STARTS_OPS},
    **{op: "the root's end after each member's start" for op in ROOT_ENDS_OPS},
    "send/recv": "the recv's end after the send's start",
}
PAIRS_PER_CHUNK = 1 << 22
NO_BOUND = np.iinfo(np.int64).max


@dataclass(frozen=True)
class ConstraintSet:
    """Tightest difference constraints per ordered domain pair.

    ``bound_ns[a, b]``: offset[b] - offset[a] <= bound (``NO_BOUND`` where no constraint);
    ``later_row`` / ``earlier_row``: the event rows (into the frame given) whose end /
    start give that bound; ``count[a, b]``: event pairs behind it. ``binned``: for the
    drift model, arrays ``a, b, end_ns, start_ns`` of the tightest constraint per (pair,
    time bin (and its two event rows), or None."""

    domains: list[str]
    bound_ns: np.ndarray
    later_row: np.ndarray
    earlier_row: np.ndarray
    count: np.ndarray
    events: int
    events_without_end: int
    events_custom: int
    occurrences_used: int
    span_ns: tuple[int, int]
    domain_span_ns: np.ndarray  # per domain: [first start, last end] in its local time
    binned: dict[str, np.ndarray] | None = None


def _extreme_per_key(
    key: np.ndarray, value: np.ndarray, rows: np.ndarray, *, largest: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per distinct key (ascending): (key, extreme value, its row, count); ties go to the
    first row in input order. Hash-grouped, then ``ufunc.at``: no sort of the values."""
    codes, uniques = pd.factorize(key, sort=False)
    order = np.argsort(uniques, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    codes = rank[codes]
    k = uniques.size
    info = np.iinfo(np.int64)
    ext = np.full(k, info.min if largest else info.max, dtype=np.int64)
    (np.maximum if largest else np.minimum).at(ext, codes, value)
    hit = np.flatnonzero(value == ext[codes])
    first = np.full(k, info.max, dtype=np.int64)
    np.minimum.at(first, codes[hit], hit)
    counts = np.bincount(codes, minlength=k)
    return np.asarray(uniques)[order], ext, rows[first], counts


def collect_constraints(
    frame: pd.DataFrame, domain_of_rank: dict[int, str], *, bins: int = 0
) -> ConstraintSet:
    """Constraints of the matched events in ``frame`` (normalized columns: rank, op,
    group, root, peer, instance (optional), issue_ns, latency_ns)."""
    ev = frame.reset_index(drop=True)
    n = len(ev)
    rank = ev["rank"].to_numpy(dtype=np.int64)
    domains = sorted({domain_of_rank[int(r)] for r in np.unique(rank)})
    index = {d: i for i, d in enumerate(domains)}
    D = len(domains)
    width = int(rank.max()) + 1 if n else 1
    dom_of_rank = np.zeros(width, dtype=np.int64)
    for r in np.unique(rank):
        dom_of_rank[r] = index[domain_of_rank[int(r)]]
    dom = dom_of_rank[rank]
    start = ev["issue_ns"].to_numpy(dtype=np.int64)
    latency = ev["latency_ns"].to_numpy(dtype=np.float64, na_value=np.nan)
    has_end = ~np.isnan(latency)
    arrival = (
        ev["arrival_ns"].to_numpy(dtype=np.float64, na_value=np.nan)
        if "arrival_ns" in ev
        else np.full(n, np.nan)
    )
    # latency_ns runs from arrival (the trace format's definition; arrival defaults to
    # the issue time, as matching reads it)
    entered = np.where(np.isnan(arrival), start, arrival).astype(np.int64)
    end = entered + np.where(has_end, latency, 0).astype(np.int64)

    op_code, op_names = pd.factorize(ev["op"], sort=False)
    op_names = [str(o) for o in op_names]

    def is_op(names) -> np.ndarray:
        return np.isin(op_code, [i for i, o in enumerate(op_names) if o in names])

    root = ev["root"].to_numpy(dtype=np.float64, na_value=np.nan)
    is_root = root == rank
    sym = is_op(SYMMETRIC_OPS)
    root_starts = is_op(ROOT_STARTS_OPS)
    root_ends = is_op(ROOT_ENDS_OPS)
    recv, send = is_op(("recv",)), is_op(("send",))
    ender = has_end & (sym | (root_starts & ~is_root) | (root_ends & is_root) | recv)
    starter = sym | (root_starts & is_root) | (root_ends & ~is_root) | send
    custom = is_op([o for o in op_names if o.startswith("custom:")])

    code, _, instance = instance_keys(ev)
    occ_of = _group_occurrences(code, instance).occ_of
    span = (int(start.min()), int(end.max())) if n else (0, 0)
    dom_lo = np.full(D, np.iinfo(np.int64).max, dtype=np.int64)
    dom_hi = np.full(D, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(dom_lo, dom, start)
    np.maximum.at(dom_hi, dom, end)

    rows = np.arange(n, dtype=np.int64)
    e_idx = np.flatnonzero(ender)
    s_idx = np.flatnonzero(starter)
    ek, e_val, e_row, e_cnt = _extreme_per_key(
        occ_of[e_idx] * D + dom[e_idx], end[e_idx], rows[e_idx], largest=False
    )
    sk, s_val, s_row, s_cnt = _extreme_per_key(
        occ_of[s_idx] * D + dom[s_idx], start[s_idx], rows[s_idx], largest=True
    )
    e_occ, s_occ = ek // D, sk // D
    # pair each ender block with every starter block of the same occurrence
    occ_ids = np.intersect1d(e_occ, s_occ)
    e_lo, e_hi = np.searchsorted(e_occ, occ_ids), np.searchsorted(e_occ, occ_ids, "right")
    s_lo, s_hi = np.searchsorted(s_occ, occ_ids), np.searchsorted(s_occ, occ_ids, "right")
    pairs_per_occ = (e_hi - e_lo) * (s_hi - s_lo)

    flat_n = D * D
    best = np.full(flat_n, NO_BOUND, dtype=np.int64)
    best_i = np.full(flat_n, -1, dtype=np.int64)
    best_j = np.full(flat_n, -1, dtype=np.int64)
    count = np.zeros(flat_n, dtype=np.int64)
    nb = max(int(bins), 0)
    if nb:
        bin_best = np.full(flat_n * nb, NO_BOUND, dtype=np.int64)
        bin_e = np.zeros(flat_n * nb, dtype=np.int64)
        bin_s = np.zeros(flat_n * nb, dtype=np.int64)
        bin_i = np.zeros(flat_n * nb, dtype=np.int64)
        bin_j = np.zeros(flat_n * nb, dtype=np.int64)
        bin_width = np.maximum(1, (dom_hi - dom_lo) // nb + 1)

    cum = np.concatenate(([0], np.cumsum(pairs_per_occ)))
    chunk_starts = [0]
    while chunk_starts[-1] < occ_ids.size:
        limit = cum[chunk_starts[-1]] + PAIRS_PER_CHUNK
        nxt = int(np.searchsorted(cum, limit, "right")) - 1
        chunk_starts.append(max(nxt, chunk_starts[-1] + 1))
    for c0, c1 in zip(chunk_starts[:-1], chunk_starts[1:], strict=True):
        ne = (e_hi - e_lo)[c0:c1]
        ns = (s_hi - s_lo)[c0:c1]
        total = int((ne * ns).sum())
        if total == 0:
            continue
        # pair p of occurrence o: ender e_lo[o] + p // ns[o], starter s_lo[o] + p % ns[o]
        occ_rep = np.repeat(np.arange(c1 - c0), ne * ns)
        within = np.arange(total) - np.repeat(np.cumsum(ne * ns) - ne * ns, ne * ns)
        ei = e_lo[c0:c1][occ_rep] + within // ns[occ_rep]
        si = s_lo[c0:c1][occ_rep] + within % ns[occ_rep]
        a = ek[ei] % D
        b = sk[si] % D
        w = e_val[ei] - s_val[si]
        flat = a * D + b
        count += np.bincount(flat, weights=e_cnt[ei] * s_cnt[si], minlength=flat_n).astype(np.int64)
        key, val, pos, _ = _extreme_per_key(flat, w, np.arange(total), largest=False)
        better = val < best[key]
        best[key[better]] = val[better]
        best_i[key[better]] = e_row[ei[pos[better]]]
        best_j[key[better]] = s_row[si[pos[better]]]
        if nb:
            bkey = flat * nb + (s_val[si] - dom_lo[b]) // bin_width[b]
            key, val, pos, _ = _extreme_per_key(bkey, w, np.arange(total), largest=False)
            better = val < bin_best[key]
            bin_best[key[better]] = val[better]
            bin_e[key[better]] = e_val[ei[pos[better]]]
            bin_s[key[better]] = s_val[si[pos[better]]]
            bin_i[key[better]] = e_row[ei[pos[better]]]
            bin_j[key[better]] = s_row[si[pos[better]]]
    binned = None
    if nb:
        kept = np.flatnonzero(bin_best != NO_BOUND)
        pair = kept // nb
        binned = {
            "a": pair // D,
            "b": pair % D,
            "end_ns": bin_e[kept],
            "start_ns": bin_s[kept],
            "later_row": bin_i[kept],
            "earlier_row": bin_j[kept],
        }
    return ConstraintSet(
        domains=domains,
        bound_ns=best.reshape(D, D),
        later_row=best_i.reshape(D, D),
        earlier_row=best_j.reshape(D, D),
        count=count.reshape(D, D),
        events=n,
        events_without_end=int((~has_end & ~custom).sum()),
        events_custom=int(custom.sum()),
        occurrences_used=int(occ_ids.size),
        span_ns=span,
        domain_span_ns=np.stack([dom_lo, dom_hi], axis=1),
        binned=binned,
    )


class ClockError(MergeError):
    """The captures contradict causality: no clock offsets satisfy the constraints."""


def describe_event(frame: pd.DataFrame, row: int) -> str:
    """``rank R seq S (op group)``: one event, as a refusal names it."""
    r = frame.iloc[int(row)]
    seq = f" seq {int(r['seq'])}" if "seq" in frame and pd.notna(r["seq"]) else ""
    return f"rank {int(r['rank'])}{seq} ({r['op']} in group {r['group']})"


def contradiction(
    cs: ConstraintSet, frame: pd.DataFrame, cycle: list[tuple[int, int]], file
) -> ClockError:
    """ClockError naming the events (and ranks) of a contradiction."""
    issue = frame["issue_ns"].to_numpy(dtype=np.int64)
    latency = frame["latency_ns"].to_numpy(dtype=np.float64, na_value=np.nan)
    if "arrival_ns" in frame:  # an end is arrival + latency, as the constraints read it
        arrival = frame["arrival_ns"].to_numpy(dtype=np.float64, na_value=np.nan)
        entered = np.where(np.isnan(arrival), issue, arrival)
    else:
        entered = issue
    parts = []
    for a, b in cycle[:4]:
        i, j = int(cs.later_row[a, b]), int(cs.earlier_row[a, b])
        parts.append(
            f"{describe_event(frame, i)} ends at {int(entered[i] + latency[i])} ns on clock "
            f"{cs.domains[a]!r}, {describe_event(frame, j)} starts at {int(issue[j])} ns on "
            f"clock {cs.domains[b]!r}"
        )
    if len(cycle) == 1 and cycle[0][0] == cycle[0][1]:
        text = (
            f"impossible ordering on one clock: {parts[0]}, {-int(cs.bound_ns[cycle[0]])} ns "
            "later, though it cannot complete before that event started"
        )
    else:
        total = sum(int(cs.bound_ns[e]) for e in cycle)
        text = (
            "no clock offsets satisfy the happens-before constraints (a capture that "
            "contradicts causality: a clock step, mis-attributed events or mixed captures; "
            f"the cycle's bounds add up to {total} ns < 0): " + "; and ".join(parts)
        )
    first = cycle[0]
    rows = [int(cs.later_row[first]), int(cs.earlier_row[first])]
    ranks = ",".join(str(int(frame.iloc[r]["rank"])) for r in rows)
    return ClockError(text[:900], file=file, record=f"ranks {ranks}", field="latency_ns")


def refuse_impossible_orders(
    frame: pd.DataFrame,
    domain_of_rank: dict[int, str],
    *,
    file,
    files_of_ranks: dict[int, str] | None = None,
    mapped: tuple[np.ndarray, pd.arrays.IntegerArray | None] | None = None,
    reference: str = "reference",
    tolerance_ns: int = 0,
) -> None:
    """Refuse (ClockError) matched events whose happens-before order is impossible: on
    one clock domain, exactly as ``calibrate-clocks`` refuses them ("impossible ordering
    on one clock"); and, given ``mapped`` (issue and arrival times on the ``reference``
    clock, as a calibration maps them), an order the mapping makes impossible by more
    than ``tolerance_ns`` (the calibration's skew uncertainty): a capture from another
    run, or a calibration of other captures. The file named is the one of the rank whose
    event ends too early (``files_of_ranks``), else ``file``."""

    def file_of(row: int):
        return (files_of_ranks or {}).get(int(frame.iloc[row]["rank"]), file)

    cs = collect_constraints(frame, domain_of_rank)
    diagonal = np.diag(cs.bound_ns)
    broken = np.flatnonzero((np.diag(cs.count) > 0) & (diagonal < 0))
    if broken.size:
        d = int(broken[0])
        raise contradiction(cs, frame, [(d, d)], file_of(int(cs.later_row[d, d])))
    if mapped is None or len(cs.domains) < 2:
        return
    on_reference = frame.copy(deep=False)
    on_reference["issue_ns"] = mapped[0]
    if mapped[1] is not None:
        on_reference["arrival_ns"] = mapped[1]
    one = collect_constraints(on_reference, {int(r): reference for r in domain_of_rank})
    if one.count[0, 0] and one.bound_ns[0, 0] < -tolerance_ns:
        later, earlier = int(one.later_row[0, 0]), int(one.earlier_row[0, 0])
        ranks = f"ranks {int(frame.iloc[later]['rank'])},{int(frame.iloc[earlier]['rank'])}"
        raise ClockError(
            f"the calibration puts {describe_event(frame, later)} ending "
            f"{-int(one.bound_ns[0, 0])} ns before {describe_event(frame, earlier)} starts, "
            f"on reference clock {reference!r}, beyond its uncertainty of {tolerance_ns} ns: "
            "impossible ordering (happens-before, as calibrate-clocks checks it); captures "
            "of another run, or a calibration of other captures",
            file=file_of(later),
            record=ranks,
            field="ts_ns",
        )
