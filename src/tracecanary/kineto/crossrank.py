"""Cross-rank resolution, at merge time, of what one rank's Kineto trace cannot decide:
the process group of a collective (``meta.kineto.pg_evidence``) and the dtype of a
non-root scatter/gather member (``meta.kineto.unfilled``). See
``tracecanary.kineto.evidence`` for what the import hands over.

Guarantees of ``resolve_groups``:
- an identity (one rank's local process group: the gloo threads its work ran on) gets
  the group ``g`` only when *every* assignment of all ranks' identities to their
  candidate groups under which the members of every group record the same sequence of
  collectives (equal op, bytes, dtype, root; a member's unrecorded dtype matches any, and
  an all_to_allv's bytes, which differ by design, are not compared: its splits are, at
  matching)
  and, where a clock calibration puts the ranks on one timeline, under which no member
  of a symmetric collective (all_reduce, all_gather, reduce_scatter, all_to_all,
  barrier) finished its work before another member issued it (beyond the calibration's
  uncertainty), and under which no rank runs one group's work on more than two gloo
  threads or runs a later-created group's work on earlier-created threads
  (``_threads_possible``), gives it ``g``. No assignment -> refusal naming the first rank whose
  identities fit no assignment; two assignments that differ -> refusal naming the rank,
  the identity and the candidates that both keep. An explicit ``--groups`` mapping
  fixes an identity first (it must name one of its candidates);
- a send/recv whose group is unknown gets the one group both sides' candidates share;
- an unrecorded dtype is taken from the members of the same matched collective that
  recorded it (they must agree), bytes = recorded elements x that dtype's size, which
  must equal the bytes those members recorded; each fill is listed in the notes;
- the search is bounded (``MAX_OPTIONS_PER_RANK``, ``MAX_SEARCH_STEPS``); beyond it the
  merge refuses and asks for a ``--groups`` mapping instead of guessing.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

from tracecanary.errors import MergeError
from tracecanary.formats.vocab import DTYPE_BYTES, P2P_OPS
from tracecanary.kineto.evidence import (
    GLOO_THREADS_PER_GROUP,
    GROUP_THREADS_KEY,
    PG_EVIDENCE_KEY,
    UNFILLED_KEY,
    UNRECORDED_DTYPE,
    gloo_stream,
    identity_threads,
    is_gloo_stream,
)

SYMMETRIC_OPS = frozenset({"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "barrier"})
"""Collectives no member can finish before every member has issued them."""
MAX_OPTIONS_PER_RANK = 20_000
MAX_SEARCH_STEPS = 500_000

ToReference = Callable[[int, int], int]
"""(rank, local ns) -> reference ns, with ``uncertainty_ns(rank)`` beside it."""


@dataclass
class RankCapture:
    """One rank's imported document, as merge read it."""

    path: str
    rank: int
    doc: dict
    by_seq: dict[int, dict] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_seq = {e["seq"]: e for e in self.doc["events"]}

    @property
    def kineto(self) -> dict:
        return self.doc["meta"].get("kineto") or {}


@dataclass(frozen=True)
class Identity:
    rank: int
    name: str
    candidates: tuple[str, ...]
    seqs: tuple[int, ...]
    work_end_ns: tuple[int | None, ...]


def needs_resolution(doc: dict) -> bool:
    """True if an imported document hands merge groups or dtypes to settle."""
    kineto = doc.get("meta", {}).get("kineto") or {}
    return bool(kineto.get(PG_EVIDENCE_KEY) or kineto.get(UNFILLED_KEY))


