"""Read and validate a PARAM "basic" program directory for physical replay.

Input contract (written by ``tracecanary export-param``): ``DIR/<rank>.json`` for every
global rank ``0..n-1``, each a JSON list in issue order. ``init`` entries come first and
are identical on every rank; then op entries with sizes in ELEMENTS of ``dtype`` (PARAM
dtype names), ``world_size`` = size of the op's group, ``pg_id`` (absent = the default
world group), ``root`` (global rank) where meaningful, ``in_split``/``out_split`` on
all_to_all(v), ``src_rank``/``dst_rank`` (global) and ``use_batch: false`` on send/recv,
optional ``startTime_ns`` (cumulative ns from program start) and ``markers``, whose
first element is ``canary:<occ>`` (the join key); ``weight:<float>`` and
``phase:<name>`` may follow.

Guarantees: every refusal is an ``InputError`` naming the file, the entry index
(``record``) and the field; nothing is defaulted silently except what PARAM itself
defaults (an absent ``root`` is the group's first member, PARAM's root 0; an absent
``pg_id`` is the world group). The sizes are checked against PARAM's tensor layout (see
../shared/param-basic-format.md §3), so a file that passes here is laid out the same
way for PARAM and for our replayer. Across ranks, the collectives of every group appear
in the same order with the same signature on all members, all_to_allv splits agree
pairwise, and every executed send has its matching executed recv; a program that
would hang or mis-size a collective is refused before any process is launched.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tracecanary.errors import InputError, ResourceLimitExceeded
from tracecanary.limits import current_limits, load_json
from tracecanary.param.dtypes import GLOO_UNSUPPORTED, PARAM_DTYPES

OP_KINDS = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "all_to_allv",
    "broadcast",
    "reduce",
    "barrier",
    "send",
    "recv",
)
P2P_KINDS = frozenset({"send", "recv"})
ROOTED_KINDS = frozenset({"broadcast", "reduce"})

# PARAM's paramToCommName: lowercase, strip non-letters, then alias. Only names whose
# PARAM tensor layout equals one of our kinds are accepted.
_ALIASES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "allgatherbase": "all_gather",
    "reducescatter": "reduce_scatter",
    "reducescatterbase": "reduce_scatter",
    "alltoall": "all_to_all",
    "alltoallsingle": "all_to_all",
    "alltoallv": "all_to_allv",
    "alltoallbase": "all_to_allv",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "barrier": "barrier",
    "send": "send",
    "recv": "recv",
    "init": "init",
    "wait": "wait",
}

_CANARY_MARKER = re.compile(r"^canary:(\d+)$")
_RANK_FILE = re.compile(r"^(\d+)\.json$")

MAX_FILE_BYTES = 1 << 31  # 2 GiB per rank file: beyond that, refuse rather than swap
MAX_INT = 1 << 62  # any integer field: int64 arithmetic on it cannot wrap

OP_COLUMNS = (
    "entry",
    "op",
    "in_elems",
    "out_elems",
    "dtype",
    "group_size",
    "pg_id",
    "root",
    "src_rank",
    "dst_rank",
    "in_split",
    "out_split",
    "start_time_ns",
    "occ",
    "marker",
    "weight",
    "phase",
    "executes",
    "bytes",
)


@dataclass(frozen=True)
class ProcessGroupSpec:
    """One ``init`` entry: a process group by id and its global ranks (in file order)."""

    pg_id: int
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class RankProgram:
    """One rank's file, validated.

    ``ops`` has one row per op entry (``init`` and ``wait`` excluded) in file order with
    the columns in ``OP_COLUMNS``: ``entry`` (index in the file's list), ``op`` (kind),
    ``in_elems``/``out_elems`` (elements), ``dtype`` (PARAM name, "" for barrier),
    ``group_size`` (-1 where not given), ``pg_id`` (-1 = world), ``root``/``src_rank``/
    ``dst_rank`` (global ranks, -1 where not meaningful), ``in_split``/``out_split``
    (tuples or None), ``start_time_ns`` (-1 when absent), ``occ``, ``marker``, ``weight``
    (1.0 default), ``phase`` ("" default), ``executes`` (this rank issues it), ``bytes``
    (nccl-tests size convention: the total buffer, e.g. all_gather output).
    """

    path: str
    rank: int
    world_size: int
    groups: tuple[ProcessGroupSpec, ...]
    ops: pd.DataFrame

    def members(self, pg_id: int) -> tuple[int, ...]:
        """Global ranks of a group id (-1 = world)."""
        if pg_id < 0:
            return tuple(range(self.world_size))
        for g in self.groups:
            if g.pg_id == pg_id:
                return g.ranks
        raise KeyError(pg_id)

    def executed(self) -> pd.DataFrame:
        return self.ops[self.ops["executes"]].reset_index(drop=True)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_json_list(path: Path) -> list:
    """The JSON list in ``path``; refuses non-lists, NaN/Infinity and files over the
    resource policy (``tracecanary.limits``: size, nesting depth)."""
    limits = current_limits()
    size = path.stat().st_size if path.is_file() else 0
    if size > min(MAX_FILE_BYTES, limits.max_file_bytes):
        raise ResourceLimitExceeded(f"file is {size} bytes, limit {MAX_FILE_BYTES}", file=str(path))
    doc = load_json(path, limits)
    if not isinstance(doc, list):
        raise InputError("expected a JSON list of PARAM entries", file=str(path))
    return doc


def _parse_markers(entry: dict, where: dict) -> tuple[int, str, float, str]:
    markers = entry.get("markers")
    if not isinstance(markers, list) or not markers or not all(isinstance(m, str) for m in markers):
        raise InputError(
            "expected a non-empty list of strings whose first is canary:<occ>",
            field="markers",
            **where,
        )
    match = _CANARY_MARKER.match(markers[0])
    if match is None:
        raise InputError(
            f"first marker {markers[0]!r} is not canary:<occ> (the join key)",
            field="markers",
            **where,
        )
    weight = 1.0
    phase = ""
    for m in markers[1:]:
        if m.startswith("weight:"):
            try:
                weight = float(m[len("weight:") :])
            except ValueError:
                weight = math.nan
            if not math.isfinite(weight) or weight <= 0:
                raise InputError(
                    f"marker {m!r}: weight must be a finite number > 0", field="markers", **where
                )
        elif m.startswith("phase:"):
            phase = m[len("phase:") :]
    occ = int(match.group(1)) if len(match.group(1)) <= 19 else MAX_INT + 1
    if occ > MAX_INT:
        raise ResourceLimitExceeded(
            f"occurrence {markers[0][:40]!r} is over {MAX_INT}", field="markers", **where
        )
    return occ, markers[0], weight, phase


def _int_field(entry: dict, key: str, where: dict, *, minimum: int = 0) -> int:
    value = entry.get(key)
    if not _is_int(value) or value < minimum:
        raise InputError(
            f"expected an integer >= {minimum}, got {value!r}"[:200], field=key, **where
        )
    if value > MAX_INT:
        raise ResourceLimitExceeded(f"{value} is over {MAX_INT} (int64-safe)", field=key, **where)
    return value


def _splits(entry: dict, key: str, where: dict, group_size: int, total: int) -> tuple | None:
    value = entry.get(key)
    if value is None or value == []:
        return None
    if (
        not isinstance(value, list)
        or len(value) != group_size
        or not all(_is_int(v) and v >= 0 for v in value)
    ):
        raise InputError(
            f"expected {group_size} non-negative integers (one per group member)",
            field=key,
            **where,
        )
    if sum(value) != total:
        raise InputError(f"splits sum to {sum(value)}, expected {total}", field=key, **where)
    return tuple(value)


def normalize_op_name(name: str) -> str | None:
    """PARAM's name normalisation (lowercase, letters only, aliases); None if unsupported."""
    return _ALIASES.get(re.sub(r"[^a-z]", "", name.lower()))


def _nccl_tests_bytes(op: str, in_elems: int, out_elems: int, element_bytes: int) -> int:
    if op == "barrier":
        return 0
    if op == "all_gather":
        return out_elems * element_bytes
    return in_elems * element_bytes


def _parse_init(entry: dict, where: dict, world_size: int, known: dict) -> ProcessGroupSpec:
    """An ``init`` entry: a new pg_id and its distinct global ranks."""
    pg_id = _int_field(entry, "pg_id", where)
    ranks = entry.get("global_ranks")
    if (
        not isinstance(ranks, list)
        or not ranks
        or not all(_is_int(r) and 0 <= r < world_size for r in ranks)
        or len(set(ranks)) != len(ranks)
    ):
        raise InputError(
            f"expected distinct global ranks in [0, {world_size})",
            field="global_ranks",
            **where,
        )
    if pg_id in known:
        raise InputError(f"pg_id {pg_id} declared twice", field="pg_id", **where)
    if entry.get("world_size") != len(ranks):
        raise InputError(
            f"world_size must equal len(global_ranks) = {len(ranks)}",
            field="world_size",
            **where,
        )
    # torch's new_group orders members by global rank: group rank = sorted position
    return ProcessGroupSpec(pg_id, tuple(sorted(ranks)))


def _parse_group(
    entry: dict, op: str, where: dict, group_members: dict, world_size: int
) -> tuple[int, tuple[int, ...], int]:
    """``(pg_id, members, group_size)``: -1 = the world group; group_size -1 where absent."""
    pg_id = -1
    if "pg_id" in entry:
        pg_id = _int_field(entry, "pg_id", where)
        if pg_id not in group_members:
            raise InputError(f"pg_id {pg_id} has no init entry", field="pg_id", **where)
    members = group_members[pg_id] if pg_id >= 0 else tuple(range(world_size))
    group_size = -1
    if op not in P2P_KINDS or "world_size" in entry:
        group_size = _int_field(entry, "world_size", where, minimum=1)
        if op not in P2P_KINDS and group_size != len(members):
            raise InputError(
                f"world_size {group_size} != size of the op's group ({len(members)})",
                field="world_size",
                **where,
            )
    return pg_id, members, group_size


def _parse_sizes(
    entry: dict, op: str, where: dict, backend: str | None, limits
) -> tuple[int, int, str, int]:
    """``(in_elems, out_elems, dtype, element_bytes)``; a barrier has none (0, 0, "", 0)."""
    if op == "barrier":
        return 0, 0, "", 0
    in_elems = _int_field(entry, "in_msg_size", where)
    out_elems = _int_field(entry, "out_msg_size", where)
    dtype = entry.get("dtype")
    info = PARAM_DTYPES.get(dtype) if isinstance(dtype, str) else None
    if info is None:
        raise InputError(
            f"unknown dtype {dtype!r} (PARAM names: {', '.join(sorted(PARAM_DTYPES))})",
            field="dtype",
            **where,
        )
    if backend == "gloo" and info.canonical in GLOO_UNSUPPORTED:
        raise InputError(
            f"dtype {dtype!r} is not supported by the gloo backend", field="dtype", **where
        )
    for key, elems in (("in_msg_size", in_elems), ("out_msg_size", out_elems)):
        limits.check(
            "max_message_bytes",
            elems * info.element_bytes,
            what=f"{key} x {info.element_bytes} bytes",
            field=key,
            **where,
        )
    return in_elems, out_elems, dtype, info.element_bytes


def _check_layout(
    entry: dict, op: str, where: dict, ws: int, in_elems: int, out_elems: int
) -> tuple[tuple | None, tuple | None]:
    """PARAM's tensor layout of the op (sizes and splits); returns all_to_allv's splits."""
    in_split = out_split = None
    if op in ("all_reduce", "broadcast", "reduce", "send", "recv") and out_elems != in_elems:
        raise InputError(
            f"{op} is in place: out_msg_size must equal in_msg_size ({in_elems})",
            field="out_msg_size",
            **where,
        )
    if op == "all_gather" and out_elems != in_elems * ws:
        raise InputError(
            f"all_gather: out_msg_size must be in_msg_size x world_size = {in_elems * ws}",
            field="out_msg_size",
            **where,
        )
    if op == "reduce_scatter" and in_elems != out_elems * ws:
        raise InputError(
            f"reduce_scatter: in_msg_size must be out_msg_size x world_size = {out_elems * ws}",
            field="in_msg_size",
            **where,
        )
    if op in ("all_to_all", "all_to_allv"):
        if "in_split" not in entry or "out_split" not in entry:
            missing = "in_split" if "in_split" not in entry else "out_split"
            raise InputError(
                f"{op} needs in_split and out_split (PARAM's parser requires both keys)",
                field=missing,
                **where,
            )
    if op == "all_to_all":
        if in_elems != out_elems or in_elems % ws:
            raise InputError(
                f"all_to_all: in_msg_size must equal out_msg_size and divide by {ws}",
                field="in_msg_size",
                **where,
            )
        for key in ("in_split", "out_split"):
            split = _splits(entry, key, where, ws, in_elems)
            if split is not None and len(set(split)) != 1:
                raise InputError(
                    "all_to_all has equal splits (use all_to_allv)", field=key, **where
                )
    if op == "all_to_allv":
        in_split = _splits(entry, "in_split", where, ws, in_elems)
        out_split = _splits(entry, "out_split", where, ws, out_elems)
        if in_split is None or out_split is None:
            if in_elems % ws or out_elems % ws:
                raise InputError(
                    "all_to_allv without splits needs sizes divisible by world_size",
                    field="in_split" if in_split is None else "out_split",
                    **where,
                )
            in_split = in_split or tuple([in_elems // ws] * ws)
            out_split = out_split or tuple([out_elems // ws] * ws)
    return in_split, out_split


def _parse_root(entry: dict, where: dict, members: tuple[int, ...]) -> int:
    """A broadcast/reduce root (global rank): given and a member, else the first member."""
    if "root" not in entry:
        return members[0]
    root = _int_field(entry, "root", where)
    if root not in members:
        raise InputError(
            f"root {root} (a global rank) is not a member of the group {list(members)}",
            field="root",
            **where,
        )
    return root


def _parse_p2p(entry: dict, where: dict, world_size: int) -> tuple[int, int]:
    """``(src_rank, dst_rank)`` of a send/recv, distinct global ranks, ``use_batch: false``."""
    src = _int_field(entry, "src_rank", where)
    dst = _int_field(entry, "dst_rank", where)
    for key, value in (("src_rank", src), ("dst_rank", dst)):
        if value >= world_size:
            raise InputError(f"{value} is not a global rank < {world_size}", field=key, **where)
    if src == dst:
        raise InputError("src_rank equals dst_rank", field="dst_rank", **where)
    if "use_batch" not in entry:
        raise InputError(
            "required on send/recv (PARAM's parsers read it)", field="use_batch", **where
        )
    if entry["use_batch"] is not False:
        raise InputError(
            "only use_batch: false is replayable (PARAM's batched p2p is broken)",
            field="use_batch",
            **where,
        )
    return src, dst


def _parse_start(entry: dict, where: dict, last_start_ns: int, limits) -> int:
    """``startTime_ns`` (-1 when absent), never below the previous entry's."""
    if "startTime_ns" not in entry:
        return -1
    start_ns = _int_field(entry, "startTime_ns", where)
    limits.check("max_time_ns", start_ns, field="startTime_ns", **where)
    if start_ns < last_start_ns:
        raise InputError(
            f"startTime_ns {start_ns} < previous {last_start_ns}: timestamps are "
            "cumulative from program start and never decrease",
            field="startTime_ns",
            **where,
        )
    return start_ns


_COLUMN_TYPES = {
    "entry": np.int64,
    "in_elems": np.int64,
    "out_elems": np.int64,
    "group_size": np.int64,
    "pg_id": np.int64,
    "root": np.int64,
    "src_rank": np.int64,
    "dst_rank": np.int64,
    "start_time_ns": np.int64,
    "occ": np.int64,
    "weight": np.float64,
    "executes": bool,
    "bytes": np.int64,
}


def _ops_frame(cols: dict[str, list]) -> pd.DataFrame:
    """The ``OP_COLUMNS`` table: numeric columns typed, the others Python objects."""
    return pd.DataFrame(
        {
            c: np.asarray(cols[c], dtype=_COLUMN_TYPES[c])
            if c in _COLUMN_TYPES
            else pd.Series(cols[c], dtype=object)
            for c in OP_COLUMNS
        }
    )


def _parse_op(
    entry: dict, op: str, where: dict, rank: int, world_size: int, group_members: dict, ctx
) -> dict:
    """One op entry as a row of ``OP_COLUMNS`` (every field checked, see the module doc)."""
    backend, limits, last_start_ns = ctx
    occ, marker, weight, phase = _parse_markers(entry, where)
    pg_id, members, group_size = _parse_group(entry, op, where, group_members, world_size)
    in_elems, out_elems, dtype, element_bytes = _parse_sizes(entry, op, where, backend, limits)
    in_split, out_split = _check_layout(entry, op, where, len(members), in_elems, out_elems)
    root = _parse_root(entry, where, members) if op in ROOTED_KINDS else -1
    src, dst = _parse_p2p(entry, where, world_size) if op in P2P_KINDS else (-1, -1)
    start_ns = _parse_start(entry, where, last_start_ns, limits)
    if op == "send":
        executes = src == rank
    elif op == "recv":
        executes = dst == rank
    else:
        executes = rank in members
    return {
        "entry": where["record"],
        "op": op,
        "in_elems": in_elems,
        "out_elems": out_elems,
        "dtype": dtype,
        "group_size": group_size,
        "pg_id": pg_id,
        "root": root,
        "src_rank": src,
        "dst_rank": dst,
        "in_split": in_split,
        "out_split": out_split,
        "start_time_ns": start_ns,
        "occ": occ,
        "marker": marker,
        "weight": weight,
        "phase": phase,
        "executes": executes,
        "bytes": _nccl_tests_bytes(op, in_elems, out_elems, element_bytes),
    }


def parse_rank_file(
    path: str | Path, rank: int, world_size: int, *, backend: str | None = None
) -> RankProgram:
    """Validate one rank's file (entry by entry; see the module docstring)."""
    path = Path(path)
    doc = read_json_list(path)
    file = str(path)
    limits = current_limits()
    limits.check("max_events", len(doc), what="entries", file=file)
    groups: list[ProcessGroupSpec] = []
    group_members: dict[int, tuple[int, ...]] = {}
    cols: dict[str, list] = {c: [] for c in OP_COLUMNS}
    seen_op = False
    last_start_ns = -1
    for index, entry in enumerate(doc):
        where = {"file": file, "record": index}
        if not isinstance(entry, dict):
            raise InputError("entry is not a JSON object", **where)
        raw = entry.get("comms")
        if not isinstance(raw, str):
            raise InputError("expected an op name", field="comms", **where)
        op = normalize_op_name(raw)
        if op is None:
            raise InputError(
                f"unsupported op {raw!r} (supported: init, wait, {', '.join(OP_KINDS)})",
                field="comms",
                **where,
            )
        if op == "init":
            if seen_op:
                raise InputError("init entry after the first op entry", field="comms", **where)
            spec = _parse_init(entry, where, world_size, group_members)
            groups.append(spec)
            group_members[spec.pg_id] = spec.ranks
            continue
        seen_op = True
        if op == "wait":
            continue  # PARAM skips wait entries in (always) blocking replay; so do we
        row = _parse_op(
            entry, op, where, rank, world_size, group_members, (backend, limits, last_start_ns)
        )
        if row["start_time_ns"] >= 0:
            last_start_ns = row["start_time_ns"]
        for key in OP_COLUMNS:
            cols[key].append(row[key])
    ops = _ops_frame(cols)
    _refuse_executed_twice(ops, file, rank)
    return RankProgram(file, rank, world_size, tuple(groups), ops)


def _refuse_executed_twice(ops: pd.DataFrame, file: str, rank: int) -> None:
    executed = ops[ops["executes"]]
    dup = executed["occ"].duplicated(keep="first")
    if dup.any():
        row = executed[dup].iloc[0]
        raise InputError(
            f"occurrence {int(row['occ'])} is executed twice on rank {rank}: canary markers "
            "are unique per occurrence",
            file=file,
            record=int(row["entry"]),
            field="markers",
        )


def rank_files(directory: str | Path) -> list[Path]:
    """``DIR/<rank>.json`` for ranks ``0..n-1``, refusing gaps and an empty directory."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError("not a directory (expected DIR/<rank>.json files)", file=str(directory))
    found: dict[int, Path] = {}
    for p in directory.iterdir():
        m = _RANK_FILE.match(p.name)
        if m:
            found[int(m.group(1))] = p
    if not found:
        raise InputError("no <rank>.json files", file=str(directory))
    n = len(found)
    missing = sorted(set(range(n)) - set(found))
    if missing:
        raise InputError(
            f"rank files are not 0..{n - 1}: missing {missing[:5]}", file=str(directory)
        )
    return [found[r] for r in range(n)]


def _py(value: object) -> object:
    return value.item() if isinstance(value, np.generic) else value


_SIGNATURE = ("op", "in_elems", "out_elems", "dtype", "root", "occ")


def check_consistency(programs: list[RankProgram]) -> None:
    """Cross-rank checks (init lists, per-group sequences, all_to_allv splits, p2p pairs)."""
    world_size = len(programs)
    first = programs[0]
    for prog in programs[1:]:
        if prog.groups != first.groups:
            k = next(
                (
                    i
                    for i, (a, b) in enumerate(zip(prog.groups, first.groups, strict=False))
                    if a != b
                ),
                min(len(prog.groups), len(first.groups)),
            )
            raise InputError(
                f"init entries differ from {first.path}'s (they must be identical on every rank)",
                file=prog.path,
                record=k,
                field="global_ranks",
            )

    # Per group label (each label is its own communicator), the members must issue the
    # same collectives in the same order with the same signature.
    labels: dict[int, tuple[int, ...]] = {-1: tuple(range(world_size))}
    for g in first.groups:
        labels[g.pg_id] = g.ranks
    for pg_id, members in labels.items():
        sequences = []
        for r in members:
            ops = programs[r].ops
            sel = ops[ops["executes"] & (ops["pg_id"] == pg_id) & ~ops["op"].isin(P2P_KINDS)]
            sequences.append((r, sel.reset_index(drop=True)))
        r0, ref = sequences[0]
        for r, seq in sequences[1:]:
            if len(seq) != len(ref):
                raise InputError(
                    f"group {pg_id if pg_id >= 0 else 'world'}: rank {r} issues {len(seq)} "
                    f"collectives but rank {r0} issues {len(ref)}",
                    file=programs[r].path,
                    field="comms",
                )
            vary = (
                seq["op"] == "all_to_allv"
            ).to_numpy()  # sizes differ per rank: splits checked below
            for column in _SIGNATURE:
                a, b = seq[column].to_numpy(), ref[column].to_numpy()
                differs = a != b
                if column in ("in_elems", "out_elems"):
                    differs &= ~vary
                diff = np.flatnonzero(differs)
                if diff.size:
                    i = int(diff[0])
                    field = {"op": "comms", "in_elems": "in_msg_size", "out_elems": "out_msg_size"}
                    raise InputError(
                        f"collective #{i} of group {pg_id if pg_id >= 0 else 'world'} differs "
                        f"from rank {r0}'s ({column}: {_py(seq[column].iloc[i])!r} vs "
                        f"{_py(ref[column].iloc[i])!r})",
                        file=programs[r].path,
                        record=int(seq["entry"].iloc[i]),
                        field=field.get(column, "markers" if column == "occ" else column),
                    )
        a2av = [(r, seq[seq["op"] == "all_to_allv"].reset_index(drop=True)) for r, seq in sequences]
        if a2av and len(a2av[0][1]):
            for k in range(len(a2av[0][1])):
                for g, (r, seq) in enumerate(a2av):
                    in_split = seq["in_split"].iloc[k]
                    for h, (r2, seq2) in enumerate(a2av):
                        if in_split[h] != seq2["out_split"].iloc[k][g]:
                            raise InputError(
                                f"all_to_allv: rank {r} sends {in_split[h]} elements to rank "
                                f"{r2}, which expects {seq2['out_split'].iloc[k][g]}",
                                file=programs[r].path,
                                record=int(seq["entry"].iloc[k]),
                                field="in_split",
                            )

    # Point-to-point: per (src, dst) channel, executed sends and recvs pair up in order.
    sends: dict[tuple[int, int], pd.DataFrame] = {}
    recvs: dict[tuple[int, int], pd.DataFrame] = {}
    for prog in programs:
        ops = prog.ops[prog.ops["executes"]]
        for (src, dst), sel in ops[ops["op"] == "send"].groupby(["src_rank", "dst_rank"]):
            sends[(int(src), int(dst))] = sel.reset_index(drop=True)
        for (src, dst), sel in ops[ops["op"] == "recv"].groupby(["src_rank", "dst_rank"]):
            recvs[(int(src), int(dst))] = sel.reset_index(drop=True)
    for channel in sorted(set(sends) | set(recvs)):
        s = sends.get(channel)
        r = recvs.get(channel)
        ns = 0 if s is None else len(s)
        nr = 0 if r is None else len(r)
        src, dst = channel
        if ns != nr:
            side, prog = (s, programs[src]) if ns > nr else (r, programs[dst])
            extra = side.iloc[min(ns, nr)]
            raise InputError(
                f"send/recv {src}->{dst}: {ns} sends on rank {src} but {nr} recvs on rank {dst}",
                file=prog.path,
                record=int(extra["entry"]),
                field="comms",
            )
        for column, field in (("in_elems", "in_msg_size"), ("dtype", "dtype")):
            diff = np.flatnonzero(s[column].to_numpy() != r[column].to_numpy())
            if diff.size:
                i = int(diff[0])
                raise InputError(
                    f"recv #{i} of {src}->{dst} does not match its send ({column}: "
                    f"{_py(r[column].iloc[i])!r} vs {_py(s[column].iloc[i])!r})",
                    file=programs[dst].path,
                    record=int(r["entry"].iloc[i]),
                    field=field,
                )


def load_program_dir(directory: str | Path, *, backend: str | None = None) -> list[RankProgram]:
    """Every rank's validated program plus the cross-rank checks; index = global rank."""
    files = rank_files(directory)
    world_size = len(files)
    programs = [parse_rank_file(p, r, world_size, backend=backend) for r, p in enumerate(files)]
    check_consistency(programs)
    return programs
