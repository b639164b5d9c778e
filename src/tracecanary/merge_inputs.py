"""What merge checks and settles in its capture set before matching collectives.

Guarantees:
- ``refuse_raw_kineto``: a raw Kineto trace given as a capture is refused naming the
  source kind to use (``kind: kineto``), before any parse error could surface;
- ``refuse_incomplete``: every rank the declared world size implies is supplied by some
  capture (a rank with events, or the rank a Kineto import was made from); otherwise
  ``MergeError`` naming the first missing rank (``rank 3: no capture``), exit 2;
- ``resolve_captures``: when an imported capture hands merge undetermined process groups
  or unrecorded dtypes (``tracecanary.kineto.evidence``), every capture is read, the
  cross-rank resolution (``tracecanary.kineto.crossrank``) rewrites them, and the
  resolved documents are written under ``work_dir`` (never beside the inputs); the
  returned paths replace the inputs for ingest. Captures that hand nothing over are
  passed through untouched;
- ``load_groups_mapping``: a ``tracecanary.groups/v1`` file, validated against its schema;
  one assignment per (rank, identity).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from tracecanary.clocks.calibration import clock_map_from_calibration, load_calibration
from tracecanary.columnar_capture import is_columnar
from tracecanary.errors import InputError, MergeError
from tracecanary.formats.ids import TRACE_FORMAT
from tracecanary.formats.schemas import validate
from tracecanary.ingest import _header_and_batches, is_jsonl
from tracecanary.kineto.crossrank import RankCapture, needs_resolution, resolve_groups
from tracecanary.limits import current_limits, load_json, open_input
from tracecanary.trace_io import write_trace

KINETO_KEYS = re.compile(rb'"(traceEvents|schemaVersion|deviceProperties)"\s*:')
TRACE_MARKER = f'"{TRACE_FORMAT}"'.encode()
PEEK_BYTES = 1 << 16


def refuse_raw_kineto(captures: list[str]) -> None:
    """Refuse a raw PyTorch profiler (Kineto) trace given where a native capture belongs,
    naming the source kind that imports it (one line, exit 2)."""
    for path in captures:
        with open_input(path, current_limits()) as stream:
            head = stream.read(PEEK_BYTES)
        if TRACE_MARKER not in head and KINETO_KEYS.search(head):
            raise InputError(
                "a raw PyTorch profiler (Kineto) trace, not a tracecanary.trace/v1 capture: "
                "use a campaign source of kind: kineto (traces: [...] with a calibration or "
                "same_host: true), or run `tracecanary import-kineto` first",
                file=path,
                field="format",
            )


def supplied_ranks(header: dict, ranks_with_events: set[int]) -> set[int]:
    """Ranks a capture supplies: those with events, plus the rank a Kineto import was
    made from (an imported rank may have issued no collective in the window)."""
    out = set(ranks_with_events)
    meta = header.get("meta", {})
    if meta.get("kineto"):
        for domain in meta.get("clock_domains", []):
            out |= set(domain.get("ranks", []))
    return out


def refuse_incomplete(supplied: dict[str, set[int]], world_size: int, first_path: str) -> None:
    """Refuse a capture set that leaves a rank of the declared world without a capture."""
    have = set().union(*supplied.values()) if supplied else set()
    missing = [r for r in range(world_size) if r not in have]
    if missing:
        shown = ", ".join(map(str, sorted(have))) or "none"
        raise MergeError(
            f"rank {missing[0]}: no capture (world_size {world_size} declared; the captures "
            f"supply rank(s) {shown}"
            + (f"; also missing: {', '.join(map(str, missing[1:]))}" if missing[1:] else "")
            + ")",
            file=first_path,
            record=f"rank {missing[0]}",
            field="meta.world_size",
        )


def load_groups_mapping(path: str | os.PathLike) -> dict[tuple[int, str], str]:
    """(rank, identity) -> group id from a ``tracecanary.groups/v1`` file."""
    doc = load_json(path, current_limits())
    validate(doc, "groups", file=str(path))
    out: dict[tuple[int, str], str] = {}
    for i, a in enumerate(doc["assignments"]):
        key = (a["rank"], a["identity"])
        if key in out:
            raise InputError(
                f"rank {key[0]} {key[1]} is assigned twice",
                file=str(path),
                record=i,
                field="assignments",
            )
        out[key] = a["group"]
    return out


def _clock_map(calibration_path: str | None, docs: dict[str, dict], rank_caps: list):
    if calibration_path is None or not rank_caps:
        return None
    clocks: dict[int, str] = {}
    for doc in docs.values():
        for domain in doc["meta"].get("clock_domains", []):
            for r in domain.get("ranks", []):
                clocks[r] = domain["id"]
    ranks = sorted(c.rank for c in rank_caps)
    for r in ranks:
        clocks.setdefault(r, f"rank{r}")
    world = int(next(iter(docs.values()))["meta"]["world_size"])
    calibration = load_calibration(calibration_path)
    return clock_map_from_calibration(calibration, clocks, ranks, world, file=calibration_path)


def _read_doc(path: str) -> dict:
    if is_jsonl(path) or is_columnar(path):
        header, batches = _header_and_batches(path, current_limits())
        events = []
        for _, batch in batches:
            for row in batch.to_pylist():
                events.append({k: v for k, v in row.items() if v is not None})
        return {**header, "events": events}
    return load_json(path, current_limits())


def resolve_captures(
    captures: list[str],
    headers: dict[str, dict],
    work_dir: Path,
    *,
    calibration_path: str | None = None,
    groups_path: str | None = None,
) -> tuple[list[str], list[str]]:
    """(paths to ingest, notes). See the module docstring. With a calibration, the
    resolution also uses timing evidence on the calibrated timeline."""
    mapping = load_groups_mapping(groups_path) if groups_path is not None else {}
    if not mapping and not any(needs_resolution(h) for h in headers.values()):
        return list(captures), []
    docs = {p: _read_doc(p) for p in captures}
    groups: dict[str, list[int]] = {}
    for doc in docs.values():
        for g in doc["groups"]:
            if "ranks" in g:
                groups.setdefault(g["id"], list(g["ranks"]))
            else:
                groups.setdefault(g["id"], [g["start"] + k * g["stride"] for k in range(g["size"])])
    rank_caps = []
    for path, doc in docs.items():
        ranks = {e["rank"] for e in doc["events"]} | supplied_ranks(doc, set())
        if len(ranks) != 1:
            if needs_resolution(doc):
                raise MergeError(
                    "a capture handing over undetermined groups must hold one rank",
                    file=path,
                    field="meta.kineto",
                )
            continue  # a multi-rank capture: its groups are declared, it constrains nothing
        rank_caps.append(RankCapture(path, ranks.pop(), doc))
    timeline = None
    clock_map = _clock_map(calibration_path, docs, rank_caps)
    if clock_map is not None:

        def to_ref(rank: int, ns: int) -> int:
            return int(clock_map.to_reference(np.array([rank]), np.array([ns], np.int64))[0])

        def uncertainty(rank: int) -> int:
            return int(clock_map.uncertainty_ns[rank])

        timeline = (to_ref, uncertainty)
    notes = resolve_groups(rank_caps, groups, mapping, timeline, groups_path)
    out = []
    work_dir.mkdir(parents=True, exist_ok=True)
    for k, path in enumerate(captures):
        doc = docs[path]
        if not needs_resolution(doc):
            out.append(path)
            continue
        kineto = dict(doc["meta"]["kineto"])
        resolved = {**doc, "meta": {**doc["meta"], "kineto": kineto}}
        resolved["meta"]["notes"] = list(doc["meta"].get("notes", [])) + [
            n for n in notes if n not in doc["meta"].get("notes", [])
        ]
        resolved["meta"]["notes"] = [
            n for n in resolved["meta"]["notes"] if not n.startswith("Unknown groups:")
        ]
        target = work_dir / f"resolved-{k}.json"
        write_trace(resolved, target)
        out.append(str(target))
    return out, notes