def resolve_groups(
    captures: list[RankCapture],
    groups: dict[str, list[int]],
    mapping: dict[tuple[int, str], str],
    timeline: tuple[ToReference, Callable[[int], int]] | None,
    mapping_file: str | None = None,
) -> list[str]:
    """Rewrite the ``group`` (with a gloo-timed event's ``stream``, which names its group:
    ``evidence.gloo_stream``) and unrecorded ``dtype``/``bytes`` of the captures' events
    in place; return notes saying what was resolved and how."""
    collective_ids, p2p_ids = _identities(captures, groups, mapping, mapping_file)
    notes: list[str] = []
    chosen = _solve(captures, groups, collective_ids, timeline)
    by_rank = {c.rank: c for c in captures}
    for ident, gid in chosen.items():
        for seq in ident.seqs:
            _set_group(by_rank[ident.rank].by_seq[seq], gid)
    chosen_p2p = _resolve_p2p(by_rank, p2p_ids)
    for ident, gid in chosen_p2p.items():
        _set_group(by_rank[ident.rank].by_seq[ident.seqs[0]], gid)
    resolved = {**chosen, **chosen_p2p}
    if resolved:
        how = "; ".join(
            f"rank {i.rank} {i.name} -> group {g} ({len(i.seqs)} events"
            + (", from --groups" if (i.rank, i.name) in mapping else "")
            + ")"
            for i, g in sorted(resolved.items(), key=lambda t: (t[0].rank, t[0].name))
        )
        notes.append(
            "Process groups resolved at merge by cross-rank matching (the members of each "
            "group record the same op/bytes/dtype sequence"
            + (
                ", and no symmetric collective ends on one member before another issued it"
                if timeline is not None
                else ""
            )
            + f"; the only assignment the traces admit): {how}."
        )
    notes += _fill_unrecorded(captures, groups)
    return notes


def _set_group(event: dict, gid: str) -> None:
    """Give ``event`` its resolved group; a gloo stream names the group, so it follows."""
    event["group"] = gid
    if is_gloo_stream(event.get("stream")):
        event["stream"] = gloo_stream(gid)


def _identities(
    captures: list[RankCapture],
    groups: dict[str, list[int]],
    mapping: dict[tuple[int, str], str],
    mapping_file: str | None,
) -> tuple[list[Identity], list[Identity]]:
    collective, p2p = [], []
    used = set()
    for cap in captures:
        for name, entry in sorted(cap.kineto.get(PG_EVIDENCE_KEY, {}).items()):
            where = f"meta.kineto.{PG_EVIDENCE_KEY}.{name}"
            seqs = tuple(entry.get("seq", []))
            missing = [s for s in seqs if s not in cap.by_seq]
            if not seqs or missing:
                raise MergeError(
                    "identity lists no events or events that are not in the trace",
                    file=cap.path,
                    field=where,
                )
            candidates = tuple(entry.get("candidates", []))
            bad = [g for g in candidates if cap.rank not in groups.get(g, [])]
            if bad:
                raise MergeError(
                    f"candidate group {bad[0]!r} is not declared with rank {cap.rank}",
                    file=cap.path,
                    field=where,
                )
            if (cap.rank, name) in mapping:
                gid = mapping[(cap.rank, name)]
                used.add((cap.rank, name))
                if gid not in candidates:
                    raise MergeError(
                        f"--groups maps rank {cap.rank} {name} to group {gid!r}, but its "
                        f"events fit only {list(candidates)}",
                        file=mapping_file,
                        record=f"rank {cap.rank} {name}",
                        field="group",
                    )
                candidates = (gid,)
            ends = tuple(entry.get("work_end_ns") or [None] * len(seqs))
            ident = Identity(cap.rank, name, candidates, seqs, ends)
            is_p2p = cap.by_seq[seqs[0]]["op"] in P2P_OPS
            if not candidates:
                raise MergeError(
                    f"rank {cap.rank}: no process group of this rank fits the events of {name}",
                    file=cap.path,
                    field=where,
                )
            (p2p if is_p2p else collective).append(ident)
    unused = sorted(set(mapping) - used)
    if unused:
        rank, name = unused[0]
        raise MergeError(
            f"--groups names rank {rank} {name}, which no capture lists as undetermined",
            file=mapping_file,
            record=f"rank {rank} {name}",
            field="identity",
        )
    return collective, p2p


