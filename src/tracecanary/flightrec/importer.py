"""A set of per-rank Flight Recorder dumps of one run, imported as per-rank native traces.

Guarantees of ``import_dumps``:
- one ``tracecanary.trace/v1`` document per rank, in rank order, for ``tracecanary merge``;
  every recorded collective becomes one event, in the rank's record order (``seq``);
- observational: ``ts_ns`` is the entry's ``time_created_ns`` (when the work was
  enqueued, on this rank's clock); ``latency_ns`` only from a recorded ``duration_ms``
  (NCCL with timing on; gloo records none), otherwise absent; no arrival, overlap or
  skew is written, so merge leaves skew unknown unless a calibration relates the clocks;
- groups: membership by global ranks from ``pg_config`` where the dump records it
  (NCCL); torch 2.13's gloo recorder keeps only a placeholder there, so a group's members
  are then the ranks whose dumps record its collectives (the default group: every rank),
  and ``meta.flight_recorder.membership`` says which;
- collectives are matched across ranks by (process group, ``collective_seq_id``): every
  member records the same numbers with the same op, dtype and bytes;
- refused (``ImportRefused``, exit 2, one line naming the file, the entry index and the
  field), nothing returned: a rank of the world with no dump, two dumps of one rank,
  dumps of different runs (torch versions, ``pg_config``, a group's description, a
  collective that differs between members, members that recorded different numbers of
  collectives), a wrapped ring buffer (``record_id`` not starting at 0: raise
  ``TORCH_FR_BUFFER_SIZE``), gaps in a group's ``collective_seq_id``/``op_id`` (an
  operation the recorder did not record: torch 2.13's gloo records no send/recv),
  point-to-point and coalesced records, an op or dtype outside the vocabulary, an
  all_to_all whose input and output sizes differ, and (what a dump cannot show) a
  broadcast/reduce without a declared root or an all_to_all without declared even
  splits.

Op names map onto ``tracecanary.formats.vocab`` through the Kineto import's spelling
table (``tracecanary.kineto.vocab``: gloo/nccl annotation names are the profiling names
the recorder keeps); dtypes are c10 ScalarType names, mapped the same way.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

from tracecanary import __version__
from tracecanary.canonical import atomic_output
from tracecanary.errors import ImportRefused
from tracecanary.flightrec.load import Dump, Entry, load_dump
from tracecanary.formats.ids import TRACE_FORMAT
from tracecanary.formats.vocab import COLLECTIVES, DTYPE_BYTES, ROOTED_OPS
from tracecanary.kineto.evidence import gloo_stream
from tracecanary.kineto.vocab import dtype_from_scalar_type, normalize_op
from tracecanary.limits import Limits, current_limits
from tracecanary.trace_io import write_trace

BUFFER_ENV = "TORCH_FR_BUFFER_SIZE"
BUFFER_DEFAULT = 2000
BACKENDS = ("gloo", "nccl")
KEPT_CUSTOM = ("custom:scatter", "custom:gather")
"""c10d collectives with no trace op of their own, kept under ``custom:`` as the Kineto
import keeps them."""
BARRIER_DTYPE = "uint8"  # a barrier records no tensor; 0 bytes, as the Kineto import writes
META_KEY = "flight_recorder"


def import_dumps(
    paths: Sequence[str | os.PathLike],
    *,
    world_size: int | None = None,
    declared_root: int | None = None,
    declared_even_all_to_all: bool = False,
    limits: Limits | None = None,
) -> list[dict]:
    """Per-rank native traces of the dumps ``paths`` (see module docstring).

    ``declared_root``: the group rank every broadcast/reduce was rooted at, as the user
    declares it (a dump records no root, and a native trace needs one); without it such
    a collective is refused. ``declared_even_all_to_all``: the user declares that every
    all_to_all split its buffers evenly (a dump records no split sizes); without it an
    all_to_all is refused. The notes say what was declared, not recorded."""
    limits = limits or current_limits()
    if not paths:
        raise ImportRefused("no dumps given")
    dumps = _ranked([load_dump(p, limits) for p in paths], world_size, limits)
    _same_run(dumps)
    declared = _declared_groups(dumps)
    events = {d.rank: _events(d, declared_even_all_to_all) for d in dumps}
    members = _members(dumps, events, declared)
    _match(dumps, events, members)
    _roots(dumps, events, members, declared_root)
    world = len(dumps)
    said = {"declared_root": declared_root, "declared_even_all_to_all": declared_even_all_to_all}
    return [_document(d, events[d.rank], members, declared, world, **said) for d in dumps]


def write_imported(
    paths: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    *,
    world_size: int | None = None,
    declared_root: int | None = None,
    declared_even_all_to_all: bool = False,
) -> list[dict]:
    """Import ``paths`` and write ``out_dir/rank<r>.json`` for every rank, atomically (all
    or nothing); return the documents."""
    docs = import_dumps(
        paths,
        world_size=world_size,
        declared_root=declared_root,
        declared_even_all_to_all=declared_even_all_to_all,
    )
    with atomic_output(out_dir, directory=True) as tmp:
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the result is a plain directory
        for rank, doc in enumerate(docs):
            write_trace(doc, Path(tmp) / f"rank{rank}.json")
    return docs


def _ranked(dumps: list[Dump], world_size: int | None, limits: Limits) -> list[Dump]:
    by_rank: dict[int, Dump] = {}
    for d in dumps:
        if d.rank in by_rank:
            raise ImportRefused(
                f"rank {d.rank} is also the rank of {by_rank[d.rank].file}", file=d.file
            )
        by_rank[d.rank] = d
    # without --world-size the world reaches the highest rank, so a gap is a missing rank
    world = world_size if world_size is not None else max(by_rank) + 1
    limits.check("max_ranks", world, what="world size (highest rank + 1)", file=dumps[0].file)
    for d in dumps:
        if d.rank >= world:
            raise ImportRefused(
                f"rank {d.rank} is outside a world of {world} ranks (--world-size)",
                file=d.file,
            )
    missing = [r for r in range(world) if r not in by_rank]
    if missing:
        raise ImportRefused(
            f"rank {missing[0]}: no dump ({len(missing)} of {world} ranks missing: "
            f"{', '.join(map(str, missing[:8]))}); every rank's dump is needed",
            file=dumps[0].file,
        )
    return [by_rank[r] for r in range(world)]


def _same_run(dumps: list[Dump]) -> None:
    first = dumps[0]
    for d in dumps[1:]:
        for key in ("version", "comm_lib_version"):
            if getattr(d, key) != getattr(first, key):
                raise ImportRefused(
                    f"{getattr(d, key)!r} here but {getattr(first, key)!r} in {first.file}: "
                    "dumps of different runs",
                    file=d.file,
                    field=key,
                )


def _declared_groups(dumps: list[Dump]) -> dict[str, tuple[str, tuple[int, ...]]]:
    """pg_name -> (description, global ranks) from every dump's ``pg_config``; the gloo
    placeholder (an entry with no name and no ranks) declares nothing."""
    declared: dict[str, tuple[str, tuple[int, ...]]] = {}
    origin: dict[str, str] = {}
    for d in dumps:
        for key, value in d.pg_config.items():
            field = f"pg_config.{key}"
            if not isinstance(value, dict):
                raise ImportRefused("must be an object", file=d.file, field=field)
            ranks = _ranks(value.get("ranks"), file=d.file, field=f"{field}.ranks")
            if not ranks and not key and not value.get("name"):
                continue  # torch 2.13 gloo: a placeholder, no membership recorded
            if not ranks:
                raise ImportRefused("a group with no ranks", file=d.file, field=f"{field}.ranks")
            desc = value.get("desc", "")
            if not isinstance(desc, str):
                raise ImportRefused("must be a string", file=d.file, field=f"{field}.desc")
            if key in declared and declared[key] != (desc, ranks):
                raise ImportRefused(
                    f"group {key!r} is {desc!r} {list(ranks)} here but {declared[key][0]!r} "
                    f"{list(declared[key][1])} in {origin[key]}: dumps of different runs",
                    file=d.file,
                    field=field,
                )
            declared[key], origin[key] = (desc, ranks), d.file
    world = len(dumps)
    for name, (_, ranks) in sorted(declared.items()):
        beyond = [r for r in ranks if r >= world]
        if beyond:
            raise ImportRefused(
                f"rank {beyond[0]}: no dump, but pg_config names it a member of group "
                f"{name!r}; every rank's dump is needed",
                file=origin[name],
                field=f"pg_config.{name}.ranks",
            )
    return declared


def _ranks(value, *, file: str, field: str) -> tuple[int, ...]:
    """A ``ranks`` value: a list of ints, or its text (``"[0, 1]"``, as torch writes it)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            value = None
    if not isinstance(value, list) or not all(type(r) is int and r >= 0 for r in value):
        raise ImportRefused("must be a list of global ranks", file=file, field=field)
    if len(set(value)) != len(value):
        raise ImportRefused("a rank is listed twice", file=file, field=field)
    return tuple(sorted(value))


