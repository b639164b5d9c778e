"""nccl-tests-style ladder sweeps through real collectives, and their table.

Semantics (nccl-tests): a rung's size is the TOTAL buffer in bytes (all_reduce,
broadcast, reduce, sendrecv: the buffer; all_gather: the gathered output;
reduce_scatter: the input; all_to_all: one rank's whole send buffer; scatter: the
root's send buffer, n pieces; gather: the root's receive buffer, n pieces), rounded
down to whole elements, at least one element, and, for the per-rank-count collectives
(``PER_RANK_COUNT``), to a multiple of the world size (at least one element per rank;
nccl-tests also aligns a rank's piece to 16 bytes, sweeps do not). Rungs that round to
the same element count are run once. Rooted collectives (broadcast, reduce, scatter,
gather) use root 0. Per cycle and rung: ``warmup`` untimed then ``iters`` timed
iterations, each on freshly reset buffers and each checked for data correctness (scatter:
every rank's piece; gather: the root's whole buffer). sendrecv: every rank sends to
rank+1 and receives from rank-1 at once (nccl-tests' sendrecv_perf). scatter and gather
run in native mode only (no replayer strategy splits them).

Rows (``rows.parquet`` of a ``sweep`` archive), exactly these columns:
``collective, dtype, world_size, bytes, cycle, iteration, rank, latency_ns, correct``
(one row per rank, rung, cycle and timed iteration; sorted by bytes, cycle, iteration,
rank). The table (``--print-table``) is computed from these rows: per rung and cycle,
time = mean over ranks of the mean over iterations (nccl-tests' default ``-a 1``),
algbw = size / time, busbw = algbw x the nccl-tests factor (``alphabeta.ladder.
busbw_factor``), #wrong = rows that failed the check.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import TextIO

import numpy as np
import pandas as pd

from tracecanary.alphabeta.ladder import PER_RANK_COUNT, ROOTED_COLLECTIVES, busbw_factor
from tracecanary.errors import InputError
from tracecanary.formats.vocab import LADDER_COLLECTIVES
from tracecanary.param.dtypes import GLOO_UNSUPPORTED, canonical_dtype
from tracecanary.physical import archive
from tracecanary.physical.config import resolve_config
from tracecanary.physical.launch import Topology
from tracecanary.physical.rank_contract import SWEEP_ROW_SCHEMA, parse_fault
from tracecanary.physical.replay import check_run_params, staging_dir
from tracecanary.physical.run import launch_and_archive

COLLECTIVES = LADDER_COLLECTIVES
NATIVE_ONLY = frozenset({"scatter", "gather"})
"""Swept collectives no replayer mode but native applies to (decomposed and chunked
strategies cover the program ops only)."""
REDUCING = frozenset({"all_reduce", "reduce_scatter", "reduce"})
SWEEP_SORT_KEYS = ["bytes", "cycle", "iteration", "rank"]

_NCCL_TESTS_TYPE = {
    "float32": "float",
    "float16": "half",
    "float64": "double",
    "bfloat16": "bfloat16",
    "int32": "int32",
    "int64": "int64",
    "int8": "int8",
    "uint8": "uint8",
    "bool": "bool",
    "int16": "int16",
}

_SIZE = re.compile(r"^\s*(\d+)\s*([kKmMgGtT]?)(i?[bB])?\s*$")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str, field: str) -> int:
    """``1``, ``4096``, ``64K``, ``64M``, ``1G`` (binary units, as nccl-tests) -> bytes."""
    m = _SIZE.match(str(text))
    if m is None:
        raise InputError(f"not a size: {text!r} (e.g. 1, 4096, 64K, 64M, 1G)", field=field)
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def ladder_counts(
    collective: str,
    min_bytes: int,
    max_bytes: int,
    factor: float,
    element_bytes: int,
    world_size: int,
) -> list[int]:
    """Element counts (total buffer) of the rungs, ascending and distinct."""
    unit = world_size if collective in PER_RANK_COUNT else 1
    counts: list[int] = []
    size = min_bytes
    while size <= max_bytes:
        elements = size // element_bytes
        count = max(unit, elements // unit * unit)
        if not counts or count != counts[-1]:
            counts.append(count)
        nxt = int(size * factor)
        size = nxt if nxt > size else size + 1
    return counts


def table_from_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Per rung and cycle: size, count, type, redop, root, time_us, algbw, busbw, wrong."""
    if rows.empty:
        return pd.DataFrame(
            columns=[
                "cycle",
                "size",
                "count",
                "type",
                "redop",
                "root",
                "time_us",
                "algbw_gbps",
                "busbw_gbps",
                "wrong",
            ]
        )
    collective = rows["collective"].iloc[0]
    ws = int(rows["world_size"].iloc[0])
    dtype = rows["dtype"].iloc[0]
    info = canonical_dtype(dtype)
    per_rank = (
        rows.groupby(["bytes", "cycle", "rank"], sort=True)
        .agg(mean_ns=("latency_ns", "mean"), wrong=("correct", lambda c: int((~c).sum())))
        .reset_index()
    )
    per_cycle = (
        per_rank.groupby(["bytes", "cycle"], sort=True)
        .agg(time_ns=("mean_ns", "mean"), wrong=("wrong", "sum"))
        .reset_index()
    )
    size = per_cycle["bytes"].to_numpy(dtype=np.int64)
    elements = size // (info.element_bytes if info else 1)
    count = elements // ws if collective in PER_RANK_COUNT else elements
    time_us = per_cycle["time_ns"].to_numpy() / 1e3
    algbw = np.where(time_us > 0, size / np.maximum(time_us, 1e-12) / 1e3, 0.0)
    return (
        pd.DataFrame(
            {
                "cycle": per_cycle["cycle"].to_numpy(),
                "size": size,
                "count": count,
                "type": _NCCL_TESTS_TYPE.get(dtype, dtype),
                "redop": "sum" if collective in REDUCING else "none",
                "root": 0 if collective in ROOTED_COLLECTIVES else -1,
                "time_us": time_us,
                "algbw_gbps": algbw,
                "busbw_gbps": algbw * busbw_factor(collective, ws),
                "wrong": per_cycle["wrong"].to_numpy(dtype=np.int64),
            }
        )
        .sort_values(["cycle", "size"], kind="stable")
        .reset_index(drop=True)
    )


