"""PARAM's ``replayedCommsPerf.rank<r>.json`` files -> an attempt archive.

PARAM's ``commsTraceReplay`` (with ``--output-path DIR``) writes, per rank, a JSON list
with one object per replayed op per recorded pass (warm-up excluded): ``comms``,
``in_msg_size``, ``out_msg_size``, ``dtype``, ``world_size``, ``dtype_size``,
``marker_stack`` (the entry's markers joined by spaces), ``latency_us`` (host time
around issue + wait), ``global_latency_us`` (plus the post-op barrier) and, when they
were set, ``pg_id``, ``root``, ``in_split``, ``out_split``, ``startTime_ns``, ``req``.

Import rules: every row must carry a ``canary:<occ>`` marker in ``marker_stack`` (the
join key), else the import is refused (exit 2, naming file, row and field). With
``program`` (the replayed export directory) the occurrence must be one this rank
executes there, with the same op and sizes, else refused; the row then takes the
program's ``entry``, ``pg_id``, ``weight`` and ``phase``. The pass index
(``iteration``) is the number of earlier rows of the same occurrence on that rank.

What PARAM does not record stays unknown (null), never invented: ``start_ns``,
``end_ns``, ``host`` (""), and ``correct`` (PARAM runs no data check unless ``--c 1``,
which aborts instead of recording). ``latency_ns`` = round(latency_us x 1000);
``global_latency_ns`` keeps PARAM's barrier-inclusive figure. With a program, an op
PARAM silently skipped (fewer passes than the others) makes the attempt ``failed``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from tracecanary.canonical import sha256_file
from tracecanary.errors import ImportRefused, InputError
from tracecanary.limits import current_limits
from tracecanary.param.dtypes import PARAM_DTYPES, DtypeInfo
from tracecanary.param.program import (
    _CANARY_MARKER,
    _nccl_tests_bytes,
    load_program_dir,
    normalize_op_name,
    read_json_list,
)
from tracecanary.physical import archive
from tracecanary.physical.rank_contract import REPLAY_ROW_SCHEMA
from tracecanary.physical.replay import input_record

PARAM_RESULT_FILE = re.compile(r"^replayedCommsPerf\.rank(\d+)\.json$")
PARAM_ROW_SCHEMA = REPLAY_ROW_SCHEMA.append(pa.field("global_latency_ns", pa.int64()))
PARAM_SORT_KEYS = ["iteration", "rank", "occ"]

NOTES = [
    "rows imported from PARAM commsTraceReplay results (replayedCommsPerf.rank<r>.json)",
    "PARAM records no start or end time, host, or data-correctness result: start_ns, end_ns "
    "and correct are null, host is empty",
    "PARAM replay is blocking with a barrier before and after every op; latency_ns is "
    "PARAM's latency_us (issue + wait), global_latency_ns adds the post-op barrier",
    "PARAM always runs one warm-up pass, excluded from its results",
]


def _markers(value: object, where: dict) -> tuple[int, str, float, str]:
    if not isinstance(value, str) or not value.strip():
        raise ImportRefused(
            "row has no markers (expected canary:<occ>)", field="marker_stack", **where
        )
    tokens = value.split()
    canary = [t for t in tokens if _CANARY_MARKER.match(t)]
    if len(canary) != 1:
        raise ImportRefused(
            f"expected exactly one canary:<occ> marker, found {len(canary)} in {value!r}",
            field="marker_stack",
            **where,
        )
    weight, phase = 1.0, ""
    for t in tokens:
        if t.startswith("weight:"):
            try:
                weight = float(t[7:])
            except ValueError:
                weight = math.nan
            if not math.isfinite(weight) or weight <= 0:
                raise ImportRefused(f"bad weight marker {t!r}", field="marker_stack", **where)
        elif t.startswith("phase:"):
            phase = t[6:]
    digits = _CANARY_MARKER.match(canary[0]).group(1)
    if len(digits) > 18:  # beyond any int64 occurrence index
        raise ImportRefused(
            f"occurrence in {canary[0][:40]!r} is too large", field="marker_stack", **where
        )
    return int(digits), canary[0], weight, phase


def result_files(directory: Path) -> dict[int, Path]:
    if not directory.is_dir():
        raise InputError("not a directory of PARAM results", file=str(directory))
    found = {}
    for p in directory.iterdir():
        m = PARAM_RESULT_FILE.match(p.name)
        if m:
            found[int(m.group(1))] = p
    if not found:
        raise InputError("no replayedCommsPerf.rank<r>.json files", file=str(directory))
    return dict(sorted(found.items()))


def _latencies(row: dict, where: dict, limits) -> tuple[float, float | None]:
    """``(latency_us, global_latency_us or None)``, each finite and within the time limit."""
    latency_us = row.get("latency_us")
    if (
        not isinstance(latency_us, (int, float))
        or isinstance(latency_us, bool)
        or not math.isfinite(latency_us)
        or latency_us < 0
    ):
        raise ImportRefused("expected a finite latency >= 0", field="latency_us", **where)
    limits.check("max_time_ns", latency_us * 1000, field="latency_us", **where)
    global_us = row.get("global_latency_us")
    if global_us is not None and (
        not isinstance(global_us, (int, float)) or not math.isfinite(global_us)
    ):
        raise ImportRefused("expected a finite number", field="global_latency_us", **where)
    if global_us is not None:
        limits.check("max_time_ns", abs(global_us) * 1000, field="global_latency_us", **where)
    return latency_us, global_us


def _sizes(row: dict, op: str, where: dict, limits) -> tuple[int, int, DtypeInfo | None]:
    """``(in_elems, out_elems, dtype)`` of a row; a barrier has none (0, 0, None)."""
    if op == "barrier":
        return 0, 0, None
    in_elems = row.get("in_msg_size", 0)
    out_elems = row.get("out_msg_size", 0)
    dtype = row.get("dtype", "")
    info = PARAM_DTYPES.get(dtype) if dtype and isinstance(dtype, str) else None
    for key, value in (("in_msg_size", in_elems), ("out_msg_size", out_elems)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ImportRefused(
                f"expected an integer >= 0, got {value!r}"[:200], field=key, **where
            )
    if info is None:
        raise ImportRefused(f"unknown dtype {dtype!r}"[:200], field="dtype", **where)
    for key, value in (("in_msg_size", in_elems), ("out_msg_size", out_elems)):
        limits.check(
            "max_message_bytes",
            value * info.element_bytes,
            what=f"{key} x {info.element_bytes} bytes",
            field=key,
            **where,
        )
    return in_elems, out_elems, info


def _join_program(executed, row_key: tuple, where: dict, rank: int, program_dir) -> tuple:
    """``(entry, pg_id, weight, phase)`` of the program entry a row replayed; refuses a row
    whose occurrence this rank does not execute there or whose op or sizes differ."""
    occ, marker, op, in_elems, out_elems = row_key
    if occ not in executed.index:
        raise ImportRefused(
            f"{marker} is not an op rank {rank} executes in {program_dir}",
            field="marker_stack",
            **where,
        )
    ref = executed.loc[occ]
    if ref["op"] != op:
        raise ImportRefused(
            f"{marker} is {ref['op']} in the program, {op} here", field="comms", **where
        )
    if op != "barrier" and (int(ref["in_elems"]) != in_elems or int(ref["out_elems"]) != out_elems):
        raise ImportRefused(
            f"{marker}: sizes {in_elems}/{out_elems} differ from the program's "
            f"{int(ref['in_elems'])}/{int(ref['out_elems'])}",
            field="in_msg_size",
            **where,
        )
    return int(ref["entry"]), int(ref["pg_id"]), float(ref["weight"]), str(ref["phase"])


def _rank_rows(
    path: Path, rank: int, executed, program_dir, limits, columns: dict
) -> dict[int, int]:
    """Append one rank's rows to ``columns``; return occurrence -> passes recorded."""
    doc = read_json_list(path)
    file = str(path)
    count: dict[int, int] = {}
    for index, row in enumerate(doc):
        where = {"file": file, "record": index}
        if not isinstance(row, dict):
            raise ImportRefused("row is not a JSON object", **where)
        occ, marker, weight, phase = _markers(row.get("marker_stack"), where)
        raw = row.get("comms")
        op = normalize_op_name(raw) if isinstance(raw, str) else None
        if op is None or op in ("init", "wait"):
            raise ImportRefused(f"unsupported op {raw!r}", field="comms", **where)
        latency_us, global_us = _latencies(row, where, limits)
        in_elems, out_elems, info = _sizes(row, op, where, limits)
        entry = pg_id = None
        if executed is not None:
            key = (occ, marker, op, in_elems, out_elems)
            entry, pg_id, weight, phase = _join_program(executed, key, where, rank, program_dir)
        iteration = count.get(occ, 0)
        count[occ] = iteration + 1
        nbytes = _nccl_tests_bytes(
            op, int(in_elems), int(out_elems), info.element_bytes if info else 0
        )
        for key, value in (
            ("occ", occ),
            ("marker", marker),
            ("op", op),
            ("bytes", nbytes),
            ("dtype", info.canonical if info else ""),
            ("weight", weight),
            ("phase", phase),
            ("iteration", iteration),
            ("rank", rank),
            ("host", ""),
            ("start_ns", None),
            ("end_ns", None),
            ("latency_ns", int(round(latency_us * 1000))),
            ("correct", None),
            ("fused_bucket", -1),
            ("entry", entry),
            ("pg_id", pg_id),
            ("global_latency_ns", None if global_us is None else int(round(global_us * 1000))),
        ):
            columns[key].append(value)
    return count


