"""Merge per-rank captures into one trace, mapping clocks through an explicit calibration.

Guarantees of ``merge_captures``:
- every refusal of ``tracecanary.matching.build_program`` applies (duplicate rank
  contributions, conflicting metadata, partially measured latency, a rank missing a
  collective, unpaired send/recv), plus: a rank contributed by two capture files, and
  a calibration that does not cover a captured rank's clock, and, with a calibration, a
  happens-before order that cannot be (``clocks.constraints.refuse_impossible_orders``:
  on one clock exactly as ``calibrate-clocks`` refuses it, and on the reference clock
  beyond the calibration's uncertainty: a rank captured in another run);
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
import pandas as pd
import pyarrow.parquet as pq

from tracecanary.canonical import sha256_file
from tracecanary.clocks.calibration import (
    ClockMap,
    clock_map_from_calibration,
    load_calibration,
    mapped_skew_uncertainty_ns,
)
from tracecanary.clocks.constraints import refuse_impossible_orders
from tracecanary.clocks.status import calibrated
from tracecanary.errors import InputError, MergeError
from tracecanary.formats.ids import TRACE_FORMAT
from tracecanary.formats.trace import SPLIT_FIELDS, split_values
from tracecanary.ingest import _header_and_batches, ingest_files
from tracecanary.limits import current_limits
from tracecanary.matching import assign_instances, build_program
from tracecanary.merge_inputs import (
    refuse_incomplete,
    refuse_raw_kineto,
    resolve_captures,
    supplied_ranks,
)
from tracecanary.parquet_io import exact_nullable_int
from tracecanary.trace_io import write_trace


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


def _mapped_float(clock_map: ClockMap, rank: np.ndarray, local_ns: np.ndarray) -> np.ndarray:
    """``ClockMap.to_reference`` in float64: cannot wrap, close enough to bound-check."""
    local = local_ns.astype(np.float64)
    drift = clock_map.drift_ppb[rank] * (local - clock_map.anchor_ns[rank]) / 1e9
    return local + clock_map.offset_ns[rank].astype(np.float64) + drift


def _refuse_impossible_orders(
    table: pd.DataFrame,
    clocks: dict[int, str],
    clock_map: ClockMap | None,
    calibration: dict | None,
    calibration_path: str | None,
    supplied: dict[str, set[int]],
    headers: dict[str, dict],
    ranks: list[int],
) -> None:
    """``calibrate-clocks``' happens-before check, where a calibration is given (the
    merged trace then claims a known skew on one clock): no matched event may complete
    before an event it needs started, on one clock, nor on the reference clock beyond the
    calibration's uncertainty (a capture shifted by an hour, from another run, is refused,
    not merged as "skew known"). Without a calibration nothing is checked: a recorded
    pipelining program's recvs can end before the sends matching pairs them with start
    (send/recv are paired in order), which calibrate-clocks refuses too. The events of a Kineto import
    (``meta.kineto``) give starts only: their ``latency_ns`` is a kernel's or gloo work's
    own duration, which may begin well after the issue, so issue plus latency is no end
    (a real gloo capture's work queued 20 ms behind its issue would be refused)."""
    files_of_ranks = {rank: path for path, owned in supplied.items() for rank in owned}
    first = next(iter(supplied))
    no_end = sorted(
        rank
        for path, owned in supplied.items()
        if "kineto" in headers[path].get("meta", {})
        for rank in owned
    )
    if no_end:
        table = table.copy(deep=False)
        table["latency_ns"] = table["latency_ns"].where(~table["rank"].isin(no_end))
    if clock_map is None:  # timestamps kept as captured: merge claims no calibrated skew
        return
    rank = table["rank"].to_numpy(np.int64)
    issue = table["issue_ns"].to_numpy(np.int64)
    _check_mapped(_mapped_float(clock_map, rank, issue), rank, calibration_path, "timestamp")
    mapped_arrival = None
    if "arrival_ns" in table and table["arrival_ns"].notna().any():
        has = table["arrival_ns"].notna().to_numpy()
        arrival = table["arrival_ns"].fillna(0).astype(np.int64).to_numpy()
        _check_mapped(
            np.where(has, _mapped_float(clock_map, rank, arrival), 0.0),
            rank,
            calibration_path,
            "arrival time",
        )
        mapped_arrival = pd.arrays.IntegerArray(clock_map.to_reference(rank, arrival), ~has)
    refuse_impossible_orders(
        table,
        clocks,
        file=first,
        files_of_ranks=files_of_ranks,
        mapped=(clock_map.to_reference(rank, issue), mapped_arrival),
        reference=str(calibration["reference"]),
        tolerance_ns=mapped_skew_uncertainty_ns(clock_map, ranks),
    )


def _refuse_duplicate_ranks(captures: list[str]) -> tuple[dict[str, dict], dict[str, set[int]]]:
    """Refuse a rank contributed by two captures; return each capture's header and the
    ranks it supplies (``merge_inputs.supplied_ranks``)."""
    owner: dict[int, str] = {}
    headers: dict[str, dict] = {}
    supplied: dict[str, set[int]] = {}
    limits = current_limits()
    for path in captures:
        header, batches = _header_and_batches(path, limits)
        headers[path] = header
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
        supplied[path] = supplied_ranks(header, ranks)
    return headers, supplied


def merge_captures(
    captures: list[str],
    output: str | os.PathLike,
    calibration_path: str | None = None,
    groups_path: str | None = None,
    recorded_as: list[dict] | None = None,
) -> dict:
    """Merge ``captures`` into ``output`` (a tracecanary.trace/v1 file); returns a summary.
    A capture set missing a rank of the declared world is refused; groups and dtypes
    that imported captures leave undetermined are settled first (``merge_inputs``).
    ``recorded_as`` (``{"path": name, "sha256": digest}`` per capture) is written as
    ``meta.merged_from`` instead of the captures' own names and digests: the original
    rank files of captures a scattered job rewrote (``tracecanary.rank_blocks``)."""
    if not captures:
        raise InputError("no captures given", field="captures")
    refuse_raw_kineto(captures)
    headers, supplied = _refuse_duplicate_ranks(captures)
    refuse_incomplete(supplied, int(headers[captures[0]]["meta"]["world_size"]), captures[0])
    with tempfile.TemporaryDirectory(prefix="tracecanary-merge-") as tmp:
        inputs, _ = resolve_captures(
            captures,
            headers,
            Path(tmp) / "resolved",
            calibration_path=calibration_path,
            groups_path=groups_path,
        )
        result = ingest_files(inputs, Path(tmp) / "merged.parquet")
        import json

        sidecar = json.loads(result.sidecar.read_text())
        arrow = pq.read_table(result.parquet)
        table = arrow.to_pandas()
        arrival = exact_nullable_int(arrow, "arrival_ns")
        if arrival is not None:  # absolute times with gaps: exact, not float64
            table["arrival_ns"] = arrival
        del arrow
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
    _refuse_impossible_orders(
        table, clocks, clock_map, calibration, calibration_path, supplied, headers, ranks
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
            events["arrival_ns"] = pd.Series(mapped, index=events.index, dtype=object).where(
                has, None
            )
        ref_id = f"reference:{calibration['reference']}"
        meta["clock_domains"] = [{"id": ref_id, "ranks": ranks}]
        meta["skew"] = calibrated(
            mapped_skew_uncertainty_ns(clock_map, ranks),
            calibration["reference"],
            calibration["method"],
            sha256_file(calibration_path),
        ).to_json()
        notes.append(
            f"merged with clock calibration ({calibration['method']}); timestamps are on reference clock {calibration['reference']!r}"
        )
    else:
        events["ts_ns"] = events["issue_ns"]
        meta["skew"] = program.skew_status.to_json()
        if not program.skew_known:
            notes.append(f"cross-rank skew unknown: {program.skew_reason}")
    events["instance"] = events["key_instance"]
    meta["notes"] = notes
    meta["merged_from"] = recorded_as or [
        {"path": Path(p).name, "sha256": sha256_file(p)} for p in captures
    ]
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
    columns += [name for name in SPLIT_FIELDS if name in events.columns]
    frame = events[columns]
    for row in frame.itertuples(index=False, name=None):
        record = {}
        for name, value in zip(columns, row, strict=True):
            if value is None or (isinstance(value, float) and np.isnan(value)):
                continue
            if name in ("phase", "stream") and value == "":
                continue
            if name in SPLIT_FIELDS:
                record[name] = split_values(value)
                continue
            record[name] = int(value) if not isinstance(value, str) else value
        records.append(record)
    doc = {
        "format": TRACE_FORMAT,
        "meta": meta,
        "groups": [{"id": gid, "ranks": rk} for gid, rk in groups.items()],
        "events": records,
    }
    digest = write_trace(doc, output)
    return {
        "events": len(records),
        "occurrences": program.n,
        "skew": meta["skew"],
        "notes": meta["notes"],
        "sha256": digest,
    }