def _time_str(us: float) -> str:
    if us >= 10000.0:
        return f"{us:7.0f}"
    if us >= 100.0:
        return f"{us:7.1f}"
    return f"{us:7.2f}"


def format_table(rows: pd.DataFrame, attempt: dict) -> str:
    """The nccl-tests table layout (out-of-place columns), one block per cycle."""
    table = table_from_rows(rows)
    sw = attempt["sweep"]
    lines = [
        f"# tracecanary sweep {sw['collective']}: nranks {attempt['world_size']} "
        f"backend {attempt['backend']} minBytes {sw['min_bytes']} maxBytes {sw['max_bytes']} "
        f"step: {sw['factor']:g}(factor) warmup iters: {attempt['warmup']} "
        f"iters: {attempt['iters']} cycles: {sw['cycles']} validation: 1",
        "#",
        f"#{'size':>12}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  "
        f"{'time':>7}  {'algbw':>6}  {'busbw':>6}  {'#wrong':>6}",
        f"#{'(B)':>12}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  "
        f"{'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>6}",
    ]
    for cycle, block in table.groupby("cycle", sort=True):
        if sw["cycles"] > 1:
            lines.append(f"# cycle {int(cycle)}")
        for r in block.itertuples(index=False):
            lines.append(
                f" {r.size:>12}  {r.count:>12}  {r.type:>8}  {r.redop:>6}  {r.root:>6}  "
                f"{_time_str(r.time_us)}  {r.algbw_gbps:6.2f}  {r.busbw_gbps:6.2f}  {r.wrong:>6}"
            )
    wrong = int(table["wrong"].sum()) if len(table) else 0
    avg_busbw = float(table["busbw_gbps"].mean()) if len(table) else 0.0
    lines.append(f"# Out of bounds values : {wrong} {'FAILED' if wrong else 'OK'}")
    lines.append(f"# Avg bus bandwidth    : {avg_busbw:g}")
    return "\n".join(lines) + "\n"