def _refuse(d: Dump, e: Entry, field: str, message: str) -> ImportRefused:
    return ImportRefused(message, file=d.file, record=e.index, field=field)


def _events(d: Dump, even_all_to_all: bool) -> list[tuple[Entry, dict]]:
    """(entry, event without seq) per collective entry, checked on this rank alone."""
    out = []
    desc_of: dict[str, str] = {}
    last_seq: dict[str, int] = defaultdict(int)
    last_op: dict[str, int] = defaultdict(int)
    for i, e in enumerate(d.entries):
        if i == 0 and e.record_id != 0:
            raise _refuse(
                d,
                e,
                "record_id",
                f"the first record is record_id {e.record_id}, not 0: the ring buffer "
                f"wrapped and the run's first {e.record_id} records were overwritten; "
                f"rerun with {BUFFER_ENV} (default {BUFFER_DEFAULT}) above the number of "
                "operations the run issues",
            )
        if e.record_id != i:
            raise _refuse(
                d,
                e,
                "record_id",
                f"record_id {e.record_id} where {i} was expected: records are missing "
                f"(a truncated buffer; raise {BUFFER_ENV})",
            )
        if desc_of.setdefault(e.pg_name, e.pg_desc) != e.pg_desc:
            raise _refuse(
                d,
                e,
                "process_group",
                f"group {e.pg_name!r} is {e.pg_desc!r} here but {desc_of[e.pg_name]!r} "
                "earlier in this dump",
            )
        if e.is_p2p:
            raise _refuse(
                d,
                e,
                "is_p2p",
                f"point-to-point record {e.profiling_name!r}: send/recv records are not "
                "imported (their peer is not a field of the dump)",
            )
        if e.op_id != last_op[e.pg_name] + 1:
            before = last_op[e.pg_name]
            raise _refuse(
                d,
                e,
                "op_id",
                f"group {e.pg_name!r} op_id {e.op_id} follows op_id {before}: op_id "
                f"{before + 1} has no record. The recorder did not record an operation "
                "(torch 2.13's gloo records no send/recv), so this dump cannot account "
                "for the run",
            )
        last_op[e.pg_name] = e.op_id
        if e.collective_seq_id != last_seq[e.pg_name] + 1:
            before = last_seq[e.pg_name]
            what = (
                "repeats: a coalesced group (not imported)"
                if e.collective_seq_id == before
                else f"follows {before}: collectives are missing (a truncated buffer; "
                f"raise {BUFFER_ENV})"
            )
            raise _refuse(
                d,
                e,
                "collective_seq_id",
                f"group {e.pg_name!r} collective_seq_id {e.collective_seq_id} {what}",
            )
        last_seq[e.pg_name] = e.collective_seq_id
        out.append((e, _event(d, e, even_all_to_all)))
    return out


