"""Process groups of an imported trace: declared only from evidence.

Sources, in order of authority:
- ``distributedInfo.pg_config``: full rank lists of the groups this rank belongs to
  (never truncated); declared as ``{"id": pg_name, "ranks": [...], "description": pg_desc}``;
- ``record_param_comms``/kernel metadata: ``Process Group Name`` (the join key with
  ``pg_name``), ``Process Group Ranks`` (a string, possibly truncated), ``Group size``,
  ``Global rank start``/``Global rank stride``. A truncated list is rebuilt from
  pg_config or from start/stride/size and must agree with every entry that survived;
  otherwise the import refuses (exit 2) rather than guess membership.

Groups are always declared with explicit rank lists (start/stride/size expanded), so
every rank's import of one group declares it identically.

Calls without group metadata (gloo; NCCL traces before torch ~2.2) get a group only
from evidence: the rank's own groups in pg_config, narrowed by what the call's shapes
and arguments imply (group size from output/input ratios or split-list lengths, root
and peer group ranks in range, a peer that is not the rank itself), then, for gloo, by
ownership of the run-loop thread its work ran on (each group owns its own gloo threads;
a thread whose work includes a call that evidence pins to exactly one group belongs to
that group). Anything else gets the group ``unknown:<reason>``, which is not declared,
so ``ingest``/``merge`` refuse it by name instead of matching it to a guess.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from tracecanary.errors import ImportRefused
from tracecanary.kineto.describe import Described, _int_or_none
from tracecanary.kineto.ranks import parse_rank_list, strided_ranks


@dataclass
class Group:
    id: str
    ranks: list[int]
    description: str | None
    source: str

    def declaration(self) -> dict:
        out: dict[str, Any] = {"id": self.id, "ranks": list(self.ranks)}
        if self.description:
            out["description"] = self.description
        return out


def pg_config_groups(dist_info: dict, world_size: int, file: str) -> dict[str, Group]:
    """Groups listed in ``distributedInfo.pg_config`` (validated)."""
    config = dist_info.get("pg_config")
    if config is None:
        return {}
    if not isinstance(config, list):
        raise ImportRefused("pg_config is not a list", file=file, field="distributedInfo.pg_config")
    groups: dict[str, Group] = {}
    for k, entry in enumerate(config):
        where = f"distributedInfo.pg_config[{k}]"
        if not isinstance(entry, dict):
            raise ImportRefused("pg_config entry is not an object", file=file, field=where)
        name = entry.get("pg_name")
        if isinstance(name, int) and not isinstance(name, bool):
            name = str(name)
        if not isinstance(name, str) or not name:
            raise ImportRefused("pg_name missing", file=file, field=f"{where}.pg_name")
        try:
            ranks = parse_rank_list(entry.get("ranks"))
        except ValueError as err:
            raise ImportRefused(str(err), file=file, field=f"{where}.ranks") from None
        if ranks.truncated or not ranks.head:
            raise ImportRefused(
                "pg_config rank list is truncated or empty", file=file, field=f"{where}.ranks"
            )
        full = list(ranks.head)
        size = _int_or_none(entry.get("pg_size"))
        if size is not None and size != len(full):
            raise ImportRefused(
                f"pg_size {size} but {len(full)} ranks listed", file=file, field=f"{where}.ranks"
            )
        _check_ranks(full, world_size, file, f"{where}.ranks")
        if name in groups and groups[name].ranks != full:
            raise ImportRefused(
                f"group {name!r} listed twice with different ranks", file=file, field=where
            )
        desc = entry.get("pg_desc")
        groups[name] = Group(name, full, desc if isinstance(desc, str) else None, "pg_config")
    return groups


def _check_ranks(ranks: list[int], world_size: int, file: str, field: str, record=None) -> None:
    if len(set(ranks)) != len(ranks):
        raise ImportRefused("rank list repeats a rank", file=file, record=record, field=field)
    bad = [r for r in ranks if r < 0 or r >= world_size]
    if bad:
        raise ImportRefused(
            f"rank {bad[0]} outside world_size {world_size}", file=file, record=record, field=field
        )


def group_from_metadata(
    d: Described, groups: dict[str, Group], world_size: int, file: str
) -> Group:
    """The group a record_param_comms/kernel names, declared or checked against what is
    already known; refuses truncated lists without evidence and any contradiction."""
    gid = d.group_name
    assert gid is not None
    record = d.call.rpc.index if d.call.rpc is not None else d.index
    meta = d.meta
    size = _int_or_none(meta.get("Group size"))
    start = _int_or_none(meta.get("Global rank start"))
    stride = _int_or_none(meta.get("Global rank stride"))
    listed = None
    if "Process Group Ranks" in meta:
        try:
            listed = parse_rank_list(meta["Process Group Ranks"])
        except ValueError as err:
            raise ImportRefused(
                str(err), file=file, record=record, field="args.Process Group Ranks"
            ) from None
        if not listed.truncated and not listed.head:
            listed = None  # "[]": not recorded
    if size is not None and not 0 < size <= world_size:
        raise ImportRefused(
            f"Group size {size} outside 1..world_size {world_size}",
            file=file,
            record=record,
            field="args.Group size",
        )
    strided = None
    if size is not None and start is not None and stride is not None and stride > 0:
        strided = strided_ranks(start, stride, size)

    known = groups.get(gid)
    if known is not None:
        full = known.ranks
        why = f"distributedInfo.pg_config lists group {gid!r} as {_short(full)}"
    elif listed is not None and not listed.truncated:
        full = list(listed.head)
        why = "Process Group Ranks"
    elif strided is not None:
        full = strided
        why = f"Global rank start {start} / stride {stride} / Group size {size}"
    elif listed is not None:
        raise ImportRefused(
            f"Process Group Ranks of group {gid!r} is truncated and neither "
            "distributedInfo.pg_config nor Global rank start/stride with Group size "
            "gives the full list",
            file=file,
            record=record,
            field="args.Process Group Ranks",
        )
    else:
        raise ImportRefused(
            f"membership of group {gid!r} is not recorded (no Process Group Ranks, "
            "no pg_config entry, no start/stride)",
            file=file,
            record=record,
            field="args.Process Group Ranks",
        )
    if listed is not None and not listed.agrees_with(full):
        raise ImportRefused(
            f"Process Group Ranks {_short(list(listed.head))} contradicts {why}",
            file=file,
            record=record,
            field="args.Process Group Ranks",
        )
    if size is not None and size != len(full):
        raise ImportRefused(
            f"Group size {size} contradicts {why} ({len(full)} ranks)",
            file=file,
            record=record,
            field="args.Group size",
        )
    if strided is not None and strided != full:
        raise ImportRefused(
            f"Global rank start/stride contradict {why}",
            file=file,
            record=record,
            field="args.Global rank stride",
        )
    if known is None:
        _check_ranks(full, world_size, file, "args.Process Group Ranks", record)
        desc = meta.get("Process Group Description")
        known = Group(gid, full, desc if isinstance(desc, str) else None, "record_param_comms")
        groups[gid] = known
    return known


def _short(ranks: list[int]) -> str:
    return (
        str(ranks)
        if len(ranks) <= 8
        else f"[{ranks[0]}, {ranks[1]}, ... {ranks[-1]}] ({len(ranks)} ranks)"
    )


def _consistent(d: Described, g: Group, rank: int) -> bool:
    size = len(g.ranks)
    if rank not in g.ranks:
        return False
    if d.group_size_hints and any(h != size for h in d.group_size_hints):
        return False
    if d.root_group_rank is not None and not 0 <= d.root_group_rank < size:
        return False
    if d.peer_group_rank is not None:
        if not 0 <= d.peer_group_rank < size or g.ranks[d.peer_group_rank] == rank:
            return False
    if d.peer_global is not None and d.peer_global not in g.ranks:
        return False
    return True


def resolve_by_evidence(
    described: list[Described], groups: dict[str, Group], rank: int, has_pg_config: bool
) -> dict[int, str]:
    """Group id (or ``unknown:<reason>``) for every call without group metadata, keyed
    by ``id(call)``."""
    mine = [g for g in groups.values() if rank in g.ranks]
    out: dict[int, str] = {}
    cands: dict[int, list[Group]] = {}
    for d in described:
        if d.group_name is not None:
            continue
        if not has_pg_config:
            out[id(d.call)] = "unknown:no-pg-config"
            continue
        cands[id(d.call)] = [g for g in mine if _consistent(d, g, rank)]

    by_id = {id(d.call): d for d in described}

    def pinned(call_id: int) -> str | None:
        c = cands.get(call_id)
        return c[0].id if c is not None and len(c) == 1 else None

    # gloo run-loop thread ownership (collectives only; send/recv run on the caller)
    votes: dict[tuple, set[str]] = defaultdict(set)
    for cid, d in by_id.items():
        if d.op in ("send", "recv") or not d.call.work or d.work_name is None:
            continue
        g = pinned(cid)
        if g is None:
            continue
        if any(pinned(other) != g for other in d.call.ambiguous_with):
            continue
        for w in d.call.work:
            votes[w.thread].add(g)
    owner = {t: next(iter(gs)) for t, gs in votes.items() if len(gs) == 1}
    conflicted = {t for t, gs in votes.items() if len(gs) > 1}

    for cid, c in cands.items():
        d = by_id[cid]
        if len(c) == 1:
            out[cid] = c[0].id
            continue
        if not c:
            out[cid] = "unknown:no-group-fits-evidence"
            continue
        if d.op in ("send", "recv"):
            out[cid] = "unknown:p2p-group-ambiguous"
            continue
        if not d.call.work or d.work_name is None:
            out[cid] = (
                "unknown:no-group-evidence" if d.work_name is None else "unknown:gloo-work-unpaired"
            )
            continue
        threads = {w.thread for w in d.call.work}
        for other in d.call.ambiguous_with:
            threads |= {w.thread for w in by_id[other].call.work}
        if threads & conflicted:
            out[cid] = "unknown:gloo-thread-conflict"
            continue
        owners = {owner.get(t) for t in threads}
        if None in owners:
            out[cid] = "unknown:gloo-thread-unattributed"
        elif len(owners) > 1:
            out[cid] = "unknown:gloo-work-ambiguous"
        else:
            g = owners.pop()
            out[cid] = g if any(x.id == g for x in c) else "unknown:no-group-fits-evidence"
    return out