def run_sweep(
    out: str | Path,
    *,
    collective: str,
    min_bytes: int,
    max_bytes: int,
    factor: float,
    dtype: str,
    backend: str,
    topology: Topology,
    warmup: int,
    iters: int,
    cycles: int,
    configs_path: str | Path | None,
    config_name: str | None,
    timeout_s: float,
    fault: str | None = None,
    progress: TextIO | None = None,
) -> dict | None:
    """Run one ladder and write its archive; return the attempt (None off node 0)."""
    out = Path(out)
    check_run_params(warmup, iters, timeout_s, topology)
    if collective not in COLLECTIVES:
        raise InputError(
            f"unknown collective {collective!r} (have: {', '.join(COLLECTIVES)})",
            field="--collective",
        )
    info = canonical_dtype(dtype)
    if info is None:
        raise InputError(f"unknown dtype {dtype!r}", field="--dtype")
    if backend == "gloo" and info.canonical in GLOO_UNSUPPORTED:
        raise InputError(f"dtype {dtype!r} is not supported by gloo", field="--dtype")
    if min_bytes < 1 or max_bytes < min_bytes:
        raise InputError("need 1 <= --min-bytes <= --max-bytes", field="--min-bytes")
    if not factor > 1:
        raise InputError("must be > 1", field="--factor")
    if cycles < 1:
        raise InputError("must be >= 1", field="--cycles")
    if collective == "sendrecv" and topology.world_size < 2:
        raise InputError("sendrecv needs at least 2 ranks", field="--nproc")
    try:
        parse_fault(fault)
    except ValueError as err:
        raise InputError(str(err), field="--fault") from err
    if configs_path is not None and config_name is not None:
        config = resolve_config(configs_path, config_name, backend)
        if config["mode"] == "fused":
            raise InputError(
                "a sweep runs one op at a time: mode fused does not apply",
                field="--physical-config",
            )
        if collective in NATIVE_ONLY and config["mode"] != "native":
            raise InputError(
                f"{collective} sweeps run in native mode only: mode {config['mode']} of "
                f"configuration {config_name!r} has no {collective} strategy",
                field="--physical-config",
            )
        config_record = {**config, "source": str(configs_path)}
    else:
        config = {
            "name": "native",
            "description": "one direct call per op, library defaults",
            "mode": "native",
            "env": {},
            "op_barrier": False,
        }
        config_record = config
    ws = topology.world_size
    counts = ladder_counts(collective, min_bytes, max_bytes, factor, info.element_bytes, ws)
    attempt_base = {
        "kind": "sweep",
        "source": "tracecanary",
        "backend": backend,
        "nproc": topology.nproc,
        "nnodes": topology.nnodes,
        "world_size": ws,
        "warmup": warmup,
        "iters": iters,
        "physical_config": config_record,
        "input": None,
        "fault": fault,
        "started_utc": archive.utc_now(),
        "sweep": {
            "collective": collective,
            "dtype": info.canonical,
            "min_bytes": min_bytes,
            "max_bytes": max_bytes,
            "factor": factor,
            "cycles": cycles,
            "rungs_bytes": [c * info.element_bytes for c in counts],
        },
    }
    staging = staging_dir(out, topology)
    staging.mkdir(parents=True, exist_ok=True)
    config_file = staging / f"config-{uuid.uuid4().hex[:12]}.json"
    config_file.write_text(json.dumps(config), encoding="utf-8")
    worker_args = [
        "sweep",
        "--staging", str(staging.resolve()),
        "--backend", backend,
        "--collective", collective,
        "--dtype", info.canonical,
        "--counts", ",".join(str(c) for c in counts),
        "--warmup", str(warmup),
        "--iters", str(iters),
        "--cycles", str(cycles),
        "--pg-timeout", str(timeout_s),
        "--config", str(config_file.resolve()),
    ]  # fmt: skip
    if fault:
        worker_args += ["--fault", fault]
    doc = launch_and_archive(
        worker_args,
        what="sweep",
        topology=topology,
        staging=staging,
        timeout_s=timeout_s,
        env=config["env"],
        progress=progress,
        out=out,
        attempt_base=attempt_base,
        backend=backend,
        world_size=ws,
        schema=SWEEP_ROW_SCHEMA,
        sort_keys=SWEEP_SORT_KEYS,
    )
    if doc is None:
        return None
    return doc