def _event(d: Dump, e: Entry, even_all_to_all: bool) -> dict:
    backend, _, bare = e.profiling_name.partition(":")
    op, mapped = normalize_op(e.profiling_name)
    if (
        backend not in BACKENDS
        or not bare
        or not ((mapped and (op in COLLECTIVES or op == "barrier")) or op in KEPT_CUSTOM)
    ):
        raise _refuse(
            d,
            e,
            "profiling_name",
            f"unknown op {e.profiling_name!r}: not a gloo:/nccl: collective this import "
            f"maps ({', '.join(COLLECTIVES)}, barrier, scatter, gather)",
        )
    names = set(e.input_dtypes) | set(e.output_dtypes)
    if len(names) > 1:
        raise _refuse(d, e, "input_dtypes", f"several dtypes in one collective: {sorted(names)}")
    if not names:
        if op != "barrier":
            raise _refuse(d, e, "input_sizes", f"{e.profiling_name} records no tensor")
        dtype = BARRIER_DTYPE
    else:
        name = names.pop()
        mapped_dtype = dtype_from_scalar_type(name)
        if mapped_dtype is None:
            raise _refuse(d, e, "input_dtypes", f"unsupported dtype {name!r}")
        dtype = mapped_dtype
    n_in = sum(_numel(s) for s in e.input_sizes)
    n_out = sum(_numel(s) for s in e.output_sizes)
    if op in ("all_reduce", "broadcast", "reduce") and n_in != n_out:
        raise _refuse(
            d,
            e,
            "output_sizes",
            f"{op} with {n_in} input and {n_out} output elements",
        )
    if op == "all_to_all" and n_in != n_out:
        raise _refuse(
            d,
            e,
            "output_sizes",
            f"uneven all_to_all ({n_in} elements sent, {n_out} received): the dump records "
            "no split sizes, so the per-peer traffic is unknown",
        )
    if op == "all_to_all" and not even_all_to_all:
        raise _refuse(
            d,
            e,
            "input_sizes",
            "all_to_all: a dump records no split sizes (an uneven all_to_all_single with "
            "equal totals records the same shapes as an even one); if every all_to_all of "
            "the run split its buffers evenly, declare it (--declare-even-all-to-all)",
        )
    elements = {
        "all_gather": n_out,
        "custom:scatter": n_out,
        "barrier": 0,
    }.get(op, n_in)
    event = {
        "rank": d.rank,
        "op": op,
        "bytes": elements * DTYPE_BYTES[dtype],
        "dtype": dtype,
        "group": e.pg_name,
    }
    if backend == "gloo":
        event["stream"] = gloo_stream(e.pg_name)
    if e.time_created_ns is not None:
        event["ts_ns"] = e.time_created_ns
    if e.duration_ms is not None:
        event["latency_ns"] = round(e.duration_ms * 1_000_000)
    return event