@dataclass
class _Option:
    choice: tuple[str, ...]
    seqs: dict[str, list[int]]  # group -> this rank's seqs in it, issue order


def _solve(
    captures: list[RankCapture],
    groups: dict[str, list[int]],
    identities: list[Identity],
    timeline: tuple[ToReference, Callable[[int], int]] | None,
) -> dict[Identity, str]:
    """The group of every collective identity: the one assignment of all ranks' options
    (``_rank_options``) under which every group's members agree (``_Search``); refused
    when there is none or more than one (see the module docstring)."""
    if not identities:
        return {}
    by_rank_ids: dict[int, list[Identity]] = defaultdict(list)
    for ident in identities:
        by_rank_ids[ident.rank].append(ident)
    caps = {c.rank: c for c in captures}
    search = _Search(caps, identities, timeline)
    options = {
        rank: _rank_options(cap, groups, by_rank_ids.get(rank, []))
        for rank, cap in sorted(caps.items())
    }
    solutions = search.first_two(options)
    order = search.order
    if not solutions:
        _refuse_no_assignment(caps, by_rank_ids, order[min(search.deepest, len(order) - 1)])
    if len(solutions) > 1:
        _refuse_second_assignment(caps, by_rank_ids, order, solutions, timeline is not None)
    first = solutions[0]
    out = {}
    for rank in order:
        for ident, g in zip(by_rank_ids.get(rank, []), first[rank].choice, strict=True):
            out[ident] = g
    return out


def _rank_options(
    cap: RankCapture, groups: dict[str, list[int]], ids: list[Identity]
) -> list[_Option]:
    """Every assignment of this rank's identities ``ids`` to one of their candidates each
    that ``_threads_possible`` allows, in ``itertools.product`` order, each with its
    groups' seqs (the events whose group is known plus those of the identities assigned
    there, in issue order). Refused when the candidates make more than
    ``MAX_OPTIONS_PER_RANK`` assignments."""
    rank = cap.rank
    mine = [g for g, ranks in groups.items() if rank in ranks]
    known: dict[str, list[int]] = {g: [] for g in mine}
    for e in cap.doc["events"]:
        if e["op"] not in P2P_OPS and e["group"] in known:
            known[e["group"]].append(e["seq"])
    count = 1
    for ident in ids:
        count *= len(ident.candidates)
    if count > MAX_OPTIONS_PER_RANK:
        raise MergeError(
            f"rank {rank}: {len(ids)} process-group identities with {count} possible "
            "assignments is too many to match; settle some with --groups",
            file=cap.path,
            field=f"meta.kineto.{PG_EVIDENCE_KEY}",
        )
    recorded = cap.kineto.get(GROUP_THREADS_KEY) or {}
    known_threads: dict[str, set[int]] = {g: set(recorded.get(g, ())) for g in mine}
    opts = []
    for choice in itertools.product(*(i.candidates for i in ids)):
        if not _threads_possible(ids, choice, known_threads):
            continue
        seqs = {g: list(s) for g, s in known.items()}
        for ident, g in zip(ids, choice, strict=True):
            seqs[g].extend(ident.seqs)
        for s in seqs.values():
            s.sort()
        opts.append(_Option(choice, seqs))
    return opts


