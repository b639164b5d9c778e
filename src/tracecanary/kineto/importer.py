"""Import one rank's Kineto trace as a native ``tracecanary.trace/v1`` document.

Guarantees:
- observational and single-rank: events carry the rank's own issue times (``ts_ns``)
  and, where the trace measured it, ``latency_ns`` (NCCL kernel duration, or gloo work
  duration); never ``arrival_ns``, ``overlap_ns`` or any skew. ``meta.notes`` says so;
- every collective call becomes one event; a name with no mapping becomes
  ``custom:<name>`` (listed in the notes), ``wait`` records are filtered (counted);
- groups come only from evidence (``tracecanary.kineto.groups``); a collective whose
  group cannot be established gets ``unknown:<reason>``, listed in the notes;
- bad input (not JSON, not Kineto, a collective without sizes in any layer, a dtype
  outside the supported set, truncated rank lists without evidence, contradictions)
  raises ``ImportRefused`` naming the file, the trace event index and the field;
- deterministic: the same trace gives the same document.

Units: ``ts_ns`` absolute nanoseconds (``baseTimeNanoseconds`` + relative ``ts``, or
epoch microseconds x 1000 in older traces), ``latency_ns`` nanoseconds, ``bytes`` bytes.
"""

from __future__ import annotations

import gc
import os
from collections import Counter
from pathlib import Path
from typing import Any

from tracecanary import __version__
from tracecanary.canonical import sha256_file
from tracecanary.errors import ImportRefused, ResourceLimitExceeded
from tracecanary.formats.ids import TRACE_FORMAT as FORMAT
from tracecanary.kineto.calls import Extracted, extract
from tracecanary.kineto.describe import (
    Described,
    _int_or_none,
    describe,
    finalize,
    recorded_elements,
    split_elements,
)
from tracecanary.kineto.evidence import (
    FILLABLE_OPS,
    GROUP_THREADS_KEY,
    PG_EVIDENCE_KEY,
    UNFILLED_KEY,
    UNRECORDED_DTYPE,
    gloo_stream,
)
from tracecanary.kineto.gloo import pair_work
from tracecanary.kineto.groups import (
    Group,
    _consistent,
    group_from_metadata,
    pg_config_groups,
    resolve_by_evidence,
)
from tracecanary.kineto.load import load_kineto
from tracecanary.kineto.pg_identity import local_identities
from tracecanary.limits import Limits, current_limits

ABSOLUTE_US_THRESHOLD_NS = 10**15 * 1000  # ts > 1e15 us means absolute epoch time
P2P = ("send", "recv")
ROOTED = ("broadcast", "reduce")


def import_kineto_file(
    path: str | os.PathLike,
    *,
    rank: int | None = None,
    world_size: int | None = None,
    limits: Limits | None = None,
) -> dict:
    """Load and convert one Kineto trace file (see module docstring)."""
    # the parsed document holds millions of containers and no cycles; it dies when this
    # returns, so the cyclic collector is paused rather than made to rescan it
    collecting = gc.isenabled()
    gc.disable()
    try:
        doc = load_kineto(path, limits)
        return convert(
            doc,
            file=str(path),
            rank=rank,
            world_size=world_size,
            input_sha256=sha256_file(path),
            limits=limits,
        )
    finally:
        if collecting:
            gc.enable()


def _era(x: Extracted, described: list[Described], rpc_keys: set[str]) -> str:
    if x.n_rpc_with_metadata:
        if "Rank" in rpc_keys:
            return "nccl-metadata-2025 (record_param_comms with Rank, Process Group Name)"
        if "Process Group Name" in rpc_keys:
            return "nccl-metadata-2024 (record_param_comms with Process Group Name)"
        if "Process Group ID" in rpc_keys:
            return "nccl-metadata-early-2024 (record_param_comms with Process Group ID)"
        return "nccl-metadata (record_param_comms with Collective name)"
    if x.n_rpc:
        return "nccl-no-metadata (record_param_comms without args; sizes from c10d op and nccl: annotation shapes)"
    if x.work or any(a.name.startswith("gloo:") for d in described for a in d.call.annotations):
        return "gloo (no record_param_comms; c10d op + gloo: work annotation)"
    if any(d.call.annotations for d in described):
        return "annotations-only"
    if described:
        return "c10d-ops-only"
    return "no-collectives"