@dataclass(frozen=True)
class ParamRows:
    """PARAM's result files as archive rows: ``table`` (PARAM_ROW_SCHEMA, sorted by
    PARAM_SORT_KEYS), ``files`` (rank -> result file), ``world_size``, ``passes`` (recorded
    passes, None if no row) and ``incomplete`` (what a program says is missing)."""

    table: pa.Table
    files: dict[int, Path]
    world_size: int
    passes: int | None
    incomplete: list[str]


def read_param_rows(
    results_dir: str | Path, *, program_dir: str | Path | None = None, programs=None
) -> ParamRows:
    """Read and check every ``replayedCommsPerf.rank<r>.json`` (see the module docstring);
    ``programs`` (already loaded from ``program_dir``) saves reading the export twice."""
    files = result_files(Path(results_dir))
    limits = current_limits()
    if programs is None and program_dir is not None:
        programs = load_program_dir(program_dir)
    if programs is not None:
        world_size = len(programs)
        beyond = [r for r in files if r >= world_size]
        if beyond:
            raise ImportRefused(
                f"result for rank {beyond[0]} but the program has {world_size} ranks",
                file=str(files[beyond[0]]),
            )
    else:
        world_size = max(files) + 1
    limits.check(
        "max_ranks", world_size, what="ranks of the result files", file=str(files[max(files)])
    )
    columns: dict[str, list] = {name: [] for name in PARAM_ROW_SCHEMA.names}
    incomplete: list[str] = []
    passes_seen: set[int] = set()
    for rank, path in files.items():
        executed = None
        if programs is not None:
            ops = programs[rank].ops
            executed = ops[ops["executes"]].set_index("occ")
        count = _rank_rows(path, rank, executed, program_dir, limits, columns)
        passes_seen.update(range(max(count.values(), default=0)))
        if executed is not None:
            passes = max(count.values(), default=0)
            missing = [int(o) for o in executed.index if count.get(int(o), 0) < passes]
            if missing or not count:
                incomplete.append(
                    f"rank {rank}: {len(missing) if count else len(executed)} executed ops "
                    f"missing from some passes (first occ {missing[:3] if count else 'all'})"
                )
    table = pa.table({k: pa.array(v, PARAM_ROW_SCHEMA.field(k).type) for k, v in columns.items()})
    table = table.take(pc.sort_indices(table, [(k, "ascending") for k in PARAM_SORT_KEYS]))
    if programs is not None:
        missing_ranks = [r for r in range(world_size) if r not in files]
        if missing_ranks:
            incomplete.append(f"no results for ranks {missing_ranks}")
    passes = (max(passes_seen) + 1) if passes_seen else None
    return ParamRows(table, files, world_size, passes, incomplete)