class _Search:
    """Depth-first search, ranks in ascending order, for assignments (one option per
    rank) under which the members of every group record the same signature sequence
    (op, root, and bytes with dtype where both recorded them) and, with a
    ``timeline``, no member of a symmetric collective finished its work before another
    issued it (beyond both ranks' uncertainty)."""

    def __init__(
        self,
        caps: dict[int, RankCapture],
        identities: list[Identity],
        timeline: tuple[ToReference, Callable[[int], int]] | None,
    ) -> None:
        self.caps = caps
        self.options: dict[int, list[_Option]] = {}
        self.order = sorted(caps)
        self.to_ref = timeline[0] if timeline else None
        self.unc = timeline[1] if timeline else None
        self.ends: dict[tuple[int, int], int] = {}
        for ident in identities:
            for seq, end in zip(ident.seqs, ident.work_end_ns, strict=False):
                if end is not None:
                    self.ends[(ident.rank, seq)] = end
        self.signatures: dict[tuple[int, int], tuple] = {}
        for rank, cap in caps.items():
            for seq, e in cap.by_seq.items():
                unrecorded = e["dtype"] == UNRECORDED_DTYPE
                uneven = "send_splits" in e  # an all_to_allv: members' bytes differ by design
                self.signatures[(rank, seq)] = (
                    e["op"],
                    None if unrecorded or uneven else e["bytes"],
                    None if unrecorded else e["dtype"],
                    e.get("root"),
                )
        self.placed: dict[str, list[tuple[int, list[int]]]] = defaultdict(list)
        self.current: dict[int, _Option] = {}
        self.solutions: list[dict[int, _Option]] = []
        self.steps = 0
        self.deepest = 0

    def first_two(self, options: dict[int, list[_Option]]) -> list[dict[int, _Option]]:
        """The first two complete assignments (rank -> one of its ``options``, tried in
        their order) found, at most two; the search stops there. Refused past ``MAX_SEARCH_STEPS`` options tried.
        ``deepest`` is then the index in ``order`` of the deepest rank reached."""
        self.options = options
        self._search(0)
        return self.solutions

    def _same_signatures(
        self, rank: int, seqs: list[int], other: int, other_seqs: list[int]
    ) -> bool:
        if len(other_seqs) != len(seqs):
            return False
        for a, b in zip(seqs, other_seqs, strict=True):
            sa, sb = self.signatures[(rank, a)], self.signatures[(other, b)]
            if sa[0] != sb[0] or sa[3] != sb[3]:
                return False
            if None not in (sa[1], sb[1]) and (sa[1], sa[2]) != (sb[1], sb[2]):
                return False
            if None not in (sa[2], sb[2]) and sa[2] != sb[2]:
                return False
        return True

    def _causal(self, rank: int, seqs: list[int], other: int, other_seqs: list[int]) -> bool:
        """No member ends a symmetric collective before another member issued it."""
        caps, to_ref = self.caps, self.to_ref
        margin = self.unc(rank) + self.unc(other)
        for a, b in zip(seqs, other_seqs, strict=True):
            if caps[rank].by_seq[a]["op"] not in SYMMETRIC_OPS:
                continue
            ea, eb = self.ends.get((rank, a)), self.ends.get((other, b))
            if ea is None and eb is None:
                continue
            ia = to_ref(rank, caps[rank].by_seq[a]["ts_ns"])
            ib = to_ref(other, caps[other].by_seq[b]["ts_ns"])
            if ea is not None and to_ref(rank, ea) + margin < ib:
                return False
            if eb is not None and to_ref(other, eb) + margin < ia:
                return False
        return True

    def _matches(self, g: str, rank: int, seqs: list[int]) -> bool:
        members = self.placed[g]
        if not members:
            return True
        # every placed member already equals the first one
        if not self._same_signatures(rank, seqs, *members[0]):
            return False
        return self.to_ref is None or all(self._causal(rank, seqs, o, os_) for o, os_ in members)

    def _search(self, k: int) -> None:
        if len(self.solutions) >= 2:
            return
        self.deepest = max(self.deepest, k)
        if k == len(self.order):
            self.solutions.append(dict(self.current))
            return
        rank = self.order[k]
        for opt in self.options[rank]:
            self.steps += 1
            if self.steps > MAX_SEARCH_STEPS:
                raise MergeError(
                    f"matching process groups across ranks took over {MAX_SEARCH_STEPS} "
                    "steps; settle some identities with --groups",
                    file=self.caps[rank].path,
                    field=f"meta.kineto.{PG_EVIDENCE_KEY}",
                )
            if not all(self._matches(g, rank, s) for g, s in opt.seqs.items()):
                continue
            for g, s in opt.seqs.items():
                self.placed[g].append((rank, s))
            self.current[rank] = opt
            self._search(k + 1)
            for g in opt.seqs:
                self.placed[g].pop()
            del self.current[rank]