def _time_base(doc: dict, x: Extracted, file: str) -> tuple[int, str]:
    base = doc.get("baseTimeNanoseconds")
    starts = [c.start_ns for c in x.calls]
    absolute = [s > ABSOLUTE_US_THRESHOLD_NS for s in starts]
    if base is not None:
        if isinstance(base, bool) or not isinstance(base, int) or base < 0:
            raise ImportRefused(
                "baseTimeNanoseconds is not a non-negative integer",
                file=file,
                field="baseTimeNanoseconds",
            )
        if any(absolute):
            call = x.calls[absolute.index(True)]
            raise ImportRefused(
                "ts is absolute epoch time (> 1e15 us) although baseTimeNanoseconds is present",
                file=file,
                record=call.root.index,
                field="ts",
            )
        return base, f"absolute: baseTimeNanoseconds {base} + relative ts"
    if any(absolute) and not all(absolute):
        call = x.calls[absolute.index(not absolute[0])]
        raise ImportRefused(
            "ts mixes absolute epoch (> 1e15 us) and relative values",
            file=file,
            record=call.root.index,
            field="ts",
        )
    if starts and all(absolute):
        return 0, "absolute: epoch microseconds in ts (no baseTimeNanoseconds)"
    return 0, "relative to an unknown origin (no baseTimeNanoseconds, ts < 1e15 us)"