def param_record(results_dir: str | Path, rows: ParamRows) -> dict:
    """``attempt.json``'s ``param``: the result files read (by digest) and the notes."""
    return {
        "results_dir": str(results_dir),
        "result_files": {p.name: sha256_file(p) for p in rows.files.values()},
        "notes": NOTES,
    }


def import_param_results(
    results_dir: str | Path,
    out: str | Path,
    *,
    program_dir: str | Path | None = None,
    backend: str | None = None,
) -> dict:
    """Read PARAM result files into an attempt archive at ``out``; return attempt.json."""
    rows = read_param_rows(results_dir, program_dir=program_dir)
    incomplete = rows.incomplete
    status = "failed" if incomplete else "complete"
    reason = ("PARAM results incomplete: " + "; ".join(incomplete))[:1000] if incomplete else None
    attempt = {
        "kind": "replay",
        "source": "param",
        "status": status,
        "reason": reason,
        "backend": backend,
        "nproc": len(rows.files),
        "nnodes": None,
        "world_size": rows.world_size,
        "warmup": 1,
        "iters": rows.passes,
        "physical_config": None,
        "input": input_record(Path(program_dir)) if program_dir is not None else None,
        "wall_time_ns": None,
        "correctness": {"checked_rows": 0, "incorrect_rows": 0},
        "fault": None,
        "started_utc": archive.utc_now(),
        "param": param_record(results_dir, rows),
    }
    return archive.write_archive(
        Path(out),
        attempt,
        environment=None,
        rows=rows.table,
        rows_file="rows.parquet" if status == "complete" else "partial/rows.parquet",
        log=None,
    )