def _refuse_no_assignment(
    caps: dict[int, RankCapture], by_rank_ids: dict[int, list[Identity]], rank: int
) -> NoReturn:
    """Refuse naming ``rank`` (the deepest the search reached) and its identities."""
    ids = by_rank_ids.get(rank, [])
    listed = ", ".join(f"{i.name} (candidates {list(i.candidates)})" for i in ids) or "none"
    raise MergeError(
        f"rank {rank}: no assignment of its undetermined process groups ({listed}) "
        "makes every group's members record the same collectives; "
        "the captures disagree or a --groups mapping is wrong",
        file=caps[rank].path,
        record=f"rank {rank}",
        field=f"meta.kineto.{PG_EVIDENCE_KEY}",
    )


def _refuse_second_assignment(
    caps: dict[int, RankCapture],
    by_rank_ids: dict[int, list[Identity]],
    order: list[int],
    solutions: list[dict[int, _Option]],
    timed: bool,
) -> None:
    """Refuse naming the first identity (ranks in order) whose group differs between the
    two assignments found, and both groups; return if none differs."""
    first, second = solutions[0], solutions[1]
    for rank in order:
        for ident, a, b in zip(
            by_rank_ids.get(rank, []), first[rank].choice, second[rank].choice, strict=True
        ):
            if a != b:
                raise MergeError(
                    f"rank {rank}: process group of {ident.name} is not determined by "
                    f"the traces: candidates {sorted({a, b})} both make every group's "
                    "members agree"
                    + ("" if timed else " (a clock calibration adds timing evidence)")
                    + "; settle it with --groups",
                    file=caps[rank].path,
                    record=f"rank {rank} {ident.name}",
                    field="group",
                )


def _threads_possible(
    ids: list[Identity], choice: tuple[str, ...], known_threads: dict[str, set[int]]
) -> bool:
    """A rank's assignment is possible only if no group runs work on more than
    ``GLOO_THREADS_PER_GROUP`` threads and groups created later (higher numeric pg_name)
    own later threads: a ProcessGroupGloo starts its run-loop threads when it is
    created, groups are created in pg_name order, and thread ids are handed out in
    increasing order within a process."""
    threads = {g: set(t) for g, t in known_threads.items()}
    for ident, g in zip(ids, choice, strict=True):
        threads.setdefault(g, set()).update(identity_threads(ident.name))
    if any(len(t) > GLOO_THREADS_PER_GROUP for t in threads.values()):
        return False
    numbered = sorted((int(g), t) for g, t in threads.items() if g.isdigit() and t)
    return all(max(a) < min(b) for (_, a), (_, b) in itertools.pairwise(numbered))


def _resolve_p2p(by_rank: dict[int, RankCapture], identities: list[Identity]) -> dict:
    """The group both sides of each unresolved send/recv can be in."""
    if not identities:
        return {}
    cands: dict[tuple[int, int], tuple[str, ...]] = {}
    for ident in identities:
        cands[(ident.rank, ident.seqs[0])] = ident.candidates
    # k-th send src->dst pairs with the k-th recv on dst from src
    pairs: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
    for rank, cap in sorted(by_rank.items()):
        for e in cap.doc["events"]:
            if e["op"] in P2P_OPS and "peer" in e:
                src, dst = (rank, e["peer"]) if e["op"] == "send" else (e["peer"], rank)
                pairs[(src, dst, e["op"])].append((rank, e["seq"]))
    partner: dict[tuple[int, int], tuple[int, int]] = {}
    for (src, dst, op), sides in pairs.items():
        if op != "send":
            continue
        for a, b in zip(sides, pairs.get((src, dst, "recv"), []), strict=False):
            partner[a], partner[b] = b, a
    out = {}
    for ident in identities:
        key = (ident.rank, ident.seqs[0])
        cap = by_rank[ident.rank]
        other = partner.get(key)
        if other is None:
            raise MergeError(
                f"rank {ident.rank}: the group of {ident.name} (a send/recv) is unknown and "
                "it has no recorded partner to take it from; settle it with --groups",
                file=cap.path,
                record=f"rank {ident.rank} {ident.name}",
                field="group",
            )
        theirs = cands.get(other)
        if theirs is None:
            theirs = (by_rank[other[0]].by_seq[other[1]]["group"],)
        both = [g for g in ident.candidates if g in theirs]
        if len(both) != 1:
            raise MergeError(
                f"rank {ident.rank}: process group of {ident.name} (a send/recv) is not "
                f"determined: candidates {both or list(ident.candidates)}; settle it with --groups",
                file=cap.path,
                record=f"rank {ident.rank} {ident.name}",
                field="group",
            )
        out[ident] = both[0]
    return out