def convert(
    doc: dict[str, Any],
    *,
    file: str,
    rank: int | None = None,
    world_size: int | None = None,
    input_sha256: str | None = None,
    limits: Limits | None = None,
) -> dict:
    """Convert a parsed Kineto document (from ``load_kineto``) to a trace document.
    ``rank`` / ``world_size`` (``--rank`` / ``--world-size``) stand in for an absent
    ``distributedInfo.rank`` / ``world_size`` and are refused when they contradict it.
    A trace with no collective at all is refused first ("no collectives found")."""
    dist = doc.get("distributedInfo")
    if dist is None:
        dist = {}
    if not isinstance(dist, dict):
        raise ImportRefused("distributedInfo is not an object", file=file, field="distributedInfo")
    x = extract(doc["traceEvents"], file)
    if not x.calls:
        raise ImportRefused(
            "no collectives found: no torch.distributed collective or send/recv in the trace; "
            "profile the part of the run that communicates (after init_process_group)",
            file=file,
            field="traceEvents",
        )
    trace_rank = _int_or_none(dist.get("rank")) if not isinstance(dist.get("rank"), str) else None
    if rank is not None and trace_rank is not None and rank != trace_rank:
        raise ImportRefused(
            f"--rank {rank} contradicts distributedInfo.rank {trace_rank}",
            file=file,
            field="distributedInfo.rank",
        )
    rank = trace_rank if rank is None else rank
    if rank is None or rank < 0:
        raise ImportRefused(
            "rank unknown: distributedInfo.rank is absent; pass --rank",
            file=file,
            field="distributedInfo.rank",
        )
    world = dist.get("world_size")
    if world is None and world_size is not None:
        world = world_size
    elif world_size is not None and world != world_size:
        raise ImportRefused(
            f"--world-size {world_size} contradicts distributedInfo.world_size {world!r}",
            file=file,
            field="distributedInfo.world_size",
        )
    if isinstance(world, bool) or not isinstance(world, int) or world < 1:
        raise ImportRefused(
            "world size unknown: distributedInfo.world_size is absent or not a positive "
            "integer; pass --world-size",
            file=file,
            field="distributedInfo.world_size",
        )
    if rank >= world:
        raise ImportRefused(
            f"rank {rank} outside world_size {world}", file=file, field="distributedInfo.rank"
        )
    max_ranks = (limits or current_limits()).max_ranks
    if world > max_ranks:
        raise ResourceLimitExceeded(
            f"world_size {world} is over max_ranks={max_ranks}",
            file=file,
            field="distributedInfo.world_size",
        )
    groups = pg_config_groups(dist, world, file)
    has_pg_config = "pg_config" in dist

    offset_ns, time_base = _time_base(doc, x, file)
    described = [describe(c, file) for c in x.calls]
    for d in described:  # NCCL evidence present: no gloo work to wait for
        if (
            d.call.rpc is not None
            or d.call.kernels
            or any(a.name.startswith("nccl:") for a in d.call.annotations)
        ):
            d.work_name = None
    unpaired = pair_work(described, x.work)
    for d in described:
        finalize(d, file)
        # list-form reduce_scatter: one gloo:all_reduce per rank of the group
        if d.work_many and not d.is_async and d.call.work:
            d.group_size_hints.add(len(d.call.work))

    resolved: dict[int, str] = {}
    for d in described:
        if d.group_name is not None:
            resolved[id(d.call)] = group_from_metadata(d, groups, world, file).id
    resolved.update(resolve_by_evidence(described, groups, rank, has_pg_config))
    identities = local_identities(described, resolved, groups, rank)

    host = doc.get("host_name") if isinstance(doc.get("host_name"), str) else None
    events, stats = _events(described, resolved, groups, rank, offset_ns, file)
    rpc_keys = {k for c in x.calls if c.rpc is not None for k in c.rpc.args}
    era = _era(x, described, rpc_keys)
    linked = {id(k) for c in x.calls for k in c.kernels}
    unlinked = sum(1 for ks in x.kernels_by_ext.values() for k in ks if id(k) not in linked)
    unlinked += x.n_kernels - sum(len(ks) for ks in x.kernels_by_ext.values())

    name = Path(file).name
    notes = _notes(
        rank=rank,
        stats=stats,
        era=era,
        time_base=time_base,
        n_wait=x.n_wait_filtered,
        unpaired=unpaired,
        unlinked=unlinked,
        has_pg_config=has_pg_config,
    )
    meta: dict[str, Any] = {
        "world_size": world,
        "source": f"kineto:{name} (rank {rank}, host {host or 'unknown'})",
        "clock_domains": [
            {
                "id": f"{host or 'unknown-host'}/rank{rank}",
                "ranks": [rank],
                "host": host or "unknown-host",
            }
        ],
        "notes": notes,
        "kineto": {
            "importer": f"tracecanary {__version__} import-kineto",
            "input": name,
            "era": era,
            "backend": dist.get("backend") if isinstance(dist.get("backend"), str) else None,
            "time_base": time_base,
            "trace_events": x.n_events,
            "collectives": len(events),
            "ops": dict(sorted(Counter(e["op"] for e in events).items())),
            "custom_ops": dict(sorted(stats["custom"].items())),
            "unknown_groups": dict(sorted(stats["unknown"].items())),
            "latency_measured": stats["latency"],
            "wait_records_filtered": x.n_wait_filtered,
            "gloo_work_unpaired": unpaired,
            "nccl_kernels_unlinked": unlinked,
        },
    }
    if input_sha256 is not None:
        meta["kineto"]["input_sha256"] = input_sha256
    if isinstance(dist.get("pg_count"), int):
        meta["kineto"]["pg_count"] = dist["pg_count"]
    evidence = _pg_evidence(described, identities, stats["seq_by_index"], offset_ns)
    if evidence:
        meta["kineto"][PG_EVIDENCE_KEY] = evidence
    group_threads = _group_threads(described, resolved)
    if group_threads:
        meta["kineto"][GROUP_THREADS_KEY] = group_threads
    if stats["unfilled"]:
        meta["kineto"][UNFILLED_KEY] = [
            {"seq": stats["seq_by_index"][index], "elements": n} for index, n in stats["unfilled"]
        ]
    declared = [groups[g].declaration() for g in sorted(groups, key=_group_sort_key)]
    return {"format": FORMAT, "meta": meta, "groups": declared, "events": events}