def _numel(shape: list[int]) -> int:
    n = 1
    for dim in shape:
        n *= dim
    return n


def _members(
    dumps: list[Dump],
    events: dict[int, list[tuple[Entry, dict]]],
    declared: dict[str, tuple[str, tuple[int, ...]]],
) -> dict[str, tuple[str, tuple[int, ...]]]:
    """pg_name -> (description, members) of every group an event names."""
    seen: dict[str, set[int]] = defaultdict(set)
    desc: dict[str, tuple[str, str]] = {}
    for d in dumps:
        for e, _ in events[d.rank]:
            seen[e.pg_name].add(d.rank)
            if desc.setdefault(e.pg_name, (e.pg_desc, d.file))[0] != e.pg_desc:
                raise _refuse(
                    d,
                    e,
                    "process_group",
                    f"group {e.pg_name!r} is {e.pg_desc!r} here but "
                    f"{desc[e.pg_name][0]!r} in {desc[e.pg_name][1]}: dumps of different runs",
                )
    world = tuple(range(len(dumps)))
    out = {}
    for name, ranks in seen.items():
        if name in declared:
            members = declared[name][1]
            outside = sorted(ranks - set(members))
            if outside:
                d = dumps[outside[0]]
                e = next(e for e, _ in events[d.rank] if e.pg_name == name)
                raise _refuse(
                    d,
                    e,
                    "process_group",
                    f"rank {d.rank} records group {name!r}, which pg_config says has members "
                    f"{list(members)}: dumps of different runs",
                )
        elif desc[name][0] == "default_pg":
            members = world  # the default group is the world
        else:
            members = tuple(sorted(ranks))
        out[name] = (desc[name][0], members)
    return out


def _match(
    dumps: list[Dump],
    events: dict[int, list[tuple[Entry, dict]]],
    members: dict[str, tuple[str, tuple[int, ...]]],
) -> None:
    """Every member of a group records the same collectives, by collective_seq_id."""
    per_group: dict[str, dict[int, list[tuple[Entry, dict]]]] = defaultdict(dict)
    for d in dumps:
        for e, ev in events[d.rank]:
            per_group[e.pg_name].setdefault(d.rank, []).append((e, ev))
    for name, (_, ranks) in sorted(members.items()):
        lists = per_group[name]
        longest = max(ranks, key=lambda r: (len(lists.get(r, [])), -r))
        reference = lists[longest]
        for r in ranks:
            mine = lists.get(r, [])
            d = dumps[r]
            if len(mine) != len(reference):
                if mine:
                    e = mine[-1][0]
                    where = dict(record=e.index, field="collective_seq_id")
                else:
                    where = dict(field="entries")
                raise ImportRefused(
                    f"group {name!r}: this rank recorded {len(mine)} collectives, rank "
                    f"{longest} recorded {len(reference)} (collective_seq_id "
                    f"{len(mine) + 1} is missing here): a collective was in flight or a "
                    "rank hung when the dumps were taken, or the dumps are of different runs",
                    file=d.file,
                    **where,
                )
            for (e, ev), (e0, ev0) in zip(mine, reference, strict=True):
                for key in ("op", "dtype", "bytes"):
                    if ev[key] != ev0[key]:
                        raise _refuse(
                            d,
                            e,
                            "profiling_name"
                            if key == "op"
                            else ("input_dtypes" if key == "dtype" else "input_sizes"),
                            f"group {name!r} collective_seq_id {e.collective_seq_id} is "
                            f"{ev['op']} {ev['bytes']} B {ev['dtype']} here but {ev0['op']} "
                            f"{ev0['bytes']} B {ev0['dtype']} on rank {longest} (record "
                            f"{e0.index}): dumps of different runs, or a desynchronized job",
                        )