def _fill_unrecorded(captures: list[RankCapture], groups: dict[str, list[int]]) -> list[str]:
    """Fill unrecorded dtypes from the other members of the same matched collective."""
    todo = [(c, u) for c in captures for u in c.kineto.get(UNFILLED_KEY, [])]
    if not todo:
        return []
    by_rank = {c.rank: c for c in captures}
    position: dict[tuple[int, int], tuple[str, int]] = {}
    sequence: dict[tuple[str, int], list[int]] = {}
    for c in captures:
        counts: dict[str, int] = defaultdict(int)
        for e in sorted(c.doc["events"], key=lambda e: e["seq"]):
            if e["op"] in P2P_OPS:
                continue
            position[(c.rank, e["seq"])] = (e["group"], counts[e["group"]])
            sequence[(e["group"], c.rank)] = sequence.get((e["group"], c.rank), []) + [e["seq"]]
            counts[e["group"]] += 1
    filled: list[str] = []
    for cap, entry in todo:
        seq, elements = entry.get("seq"), entry.get("elements")
        where = f"meta.kineto.{UNFILLED_KEY}"
        if (cap.rank, seq) not in position or not isinstance(elements, int):
            raise MergeError(
                "unfilled entry names no collective event of this rank",
                file=cap.path,
                field=where,
            )
        gid, k = position[(cap.rank, seq)]
        event = cap.by_seq[seq]
        seen = {}
        for other in groups.get(gid, []):
            if other == cap.rank or other not in by_rank:
                continue
            theirs = sequence.get((gid, other), [])
            if k < len(theirs):
                e = by_rank[other].by_seq[theirs[k]]
                if e["dtype"] != UNRECORDED_DTYPE:
                    seen[other] = (e["dtype"], e["bytes"])
        values = set(seen.values())
        if len(values) != 1:
            raise MergeError(
                f"rank {cap.rank}: dtype of {event['op']} (group {gid} #{k}) is not recorded "
                + (
                    "and no other member recorded it"
                    if not values
                    else f"and the members that did disagree ({seen})"
                ),
                file=cap.path,
                record=f"collective {gid}#{k} ranks {cap.rank}",
                field="dtype",
            )
        dtype, nbytes = values.pop()
        if dtype not in DTYPE_BYTES or elements * DTYPE_BYTES[dtype] != nbytes:
            raise MergeError(
                f"rank {cap.rank}: {elements} elements of {dtype} do not make the {nbytes} "
                f"bytes the other members of {event['op']} (group {gid} #{k}) recorded",
                file=cap.path,
                record=f"collective {gid}#{k} ranks {cap.rank}",
                field="bytes",
            )
        event["dtype"], event["bytes"] = dtype, nbytes
        filled.append(
            f"rank {cap.rank} seq {seq} {event['op']} (group {gid} #{k}): {dtype}, "
            f"{nbytes} bytes from rank(s) {','.join(map(str, sorted(seen)))}"
        )
    return [
        "dtype/bytes taken from the other members of the same matched collective (the "
        "rank's own trace records shapes but no dtype, e.g. a non-root scatter/gather): "
        + "; ".join(filled)
        + "."
    ]