def _pg_evidence(
    described: list[Described],
    identities: dict[int, tuple[str, list[str]]],
    seq_by_index: dict[int, int],
    offset_ns: int,
) -> dict:
    """``meta.kineto.pg_evidence`` (see ``tracecanary.kineto.evidence``)."""
    found_by: dict[str, list[tuple[int, int | None]]] = {}
    out: dict[str, dict] = {}
    for d in described:
        found = identities.get(id(d.call))
        if found is None:
            continue
        identity, candidates = found
        out.setdefault(identity, {"candidates": list(candidates)})
        end = offset_ns + max(w.end_ns for w in d.call.work) if d.call.work else None
        found_by.setdefault(identity, []).append((seq_by_index[d.index], end))
    for identity, entry in out.items():
        rows = sorted(found_by[identity], key=lambda r: r[0])
        entry["seq"] = [seq for seq, _ in rows]
        entry["work_end_ns"] = [end for _, end in rows]
    return dict(sorted(out.items()))


def _group_threads(described: list[Described], resolved: dict[int, str]) -> dict:
    """``meta.kineto.group_threads`` (see ``tracecanary.kineto.evidence``): the numeric
    gloo run-loop thread ids that ran each known group's collective work (send/recv work
    runs on the calling thread and says nothing about the group's run-loop threads)."""
    out: dict[str, set[int]] = {}
    for d in described:
        gid = resolved[id(d.call)]
        if gid.startswith("unknown:") or d.op in P2P or not d.call.work:
            continue
        tids = [str(w.tid) for w in d.call.work]
        if all(t.isdigit() for t in tids):
            out.setdefault(gid, set()).update(int(t) for t in tids)
    return {g: sorted(out[g]) for g in sorted(out, key=_group_sort_key)}


def _group_sort_key(gid: str) -> tuple:
    return (0, int(gid), "") if gid.isdigit() else (1, 0, gid)


