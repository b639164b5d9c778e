"""Export a program to PARAM comms-replay "basic" traces (one file per rank).

Target: facebookresearch/param ``train/comms/pt/commsTraceReplay.py`` (trace type
``basic``) at commit 1e115ff; the facts used are in ../shared/param-basic-format.md.

Guarantees of ``export_param``:
- ``DIR/<rank>.json`` for every global rank: a JSON list in issue order; ``init``
  entries first, identical and in the same order on every rank; then one entry per
  occurrence the rank takes part in (a point-to-point occurrence appears as a matched
  ``send`` and ``recv`` pair on both of its ranks, global ``src_rank``/``dst_rank``,
  ``use_batch: false``);
- sizes in elements of the entry's dtype (PARAM dtype names), ``world_size`` = the size
  of the entry's process group, ``in_split``/``out_split`` present on all_to_all (empty)
  and on ``all_to_allv`` (an occurrence with a send matrix: each rank's own row and
  column of it, in the group's rank order, its sizes their totals),
  ``startTime_ns`` cumulative from program start (non-decreasing), a unique marker
  ``canary:<occ>`` per occurrence plus ``weight:<w>`` and ``phase:<name>``;
- an op with no PARAM equivalent (``custom:*``) or a size that is not a whole number of
  elements fails the export (ExportRefused, exit 2, naming op and occurrence, no files)
  unless ``skip_unsupported``, which skips it and lists it in ``export.json``;
- with ``target="param-1e115ff"`` (``tracecanary.param.target``) the files are written
  for upstream PARAM: each send/recv pair on an explicit two-rank process group (an
  ``init`` entry per pair, after the collective groups), and an op upstream would
  mis-execute is refused (or skipped and listed) with ``upstream_refusal``'s reason;
  ``export.json`` then says ``target``. The default target writes exactly what it wrote
  before targets existed.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import numpy as np

from tracecanary.canonical import atomic_output, canonical_json_bytes
from tracecanary.errors import ExportRefused
from tracecanary.formats.ids import PARAM_EXPORT_FORMAT
from tracecanary.formats.vocab import OPS
from tracecanary.param.dtypes import export_dtype
from tracecanary.param.target import (
    DEFAULT_TARGET,
    PARAM_COMMIT,
    UPSTREAM_REPLAYER,
    UPSTREAM_TARGET,
    UpstreamGroups,
    check_target,
    upstream_refusal,
)
from tracecanary.program import SPLITS_COLUMN, Program

# every plain op; a point-to-point occurrence is its send (exported as a send/recv pair)
PARAM_OPS = frozenset(OPS) - {"recv"}


def _member_ranks(program: Program) -> dict[int, list[int]]:
    """Occurrence id -> the ranks of its member rows, in row order (read through the
    Program's accessors: a canary's expansion, held as column arrays, needs no pandas)."""
    occ = program.member_column("occ", np.int64)
    rank = program.member_column("rank", np.int64)
    if not len(occ):
        return {}
    order = np.argsort(occ, kind="stable")
    occ, rank = occ[order], rank[order]
    starts = np.flatnonzero(np.diff(occ)) + 1
    keys = occ[np.r_[0, starts]].tolist()
    return {o: ranks.tolist() for o, ranks in zip(keys, np.split(rank, starts), strict=True)}


def _group_table(program: Program, members: dict[int, list[int]]) -> dict[str, list[int]]:
    """Collective group id -> member ranks (from the occurrences' members, ``members`` as
    ``_member_ranks`` gives them), in first-use order."""
    groups: dict[str, list[int]] = {}
    for gid, o in zip(
        program.column("group").tolist(), program.column("occ").tolist(), strict=True
    ):
        if gid.startswith("p2p:") or gid in groups:
            continue
        groups[gid] = sorted(members.get(o, ()))
    return groups


def _pair_group(groups: dict[str, list[int]], src: int, dst: int) -> str:
    """The two-rank group of a send/recv pair (created on first use, after the others)."""
    low, high = sorted((src, dst))
    name = f"pair:{low},{high}"
    groups.setdefault(name, [low, high])
    return name


def _upstream_reason(
    op: str, gid: str, groups: dict, root: int, ranks: list, tracker: UpstreamGroups
) -> str | None:
    """Why upstream PARAM would mis-execute this occurrence on one of its ranks, or None."""
    if op == "send":
        return None  # transformed: written on its own two-rank group
    members = tuple(groups[gid])
    for r in ranks:
        reason = upstream_refusal(op, members, root, tracker.previous(int(r)))
        if reason is not None:
            return f"{op} for target {UPSTREAM_TARGET}: {reason}"
    return None


def _all_to_allv_entries(
    matrix: str, group: list[int], dtype: str, pg: int, markers: list[str]
) -> dict[int, dict]:
    """Global rank -> its ``all_to_allv`` entry for the send matrix ``matrix``
    (``program.SPLITS_COLUMN``: members in ascending rank order): ``in_split`` its row and
    ``out_split`` its column, each reordered to the group's rank order (PARAM's), sizes
    their totals, in elements."""
    rows = [[int(v) for v in row.split(",")] for row in matrix.split(";")]
    index = {r: k for k, r in enumerate(sorted(group))}
    entries = {}
    for r in group:
        in_split = [rows[index[r]][index[peer]] for peer in group]
        out_split = [rows[index[peer]][index[r]] for peer in group]
        entries[int(r)] = {
            "comms": "all_to_allv",
            "in_msg_size": sum(in_split),
            "out_msg_size": sum(out_split),
            "in_split": in_split,
            "out_split": out_split,
            "dtype": dtype,
            "world_size": len(group),
            "pg_id": pg,
            "markers": markers,
        }
    return entries


def _refused_field(op: str, reason: str) -> str:
    if reason.startswith("op "):
        return "op"
    if reason.startswith("dtype "):
        return "dtype"
    return "root" if op == "reduce" else "group"


def _sizes(op: str, nbytes: int, element: int, n: int, occ: int) -> tuple[int, int]:
    if nbytes % element:
        raise ExportRefused(
            f"{nbytes} bytes is not a whole number of {element}-byte elements",
            record=f"occurrence {occ}",
            field="bytes",
        )
    count = nbytes // element
    if op == "all_gather":
        if count % n:
            raise ExportRefused(
                f"all_gather of {count} elements over {n} ranks is uneven",
                record=f"occurrence {occ}",
                field="bytes",
            )
        return count // n, count
    if op == "reduce_scatter":
        if count % n:
            raise ExportRefused(
                f"reduce_scatter of {count} elements over {n} ranks is uneven",
                record=f"occurrence {occ}",
                field="bytes",
            )
        return count, count // n
    if op == "all_to_all" and count % n:
        raise ExportRefused(
            f"all_to_all of {count} elements over {n} ranks is uneven",
            record=f"occurrence {occ}",
            field="bytes",
        )
    return count, count


def export_param(
    program: Program,
    out_dir: str | os.PathLike,
    *,
    execution: str,
    source_digest: str | None,
    skip_unsupported: bool = False,
    target: str = DEFAULT_TARGET,
) -> dict:
    """Write the per-rank PARAM files and ``export.json`` atomically; return the summary."""
    upstream = check_target(target) == UPSTREAM_TARGET
    members = _member_ranks(program)
    groups = _group_table(program, members)
    pg_id = {gid: i for i, gid in enumerate(groups)}
    world = program.world_size
    tracker = UpstreamGroups(world)
    per_rank: dict[int, list[dict]] = {r: [] for r in range(world)}
    start = program.issue_ns()
    if len(start) and start.min() < 0:  # canonical order's signed gaps: start at 0
        start = start - start.min()
    group_size = program.column("group_size")
    skipped: list[dict] = []
    counts: Counter[str] = Counter()
    columns = [
        program.column(c)
        for c in ("occ", "op", "bytes", "dtype", "group", "root", "phase", "weight")
    ]
    splits = (
        program.column(SPLITS_COLUMN, object)
        if SPLITS_COLUMN in program.column_names
        else np.full(program.n, "", dtype=object)
    )
    for i, (o, op, nbytes, dtype, gid, root, phase, weight) in enumerate(
        zip(*columns, strict=True)
    ):
        o = int(o)
        ranks = members.get(o, [])
        reason = None
        if op not in PARAM_OPS:
            reason = f"op {op} has no PARAM equivalent"
        elif export_dtype(dtype) is None and op != "barrier":
            reason = f"dtype {dtype} has no PARAM equivalent"
        elif upstream:
            reason = _upstream_reason(str(op), gid, groups, int(root), ranks, tracker)
        if reason:
            if not skip_unsupported:
                raise ExportRefused(
                    f"{reason} (use --skip-unsupported to skip and list it)",
                    record=f"occurrence {o}",
                    field=_refused_field(str(op), reason),
                )
            skipped.append({"occ": o, "op": str(op), "dtype": str(dtype), "reason": reason})
            continue
        markers = [f"canary:{o}", f"weight:{float(weight)!r}"] + (
            [f"phase:{phase}"] if phase else []
        )
        counts["all_to_allv" if splits[i] else str(op)] += 1
        if op == "send":
            src, dst = (int(x) for x in gid[len("p2p:") :].split("->"))
            info = export_dtype(dtype)
            size, _ = _sizes("send", int(nbytes), info.element_bytes, 2, o)
            pair = None
            if upstream:
                pair = _pair_group(groups, src, dst)
                pg_id.setdefault(pair, len(pg_id))
                for r in (src, dst):
                    tracker.executed(r, "send", tuple(groups[pair]))
            for comms in ("send", "recv"):
                entry = {
                    "comms": comms,
                    "in_msg_size": size,
                    "out_msg_size": size,
                    "dtype": info.param_name,
                    "src_rank": src,
                    "dst_rank": dst,
                    "use_batch": False,
                    "world_size": world,
                    "markers": markers,
                    "startTime_ns": int(start[i]),
                }
                if pair is not None:
                    entry.update(pg_id=pg_id[pair], world_size=2)
                per_rank[src].append(entry)
                per_rank[dst].append(entry)
            continue
        n = len(groups[gid])
        if len(ranks) != int(group_size[i]):
            raise ExportRefused(
                f"group {gid} has {int(group_size[i])} ranks but only {len(ranks)} were captured; a replay needs every member",
                record=f"occurrence {o}",
                field="group",
            )
        if splits[i]:  # an all_to_allv: each member's own sizes and splits
            info = export_dtype(dtype)
            for r, entry in _all_to_allv_entries(
                str(splits[i]), groups[gid], info.param_name, pg_id[gid], markers
            ).items():
                per_rank[r].append({**entry, "startTime_ns": int(start[i])})
                tracker.executed(r, "all_to_allv", tuple(groups[gid]))
            continue
        entry = {
            "comms": str(op),
            "world_size": n,
            "pg_id": pg_id[gid],
            "markers": markers,
            "startTime_ns": int(start[i]),
        }
        if op != "barrier":
            info = export_dtype(dtype)
            in_size, out_size = _sizes(str(op), int(nbytes), info.element_bytes, n, o)
            entry.update(in_msg_size=in_size, out_msg_size=out_size, dtype=info.param_name)
        if op == "all_to_all":
            entry.update(in_split=[], out_split=[])
        if op in ("broadcast", "reduce") and root >= 0:
            entry["root"] = int(root)
        for r in ranks:
            per_rank[int(r)].append(entry)
            tracker.executed(int(r), str(op), tuple(groups[gid]))
    inits = [
        {"comms": "init", "pg_id": pg_id[g], "global_ranks": ranks, "world_size": len(ranks)}
        for g, ranks in groups.items()
    ]
    per_rank = {r: inits + entries for r, entries in per_rank.items()}
    summary = {
        "format": PARAM_EXPORT_FORMAT,
        "param": {
            "repository": "facebookresearch/param",
            "commit": PARAM_COMMIT,
            "replayer": UPSTREAM_REPLAYER,
            "trace_type": "basic",
        },
        "execution": execution,
        "source_sha256": source_digest,
        "world_size": world,
        "process_groups": [
            {"pg_id": pg_id[g], "group": g, "global_ranks": r} for g, r in groups.items()
        ],
        "counts_per_op": dict(sorted(counts.items())),
        "entries_per_rank": {str(r): len(v) - len(inits) for r, v in per_rank.items()},
        "occurrences_exported": int(sum(counts.values())),
        "weight_total": float(np.sum(program.column("weight"))),
        "skipped": skipped,
    }
    if upstream:
        summary["target"] = target
    with atomic_output(out_dir, directory=True) as tmp:
        for rank, entries in per_rank.items():
            (Path(tmp) / f"{rank}.json").write_bytes(canonical_json_bytes(entries))
        (Path(tmp) / "export.json").write_bytes(canonical_json_bytes(summary))
    return summary