def _roots(
    dumps: list[Dump],
    events: dict[int, list[tuple[Entry, dict]]],
    members: dict[str, tuple[str, tuple[int, ...]]],
    declared_root: int | None,
) -> None:
    """Set the declared root (a global rank) on every broadcast/reduce, or refuse."""
    for d in dumps:
        for e, ev in events[d.rank]:
            if ev["op"] not in ROOTED_OPS:
                continue
            ranks = members[e.pg_name][1]
            if declared_root is None:
                raise _refuse(
                    d,
                    e,
                    "profiling_name",
                    f"{ev['op']}: a Flight Recorder dump records no root, and a native trace "
                    "needs one; if every broadcast/reduce of the run was rooted at one group "
                    "rank, declare it (--declare-root K)",
                )
            if declared_root >= len(ranks):
                raise _refuse(
                    d,
                    e,
                    "process_group",
                    f"declared root group rank {declared_root} is outside group "
                    f"{e.pg_name!r} of {len(ranks)} ranks",
                )
            ev["root"] = ranks[declared_root]


def _document(
    d: Dump,
    rank_events: list[tuple[Entry, dict]],
    members: dict[str, tuple[str, tuple[int, ...]]],
    declared: dict[str, tuple[str, tuple[int, ...]]],
    world: int,
    declared_root: int | None,
    declared_even_all_to_all: bool,
) -> dict:
    events = []
    for seq, (_, ev) in enumerate(rank_events):
        events.append({**ev, "seq": seq})
    mine = sorted(name for name, (_, ranks) in members.items() if d.rank in ranks)
    groups = [
        {"id": name, "ranks": list(members[name][1]), "description": members[name][0]}
        for name in mine
    ]
    backends = sorted({e.profiling_name.partition(":")[0] for e, _ in rank_events})
    timed = sum("latency_ns" in ev for _, ev in rank_events)
    ops = Counter(ev["op"] for _, ev in rank_events)
    membership = "pg_config" if all(n in declared for n in mine) else "entries"
    notes = [
        f"Imported from a PyTorch Flight Recorder dump of rank {d.rank} "
        f"({Path(d.file).name}, {d.form}, version {d.version}): observational. ts_ns is "
        "the entry's time_created_ns (when the work was enqueued, on this rank's clock); "
        "no arrival_ns, no overlap_ns and no skew were invented.",
        f"latency_ns is the recorded duration_ms and nothing else ({timed} of "
        f"{len(events)} events); "
        + (
            "gloo records no duration, start or completion time, so latency is unknown."
            if "gloo" in backends
            else "absent where the dump has no duration."
        ),
        "gloo runs a reduce_scatter as an all_reduce and records it so.",
    ]
    rooted = sum(ev["op"] in ROOTED_OPS for _, ev in rank_events)
    exchanges = ops.get("all_to_all", 0)
    if exchanges:
        notes.append(
            f"Even splits declared, not recorded: a dump records no split sizes, so each of "
            f"the {exchanges} all_to_all events is taken to split its buffer evenly, as the "
            "import was told (--declare-even-all-to-all)."
        )
    if rooted:
        notes.append(
            f"Roots declared, not recorded: a dump records no root, so the root of each of "
            f"the {rooted} broadcast/reduce events is group rank {declared_root} of its "
            "group, as the import was told (--declare-root)."
        )
    if membership == "entries":
        notes.append(
            "Group membership: the dumps' pg_config records none (torch 2.13 gloo), so each "
            "group's members are the ranks whose dumps record its collectives (the default "
            "group: every rank); a member that recorded none of them cannot be seen."
        )
    else:
        notes.append("Group membership: from the dumps' pg_config (global ranks).")
    return {
        "format": TRACE_FORMAT,
        "meta": {
            "world_size": world,
            "source": f"tracecanary {__version__} import-flight-recorder {Path(d.file).name}",
            "clock_domains": [{"id": f"rank{d.rank}", "ranks": [d.rank]}],
            "notes": notes,
            META_KEY: {
                "file": Path(d.file).name,
                "sha256": d.sha256,
                "form": d.form,
                "version": d.version,
                "backends": backends,
                "entries": len(d.entries),
                "ops": dict(sorted(ops.items())),
                "latency_events": timed,
                "membership": membership,
                **({"declared_root": declared_root} if rooted else {}),
                **({"declared_even_all_to_all": True} if exchanges else {}),
            },
        },
        "groups": groups,
        "events": events,
    }