def _events(
    described: list[Described],
    resolved: dict[int, str],
    groups: dict[str, Group],
    rank: int,
    offset_ns: int,
    file: str,
) -> tuple[list[dict], dict]:
    rows = []
    custom: Counter = Counter()
    unknown: Counter = Counter()
    latency = {"nccl_kernel": 0, "gloo_work": 0, "none": 0}
    peers_unknown = roots_unknown = barrier_dtype_unrecorded = 0
    unfilled: list[tuple[int, int]] = []  # (trace event index, elements)
    for d in described:
        gid = resolved[id(d.call)]
        group = groups.get(gid)
        size = d.bytes_
        elements = recorded_elements(d) if size is None and d.dtype is None else None
        if elements is not None and d.op in FILLABLE_OPS:
            # a non-root member records shapes but no dtype: merge fills it from the
            # other members of the same collective (never guessed here)
            d.dtype, size = UNRECORDED_DTYPE, 0
            unfilled.append((d.index, elements))
        if size is None:
            raise ImportRefused(
                f"sizes missing for {d.op}: no In/Out msg nelems, no recorded shapes and dtype "
                "on the c10d op, its nccl:/gloo: annotation or its work (was record_shapes off?)",
                file=file,
                record=d.index,
                field="args.Input Dims",
            )
        if d.dtype is None:
            if d.op != "barrier":
                raise ImportRefused(
                    "dtype not recorded in any layer (record_param_comms, kernel args, c10d op "
                    "Input type, annotation Input type, kernel name)",
                    file=file,
                    record=d.index,
                    field="args.Input type",
                )
            d.dtype = "uint8"  # a barrier carries no payload; counted in the notes
            barrier_dtype_unrecorded += 1
        if d.times_group:
            n = len(group.ranks) if group is not None else None
            if n is None and len(d.group_size_hints) == 1:
                n = next(iter(d.group_size_hints))
            if n is None:
                raise ImportRefused(
                    f"sizes missing for {d.op}: only one side of the list-form call is "
                    f"recorded and its group ({gid}) and group size are unknown",
                    file=file,
                    record=d.index,
                    field="args.Input Dims",
                )
            size *= n
        if size >= 2**63:
            raise ImportRefused(
                f"payload of {size} bytes does not fit a 64-bit integer",
                file=file,
                record=d.index,
                field="args.In msg nelems",
            )
        ev: dict[str, Any] = {
            "rank": rank,
            "op": d.op,
            "bytes": size,
            "dtype": d.dtype,
            "group": gid,
            "ts_ns": offset_ns + d.call.start_ns,
        }
        ev.update(split_elements(d, len(group.ranks) if group is not None else None, file))
        if not 0 <= ev["ts_ns"] < 2**63:
            raise ImportRefused(
                "timestamp outside 0..2^63 ns", file=file, record=d.index, field="ts"
            )
        if d.op in ROOTED:
            if d.root_group_rank is not None and group is not None:
                if not 0 <= d.root_group_rank < len(group.ranks):
                    raise ImportRefused(
                        f"root group rank {d.root_group_rank} outside group {gid!r}",
                        file=file,
                        record=d.index,
                        field="args.Concrete Inputs",
                    )
                ev["root"] = group.ranks[d.root_group_rank]
            else:
                roots_unknown += 1
        if d.op in P2P:
            peer = d.peer_global
            if peer is None and d.peer_group_rank is not None:
                if group is not None:
                    if not 0 <= d.peer_group_rank < len(group.ranks):
                        raise ImportRefused(
                            f"peer group rank {d.peer_group_rank} outside group {gid!r}",
                            file=file,
                            record=d.index,
                            field="args.Concrete Inputs",
                        )
                    peer = group.ranks[d.peer_group_rank]
                else:  # the peer may be certain even when the group is not
                    mapped = {
                        g.ranks[d.peer_group_rank]
                        for g in groups.values()
                        if _consistent(d, g, rank)
                    }
                    if len(mapped) == 1:
                        peer = mapped.pop()
            if peer is not None:
                ev["peer"] = peer
            else:
                peers_unknown += 1
        stream, lat, how = _timing(d, gid)
        if stream is not None:
            ev["stream"] = stream
        if lat is not None:
            if lat >= 2**63:
                raise ImportRefused(
                    "measured duration does not fit a 64-bit integer",
                    file=file,
                    record=d.index,
                    field="dur",
                )
            ev["latency_ns"] = lat
        latency[how] += 1
        if not d.mapped:
            custom[f"{d.op} (from {d.raw_name}, {d.op_from})"] += 1
        if gid.startswith("unknown:"):
            unknown[gid] += 1
        rows.append((ev["ts_ns"], d.index, ev))
    rows.sort(key=lambda r: (r[0], r[1]))
    events = []
    seq_by_index: dict[int, int] = {}
    for seq, (_, index, ev) in enumerate(rows):
        ev["seq"] = seq
        seq_by_index[index] = seq
        events.append(ev)
    stats = {
        "custom": custom,
        "unknown": unknown,
        "latency": latency,
        "peers_unknown": peers_unknown,
        "roots_unknown": roots_unknown,
        "barrier_dtype_unrecorded": barrier_dtype_unrecorded,
        "unfilled": unfilled,
        "seq_by_index": seq_by_index,
    }
    return events, stats


