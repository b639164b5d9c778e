"""nccl-tests ``-J`` JSON reports (versions 1-3) -> one run (``nccltests.NcclTestsRun``).

JSON (``-J``, versions 1-3): one run per file; booleans are written as the strings
"true"/"false" and NaN as the string "nan"; the collective comes from ``args[0]``; the
world size is ``len(config.devices) * nthreads * ngpus`` (one device entry per process).

Refusals (``ImportRefused``, exit 2) name file, record (the 1-based index into
``results``) and field: a document that is not a JSON object (or not UTF-8, or nested
too deep: ``ResourceLimitExceeded``), an unsupported version, a missing config or empty
results, a non-integer size/count/root, a non-numeric or non-positive time, a negative
nwrong, a ``cpu_time`` (``-C 1``) placement, an undeterminable collective or world size,
a world size contradicting ``--world-size``, and the checks of every parsed run
(``nccltests``).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

import pandas as pd

from tracecanary.alphabeta.nccltests import (
    INTEGER,
    ROW_COLUMNS,
    NcclTestsRun,
    assign_cycles,
    check_row_ints,
    check_world_size_rows,
    collective_from_program,
    plausible,
    refuse,
    resolve_collective,
    rows_per_cycle,
    world_size_from_rows,
)
from tracecanary.errors import ImportRefused, ResourceLimitExceeded
from tracecanary.limits import (
    check_text_depth,
    current_limits,
    refuse_json_constant,
    refuse_lone_surrogates,
)


def _json_bool(value, file: str, where: str) -> bool | None:
    if value in (True, "true"):
        return True
    if value in (False, "false"):
        return False
    if value is None:
        return None
    raise refuse(f"{value!r} is not a boolean", file, None, where)


def _json_number(
    value, file: str, record: int, where: str, *, positive: bool, allow_nan: bool
) -> float:
    if isinstance(value, str):
        if value == "nan" and allow_nan:
            return math.nan
        raise ImportRefused(f"{value!r} is not a number", file=file, record=record, field=where)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ImportRefused(f"{value!r} is not a number", file=file, record=record, field=where)
    value = float(value)
    if not math.isfinite(value) and not (allow_nan and math.isnan(value)):
        raise ImportRefused(f"{value!r} is not finite", file=file, record=record, field=where)
    if positive and not value > 0:
        raise ImportRefused(f"{value!r} must be > 0", file=file, record=record, field=where)
    if not math.isnan(value) and not plausible(value, positive):
        raise ImportRefused(f"{value!r} is out of range", file=file, record=record, field=where)
    return value


def _json_int(value, file: str, record: int | None, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and INTEGER.match(value.strip()) and len(value.strip()) <= 19:
            return int(value.strip())
        raise ImportRefused(
            f"{value!r} is not an integer"[:200], file=file, record=record, field=where
        )
    if abs(value) > 1 << 62:
        raise ImportRefused(f"{value} is too large", file=file, record=record, field=where)
    return int(value)


def parse_json(
    data: bytes,
    *,
    file: str,
    world_size: int | None = None,
    collective: str | None = None,
) -> list[NcclTestsRun]:
    """Parse an nccl-tests ``-J`` report (versions 1-3) into one run.

    For JSON, the ``line`` column holds the 1-based index into ``results`` and errors name
    that index as the record.
    """
    doc = _read_document(data, file)
    header = _read_header(doc, file, world_size)
    rows = _result_rows(header.results, file)
    coll, coll_source = _resolve_run_collective(header, rows, world_size, collective, file)
    ws, ws_source = _resolve_world_size(header, rows, coll, world_size, file)
    check_world_size_rows(rows, coll, ws, file)
    cycles, n_cycles = assign_cycles(rows, header.per_cycle, file, len(header.results))
    rows["cycle"] = cycles
    avg_value = _average_busbw(doc, file)
    oob = doc.get("out_of_bounds")
    nccl_version = doc.get("nccl_version")
    return [
        NcclTestsRun(
            file=file,
            run=0,
            first_line=1,
            layout="json",
            collective=coll,
            collective_source=coll_source,
            world_size=ws,
            world_size_source=ws_source,
            rows=rows,
            rows_per_cycle=header.per_cycle,
            n_cycles=n_cycles,
            nccl_tests_version=None,
            nccl_version=None if nccl_version is None else str(nccl_version),
            avg_busbw_printed_gbps=avg_value,
            out_of_bounds=oob.get("count")
            if isinstance(oob, dict) and isinstance(oob.get("count"), int)
            else None,
        )
    ]


def _read_document(data: bytes, file: str) -> dict:
    """The report as a JSON object: UTF-8, within the depth limit, no NaN/Infinity
    constants, no lone surrogates; anything else is refused (``ResourceLimitExceeded``
    for nesting too deep, ``ImportRefused`` otherwise)."""
    check_text_depth(data, current_limits().max_depth, file=file)
    try:
        doc = json.loads(data.decode("utf-8"), parse_constant=refuse_json_constant)
    except UnicodeDecodeError as err:
        raise ImportRefused(f"not UTF-8: {err}", file=file) from None
    except json.JSONDecodeError as err:
        raise ImportRefused(
            f"line {err.lineno}: invalid JSON: {err.msg}",
            file=file,
            record=err.lineno,
            field="json",
        ) from None
    except RecursionError:
        raise ResourceLimitExceeded("JSON nesting too deep", file=file, field="json") from None
    except ValueError as err:  # NaN / Infinity, or an integer too long to convert
        raise ImportRefused(f"invalid JSON: {err}", file=file, field="json") from None
    refuse_lone_surrogates(data, doc, file=file)
    if not isinstance(doc, dict):
        raise ImportRefused("top level is not an object", file=file, field="json")
    return doc


@dataclass(frozen=True)
class _Header:
    """What a report says about its run before its results: ``results`` (a non-empty
    list, records unchecked), ``program`` (``args[0]`` when a string), the world size
    its device list gives (``None`` without one, then ``world_size_source`` is too) and
    the rows per cycle its ladder bounds give (``None`` when they do not say)."""

    results: list
    program: str | None
    world_size: int | None
    world_size_source: str | None
    per_cycle: int | None


def _read_header(doc: dict, file: str, world_size_option: int | None) -> _Header:
    """The report's version (1-3), config and results are present; the thread, GPU and
    byte-ladder fields are integers and the flags booleans; a device list's world size
    (processes x threads x GPUs) agrees with ``--world-size``. Refused otherwise."""
    version = doc.get("version")
    if version not in (1, 2, 3):
        raise ImportRefused(
            f"unsupported nccl-tests JSON version {version!r}", file=file, field="version"
        )
    config = doc.get("config")
    if not isinstance(config, dict):
        raise ImportRefused("missing 'config' object", file=file, field="config")
    results = doc.get("results")
    if not isinstance(results, list) or not results:
        raise ImportRefused("missing or empty 'results' list", file=file, field="results")
    args = doc.get("args")
    program = args[0] if isinstance(args, list) and args and isinstance(args[0], str) else None
    nthreads = _json_int(config.get("nthreads", 1), file, None, "config.nthreads")
    ngpus = _json_int(config.get("ngpus", 1), file, None, "config.ngpus")
    devices = config.get("devices")
    ws, ws_source = None, None
    if isinstance(devices, list) and devices:
        ws, ws_source = len(devices) * nthreads * ngpus, "device_list"
        if world_size_option is not None and world_size_option != ws:
            raise ImportRefused(
                f"--world-size {world_size_option} contradicts {len(devices)} processes x "
                f"{nthreads} threads x {ngpus} GPUs = {ws}",
                file=file,
                field="world_size",
            )
    for key in ("blocking_collectives", "parallel_init", "per_iter_timing"):
        if key in config:
            _json_bool(config[key], file, f"config.{key}")
    return _Header(results, program, ws, ws_source, _rows_per_cycle(config, file))


def _rows_per_cycle(config: dict, file: str) -> int | None:
    """Rows per cycle of the config's byte ladder (``step_factor`` or ``step_bytes``);
    ``None`` when it names no step or the bounds make no ladder."""
    min_b = _json_int(config.get("minimum_bytes", 0), file, None, "config.minimum_bytes")
    max_b = _json_int(config.get("maximum_bytes", 0), file, None, "config.maximum_bytes")
    if "step_factor" in config:
        step = _json_int(config["step_factor"], file, None, "config.step_factor")
        return rows_per_cycle(min_b, max_b, step, "factor")
    if "step_bytes" in config:
        step = _json_int(config["step_bytes"], file, None, "config.step_bytes")
        return rows_per_cycle(min_b, max_b, step, "bytes")
    return None


def _result_rows(results: list, file: str) -> pd.DataFrame:
    """The rows (``ROW_COLUMNS``, ``cycle`` still 0) of every result: one per placement
    run (a null placement was not run), in results order; at least one. Each record is
    an object with integer size/count/root in range and string type/redop; each
    placement an object with a positive finite time, numeric (or "nan") bandwidths, a
    non-negative nwrong if any, and no ``cpu_time``. Refused otherwise, naming the
    1-based record."""
    cols: dict[str, list] = {c: [] for c in ROW_COLUMNS}
    for i, rec in enumerate(results, start=1):
        if not isinstance(rec, dict):
            raise ImportRefused("result is not an object", file=file, record=i, field="results")
        size = _json_int(rec.get("size"), file, i, "size")
        count = _json_int(rec.get("count"), file, i, "count")
        root = _json_int(rec.get("root"), file, i, "root")
        check_row_ints(size, count, root, file, i)
        dtype, redop = rec.get("type"), rec.get("redop")
        if not isinstance(dtype, str) or not isinstance(redop, str):
            raise ImportRefused("type and redop must be strings", file=file, record=i, field="type")
        for placement in ("out_of_place", "in_place"):
            timing = _placement_timing(rec, placement, file, i)
            if timing is None:
                continue
            time_us, algbw, busbw, wrong = timing
            cols["line"].append(i)
            cols["cycle"].append(0)
            cols["size_bytes"].append(size)
            cols["count"].append(count)
            cols["dtype"].append(dtype)
            cols["redop"].append(redop)
            cols["root"].append(root)
            cols["placement"].append(placement)
            cols["time_us"].append(time_us)
            cols["time_half_ulp_us"].append(0.0)  # "%lf" keeps 6 decimals: no useful rounding
            cols["printed_algbw_gbps"].append(algbw)
            cols["algbw_half_ulp_gbps"].append(5e-7)
            cols["printed_busbw_gbps"].append(busbw)
            cols["busbw_half_ulp_gbps"].append(5e-7)
            cols["wrong"].append(wrong)
    rows = pd.DataFrame(cols).astype(ROW_COLUMNS)
    if rows.empty:
        raise ImportRefused("no timed results", file=file, field="results")
    return rows


def _placement_timing(
    rec: dict, placement: str, file: str, i: int
) -> tuple[float, float, float, int | None] | None:
    """(time_us, algbw, busbw, wrong) of one placement of result ``i``, or ``None`` where
    nccl-tests wrote null (the placement was not run). Time positive and finite,
    bandwidths numeric or NaN, wrong a non-negative count or ``None`` (not checked)."""
    body = rec.get(placement)
    if body is None:
        if placement in rec:
            return None  # nccl-tests writes null when a placement was not run
        raise ImportRefused(f"missing {placement}", file=file, record=i, field=placement)
    if not isinstance(body, dict):
        raise ImportRefused(f"{placement} is not an object", file=file, record=i, field=placement)
    if "cpu_time" in body:
        raise ImportRefused(
            "cpu_time (-C 1) is CPU launch time, not collective latency",
            file=file,
            record=i,
            field=f"{placement}.cpu_time",
        )
    time_us = _json_number(
        body.get("time"), file, i, f"{placement}.time", positive=True, allow_nan=False
    )
    algbw = _json_number(
        body.get("alg_bw"), file, i, f"{placement}.alg_bw", positive=False, allow_nan=True
    )
    busbw = _json_number(
        body.get("bus_bw"), file, i, f"{placement}.bus_bw", positive=False, allow_nan=True
    )
    nwrong = body.get("nwrong")
    if nwrong is None:
        return time_us, algbw, busbw, None
    w = _json_number(nwrong, file, i, f"{placement}.nwrong", positive=False, allow_nan=False)
    if w < 0:
        raise ImportRefused("nwrong is negative", file=file, record=i, field=f"{placement}.nwrong")
    return time_us, algbw, busbw, int(round(w))


def _resolve_run_collective(
    header: _Header,
    rows: pd.DataFrame,
    world_size_option: int | None,
    collective_option: str | None,
    file: str,
) -> tuple[str, str]:
    """(collective, source): the program ``args[0]`` names a supported collective (or
    none), and ``nccltests.resolve_collective`` settles it against the rows and
    ``--collective``."""
    program = header.program
    named = collective_from_program(program) if program else None
    if program and named is None:
        stem = os.path.basename(program).split("_perf")[0]
        raise ImportRefused(f"collective {stem!r} is not supported", file=file, field="args")
    guess = header.world_size if header.world_size is not None else world_size_option
    return resolve_collective(named, "json_args", rows, guess, file, 1, collective_option)


def _resolve_world_size(
    header: _Header,
    rows: pd.DataFrame,
    collective: str,
    world_size_option: int | None,
    file: str,
) -> tuple[int, str]:
    """(world size, source): the device list's, else the one the rows' size/count imply
    (which ``--world-size`` must not contradict), else ``--world-size``; refused when
    none gives one."""
    if header.world_size is not None:
        return header.world_size, header.world_size_source
    derived = world_size_from_rows(rows, collective)
    if derived is not None:
        if world_size_option is not None and world_size_option != derived:
            raise ImportRefused(
                f"--world-size {world_size_option} contradicts the {derived} ranks implied by "
                "size/count",
                file=file,
                field="world_size",
            )
        return derived, "data"
    if world_size_option is not None:
        return world_size_option, "option"
    raise ImportRefused(
        "world size unknown: no devices and the rows do not imply it; pass --world-size",
        file=file,
        field="world_size",
    )


def _average_busbw(doc: dict, file: str) -> float | None:
    """The printed average bus bandwidth (either spelling nccl-tests has written), or
    ``None`` when absent or NaN; a non-numeric one is refused."""
    avg = doc.get("average_bus_bandwidth", doc.get("average_bus_bandwidith"))
    if not isinstance(avg, dict):
        return None
    raw = avg.get("bandwidth", avg.get("bandwidith"))
    if raw is None:
        return None
    value = _json_number(raw, file, 0, "average_bus_bandwidth", positive=False, allow_nan=True)
    return None if math.isnan(value) else value
