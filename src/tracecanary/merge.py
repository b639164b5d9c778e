"""Merge per-rank captures into one trace, mapping clocks through an explicit calibration.

Guarantees of ``merge_captures``:
- every refusal of ``tracecanary.matching.build_program`` applies (duplicate rank
  contributions, conflicting metadata, partially measured latency, a rank missing a
  collective, unpaired send/recv), plus: a rank contributed by two capture files, and
  a calibration that does not cover a captured rank's clock;
- with a calibration, every timestamp is mapped onto the reference clock and the merged
  trace declares one clock domain, so arrival skew is computed; its uncertainty (the two
  largest per-clock uncertainties added) is recorded in ``meta.skew``;
- without one, clocks are kept as captured and ``meta.skew`` says skew is unknown and
  why; it is never written as zero;
- the output is written atomically, or not at all.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from tracecanary.canonical import sha256_file
from tracecanary.errors import InputError, MergeError
from tracecanary.ingest import _header_and_batches, ingest_files
from tracecanary.limits import current_limits, load_json
from tracecanary.matching import ClockMap, assign_instances, build_program
from tracecanary.formats.schemas import validate
from tracecanary.trace_io import write_trace

OPTIONAL_INT = ("root", "peer", "latency_ns", "overlap_ns", "instance")


MAX_DRIFT_PPB = 1e9  # a clock running at twice (or zero) the reference rate is no clock


def load_calibration(path: str | os.PathLike) -> dict:
    """A ``tracecanary.calibration/v1`` document, parsed under the resource policy and
    validated; offsets, anchors and uncertainties must lie within ``max_time_ns`` and
    drift within 10^9 ppb, so mapping a timestamp cannot overflow."""
    limits = current_limits()
    doc = load_json(path, limits)
    validate(doc, "calibration", file=str(path))
    for i, clock in enumerate(doc["clocks"]):
        for key in ("offset_ns", "anchor_ns", "uncertainty_ns"):
            if key in clock:
                limits.check(
                    "max_time_ns", abs(clock[key]), file=path, record=i, field=f"clocks/{i}/{key}"
                )
        if not abs(clock["drift_ppb"]) <= MAX_DRIFT_PPB:
            raise InputError(
                f"drift_ppb {clock['drift_ppb']} is beyond +-{MAX_DRIFT_PPB:.0e} ppb",
                file=str(path),
                record=i,
                field=f"clocks/{i}/drift_ppb",
            )
    return doc


def _check_mapped(mapped_ns: np.ndarray, rank: np.ndarray, file: str, what: str) -> None:
    """Refuse timestamps a calibration maps below 0 or beyond max_time_ns."""
    limit = current_limits().max_time_ns
    bad = (mapped_ns < 0) | (mapped_ns > limit)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise MergeError(
            f"calibration maps a {what} of rank {int(rank[i])} to {mapped_ns[i]:.6g} ns, "
            f"outside [0, max_time_ns={limit}]",
            file=file,
            record=f"rank {int(rank[i])}",
            field="clocks",
        )


def clock_map_from_calibration(
    calibration: dict, clocks: dict[int, str], ranks: list[int], world_size: int, *, file: str
) -> ClockMap:
    """Per-rank clock mapping; refuses a captured rank whose clock the calibration omits."""
    by_clock = {c["clock"]: c for c in calibration["clocks"] if "clock" in c}
    by_rank = {r: c for c in calibration["clocks"] for r in c.get("ranks", [])}
    offset = np.zeros(world_size, dtype=np.int64)
    drift = np.zeros(world_size, dtype=np.float64)
    anchor = np.zeros(world_size, dtype=np.int64)
    unc = np.zeros(world_size, dtype=np.int64)
    for r in ranks:
        entry = by_rank.get(r) or by_clock.get(clocks[r])
        if entry is None:
            raise MergeError(
                f"calibration does not cover rank {r} (clock {clocks[r]!r})",
                file=file,
                record=f"rank {r}",
                field="clocks",
            )
        offset[r] = entry["offset_ns"]
        drift[r] = entry["drift_ppb"]
        anchor[r] = entry.get("anchor_ns", 0)
        unc[r] = entry["uncertainty_ns"]
    return ClockMap(offset, drift, anchor, unc, calibration["reference"])


def _mapped_float(clock_map: ClockMap, rank: np.ndarray, local_ns: np.ndarray) -> np.ndarray:
    """``ClockMap.to_reference`` in float64: cannot wrap, close enough to bound-check."""
    local = local_ns.astype(np.float64)
    drift = clock_map.drift_ppb[rank] * (local - clock_map.anchor_ns[rank]) / 1e9
    return local + clock_map.offset_ns[rank].astype(np.float64) + drift


def _refuse_duplicate_ranks(captures: list[str]) -> None:
    owner: dict[int, str] = {}
    limits = current_limits()
    for path in captures:
        _, batches = _header_and_batches(path, limits)
        ranks: set[int] = set()
        first_event: dict[int, tuple[str, int]] = {}
        for _, batch in batches:
            for rank, group, seq in zip(
                batch.column("rank").to_pylist(),
                batch.column("group").to_pylist(),
                batch.column("seq").to_pylist(),
                strict=True,
            ):
                if rank not in ranks:
                    ranks.add(rank)
                    first_event[rank] = (group, seq)
        for rank in sorted(ranks):
            if rank in owner:
                group, _ = first_event[rank]
                raise MergeError(
                    f"two contributions for rank {rank}: {Path(owner[rank]).name} and {Path(path).name}",
                    file=path,
                    record=f"collective {group}#0 ranks {rank}",
                    field="rank",
                )
            owner[rank] = path


def merge_captures(
    captures: list[str], output: str | os.PathLike, calibration_path: str | None = None
) -> dict:
    """Merge ``captures`` into ``output`` (a tracecanary.trace/v1 file); returns a summary."""
    if not captures:
        raise InputError("no captures given", field="captures")
    _refuse_duplicate_ranks(captures)
    with tempfile.TemporaryDirectory(prefix="tracecanary-merge-") as tmp:
        result = ingest_files(captures, Path(tmp) / "merged.parquet")
        import json

        sidecar = json.loads(result.sidecar.read_text())
        table = pq.read_table(result.parquet).to_pandas()
    groups = {k: list(v) for k, v in sidecar["groups"].items()}
    clocks = {int(k): v for k, v in sidecar["clocks"].items()}
    world = int(sidecar["meta"]["world_size"])
    ranks = sorted(int(r) for r in sidecar["ranks_seen"])
    clock_map = None
    calibration = None
    if calibration_path is not None:
        calibration = load_calibration(calibration_path)
        clock_map = clock_map_from_calibration(
            calibration, clocks, ranks, world, file=calibration_path
        )
    program = build_program(
        table, groups=groups, world_size=world, clocks=clocks, clock_map=clock_map
    )

    events = assign_instances(table)
    meta = dict(sidecar["meta"])
    notes = list(meta.get("notes", []))
    if clock_map is not None:
        rank = events["rank"].to_numpy(np.int64)
        issue = events["issue_ns"].to_numpy(np.int64)
        _check_mapped(_mapped_float(clock_map, rank, issue), rank, calibration_path, "timestamp")
        events["ts_ns"] = clock_map.to_reference(rank, issue)
        if events["arrival_ns"].notna().any():
            has = events["arrival_ns"].notna().to_numpy()
            arrival = events["arrival_ns"].fillna(0).astype(np.int64).to_numpy()
            _check_mapped(
                np.where(has, _mapped_float(clock_map, rank, arrival), 0.0),
                rank,
                calibration_path,
                "arrival time",
            )
            mapped = clock_map.to_reference(rank, arrival)
            events["arrival_ns"] = np.where(has, mapped, np.nan)
        ref_id = f"reference:{calibration['reference']}"
        meta["clock_domains"] = [{"id": ref_id, "ranks": ranks}]
        top_two = sorted((int(clock_map.uncertainty_ns[r]) for r in ranks), reverse=True)[:2]
        meta["skew"] = {
            "status": "known",
            "reference": calibration["reference"],
            "method": calibration["method"],
            "uncertainty_ns": int(sum(top_two)),
            "calibration_sha256": sha256_file(calibration_path),
        }
        notes.append(
            f"merged with clock calibration ({calibration['method']}); timestamps are on reference clock {calibration['reference']!r}"
        )
    else:
        events["ts_ns"] = events["issue_ns"]
        meta["skew"] = {
            "status": "unknown",
            "reason": program.skew_reason or "no clock calibration given",
        }
        if program.skew_known:
            meta["skew"] = {
                "status": "known",
                "reference": "shared clock",
                "method": "one declared clock domain",
                "uncertainty_ns": 0,
            }
        else:
            notes.append(f"cross-rank skew unknown: {program.skew_reason}")
    events["instance"] = events["key_instance"]
    meta["notes"] = notes
    meta["merged_from"] = [{"path": Path(p).name, "sha256": sha256_file(p)} for p in captures]
    events = events.sort_values(["rank", "seq"], kind="stable")
    records = []
    columns = [
        "rank",
        "seq",
        "op",
        "bytes",
        "dtype",
        "group",
        "root",
        "peer",
        "phase",
        "stream",
        "ts_ns",
        "latency_ns",
        "overlap_ns",
        "arrival_ns",
        "instance",
    ]
    frame = events[columns]
    for row in frame.itertuples(index=False, name=None):
        record = {}
        for name, value in zip(columns, row, strict=True):
            if value is None or (isinstance(value, float) and np.isnan(value)):
                continue
            if name in ("phase", "stream") and value == "":
                continue
            record[name] = int(value) if not isinstance(value, str) else value
        records.append(record)
    doc = {
        "format": "tracecanary.trace/v1",
        "meta": meta,
        "groups": [{"id": gid, "ranks": rk} for gid, rk in groups.items()],
        "events": records,
    }
    digest = write_trace(doc, output)
    return {
        "events": len(records),
        "occurrences": program.n,
        "skew": meta["skew"],
        "sha256": digest,
    }