def _timing(d: Described, gid: str) -> tuple[str | None, int | None, str]:
    """(stream, latency_ns, source) of a call of group ``gid``: an NCCL kernel's CUDA
    stream, or for gloo work the process group (``gloo_stream``; the run-loop thread is
    evidence, ``_group_threads``, not structure)."""
    if d.call.kernels:
        ks = d.call.kernels
        k = ks[0]
        device = k.args.get("device", k.pid)
        stream_id = k.args.get("stream", k.tid)
        lat = max(x.end_ns for x in ks) - min(x.start_ns for x in ks)
        return f"cuda:{device}/stream:{stream_id}", lat, "nccl_kernel"
    if d.call.work:
        ws = d.call.work
        lat = max(w.end_ns for w in ws) - min(w.start_ns for w in ws)
        return gloo_stream(gid), lat, "gloo_work"
    return None, None, "none"


def _notes(
    *,
    rank: int,
    stats: dict,
    era: str,
    time_base: str,
    n_wait: int,
    unpaired: int,
    unlinked: int,
    has_pg_config: bool,
) -> list[str]:
    lat = stats["latency"]
    notes = [
        f"Imported from a PyTorch profiler (Kineto) trace of rank {rank}: observational and "
        "single-rank. No cross-rank skew, no compute overlap and no exposed latency were "
        "invented: events carry no arrival_ns, no overlap_ns and no skew; ts_ns is the CPU "
        "issue time (start of the c10d op, or of the first communication record) on this "
        "rank's clock.",
        "latency_ns is what the trace measured and nothing else: the NCCL kernel duration on "
        f"its GPU stream ({lat['nccl_kernel']} events), or the gloo work duration, i.e. the "
        "gloo:<op> annotation on the process group's run-loop thread (send/recv: on the "
        "calling thread), which includes waiting for peers "
        f"({lat['gloo_work']} events); absent where no kernel or work was recorded "
        f"({lat['none']} events).",
        f"Kineto format era (detected from keys): {era}.",
        f"Time base: {time_base}.",
    ]
    if stats["custom"]:
        listed = "; ".join(f"{k} x{v}" for k, v in sorted(stats["custom"].items()))
        notes.append(f"Custom ops (no trace-op mapping; kept, not relabelled): {listed}.")
    else:
        notes.append("Custom ops: none (every collective mapped to a trace op).")
    if stats["unknown"]:
        listed = "; ".join(f"{k} x{v}" for k, v in sorted(stats["unknown"].items()))
        notes.append(
            f"Unknown groups: {listed}. The process group of these events could not be "
            "established from evidence in the trace"
            + ("" if has_pg_config else " (no distributedInfo.pg_config)")
            + "; the groups are not declared, so ingest refuses them by name; merge "
            "resolves them only where the other ranks' traces determine them (cross-rank "
            f"matching of meta.kineto.{PG_EVIDENCE_KEY}) or a --groups mapping settles them."
        )
    else:
        notes.append("Groups: every collective's process group is known from the trace.")
    if stats["unfilled"]:
        notes.append(
            f"{len(stats['unfilled'])} non-root scatter/gather events record shapes but no "
            f"dtype: written as dtype {UNRECORDED_DTYPE!r} with 0 bytes and listed in "
            f"meta.kineto.{UNFILLED_KEY}; merge takes the dtype from the other members of "
            "the same collective."
        )
    if stats["roots_unknown"]:
        notes.append(f"Root rank unknown for {stats['roots_unknown']} broadcast/reduce events.")
    if stats["barrier_dtype_unrecorded"]:
        notes.append(
            f"{stats['barrier_dtype_unrecorded']} barriers record no dtype; written as uint8 "
            "with 0 bytes (a barrier carries no payload)."
        )
    if stats["peers_unknown"]:
        notes.append(f"Peer rank unknown for {stats['peers_unknown']} send/recv events.")
    if n_wait:
        notes.append(
            f"Filtered: {n_wait} record_param_comms 'wait' records (work.wait(), not collectives)."
        )
    if unpaired:
        notes.append(
            f"Not imported: {unpaired} gloo work annotations with no issuing c10d op in the "
            "trace (outside the profiled window, or recorded shapes that disagree)."
        )
    if unlinked:
        notes.append(
            f"{unlinked} NCCL kernels are not linked to a CPU call by External id; their "
            "durations are not used."
        )
    return notes
