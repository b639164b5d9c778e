"""Run one zoo workload live: ``nproc`` gloo ranks on 127.0.0.1 under ``torch.profiler``
(CPU activity, ``record_shapes=True``), one Kineto trace per rank. Each rank runs one
torch thread and, where this process may run on at least ``nproc`` CPUs, is pinned to a
CPU of its own (``settings.cpus_per_rank``; null: not pinned, ranks share cores).
``noise`` records the capture's latency CV per op signature (median and max): the noise
floor a reader compares every figure of the capture with.

Guarantees of ``capture_workload``: ``out_dir`` receives ``rank<r>.json.gz`` for every
rank and ``capture.json`` (``tracecanary.capture/v1``: settings with the workload name,
layout, environment, file digests, import check), atomically, or nothing. The import
check imports every rank and merges them with a same-host calibration in a temporary
directory, so a capture whose process groups the evidence cannot settle fails here
(``RunFailed``, exit 1) rather than downstream. A rank that raises or a run past
``timeout_s`` fails the capture the same way.
"""

from __future__ import annotations

import datetime
import json
import multiprocessing
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

from tracecanary.canonical import atomic_output, sha256_file, write_json
from tracecanary.capture import capture_environment, join_all
from tracecanary.errors import InputError, RunFailed, TraceCanaryError
from tracecanary.formats.ids import CALIBRATION_FORMAT, CAPTURE_FORMAT
from tracecanary.ports import free_local_port
from tracecanary.zoo.programs import WORKLOADS

NPROC = 4
_PRELOAD = ["torch", "torch.distributed", "torch.profiler", "torch._inductor"]


def capture_workload(
    name: str,
    out_dir: str | os.PathLike,
    *,
    steps: int | None = None,
    timeout_s: float = 300.0,
    nproc: int = NPROC,
) -> dict:
    """Run workload ``name`` on ``nproc`` ranks (one of the workload's ``ranks``; see
    module docstring); return capture.json's document."""
    if name not in WORKLOADS:
        raise InputError(
            f"unknown workload {name!r}; known: {', '.join(sorted(WORKLOADS))}", field="workload"
        )
    workload = WORKLOADS[name]
    if nproc not in workload.ranks:
        raise InputError(
            f"workload {name} runs on {' or '.join(map(str, workload.ranks))} ranks, not {nproc}",
            field="nproc",
        )
    steps = workload.default_steps if steps is None else steps
    if steps < 1:
        raise InputError(f"--steps must be >= 1, got {steps}", field="steps")
    cpus = rank_cpus(nproc)
    started = time.perf_counter()
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)
    with atomic_output(out_dir, directory=True) as tmp:
        os.chmod(tmp, 0o755)
        port = free_local_port()
        procs = [
            ctx.Process(
                target=_worker, args=(name, r, nproc, steps, port, str(tmp), timeout_s, cpus)
            )
            for r in range(nproc)
        ]
        for p in procs:
            p.start()
        join_all(procs, timeout_s, Path(tmp), what="workload")
        files = {}
        for r in range(nproc):
            path = Path(tmp) / f"rank{r}.json.gz"
            if not path.is_file():
                raise RunFailed(f"rank {r} wrote no trace", file=str(out_dir))
            files[path.name] = sha256_file(path)
        check, noise = _import_check(Path(tmp), out_dir, nproc)
        doc = {
            "format": CAPTURE_FORMAT,
            "settings": {
                "workload": name,
                "nproc": nproc,
                "cpus_per_rank": None if cpus is None else [[c] for c in cpus],
                "steps": steps,
                "hidden": 64,
                "seq_len": 16,
                "layers_per_stage": 1,
                "timeout_s": timeout_s,
            },
            "layout": workload.layout_on(nproc),
            "environment": capture_environment(),
            "files": files,
            "import_check": check,
            "noise": noise,
            "wall_s": round(time.perf_counter() - started, 3),
        }
        for stale in Path(tmp).glob("error-rank*.txt"):
            stale.unlink()
        write_json(Path(tmp) / "capture.json", doc)
    return doc


def rank_cpus(nproc: int) -> list[int] | None:
    """The CPU each rank is pinned to (rank r: the r-th CPU this process may run on),
    where there are at least ``nproc`` of them; None (no pinning) otherwise."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this platform
        return None
    return allowed[:nproc] if len(allowed) >= nproc else None


def latency_noise(events: list[dict]) -> dict:
    """The capture's noise floor from its merged trace's events: per op signature (op,
    bytes, dtype, group, stream), the coefficient of variation (population std / mean) of
    every member's measured latency; its median (and max) over the signatures with at
    least two measured values. A CV of 0.5 means repeated identical collectives differ by
    half their mean: no canary is held closer than that."""
    import numpy as np

    index: dict[tuple, int] = {}
    codes, values = [], []
    for e in events:
        if "latency_ns" in e:
            key = (e["op"], e["bytes"], e["dtype"], e["group"], e.get("stream", ""))
            codes.append(index.setdefault(key, len(index)))
            values.append(e["latency_ns"])
    codes_a = np.asarray(codes, dtype=np.int64)
    v = np.asarray(values, dtype=np.float64)
    count = np.bincount(codes_a, minlength=len(index))
    total = np.bincount(codes_a, v, minlength=len(index))
    square = np.bincount(codes_a, v * v, minlength=len(index))
    used = (count >= 2) & (total > 0)
    mean = total[used] / count[used]
    cv = np.sqrt(np.maximum(square[used] / count[used] - mean * mean, 0.0)) / mean
    return {
        "latency_cv_median": round(float(np.median(cv)), 4) if cv.size else None,
        "latency_cv_max": round(float(cv.max()), 4) if cv.size else None,
        "signatures": int(cv.size),
        "note": "per op signature: std / mean of every member's measured latency; median and "
        "max over signatures with two or more values",
    }


def _import_check(tmp: Path, out_dir, nproc: int = NPROC) -> tuple[dict, dict]:
    """Import every rank and merge with a same-host calibration (groups settled);
    (the check, the merged capture's ``latency_noise``)."""
    from tracecanary.kineto import import_kineto_file
    from tracecanary.merge import merge_captures
    from tracecanary.trace_io import write_trace

    with tempfile.TemporaryDirectory(prefix="tracecanary-zoo-check-") as work:
        paths = []
        for r in range(nproc):
            path = Path(work) / f"rank{r}.json"
            write_trace(import_kineto_file(tmp / f"rank{r}.json.gz"), path)
            paths.append(str(path))
        calibration = Path(work) / "clocks.json"
        write_json(
            calibration,
            {
                "format": CALIBRATION_FORMAT,
                "reference": "same host",
                "method": "same-host",
                "clocks": [
                    {
                        "ranks": list(range(nproc)),
                        "offset_ns": 0,
                        "drift_ppb": 0,
                        "uncertainty_ns": 0,
                    }
                ],
            },
        )
        try:
            summary = merge_captures(paths, Path(work) / "merged.json", str(calibration))
        except TraceCanaryError as err:
            raise RunFailed(
                f"the captured traces do not merge: {err.one_line()}", file=str(out_dir)
            ) from None
        merged = json.loads((Path(work) / "merged.json").read_text(encoding="utf-8"))
        noise = latency_noise(merged["events"])
    return {"collectives": summary["events"], "unknown_groups": 0}, noise


def _worker(
    name: str,
    rank: int,
    nproc: int,
    steps: int,
    port: int,
    out: str,
    timeout_s: float,
    cpus: list[int] | None,
) -> None:
    try:
        if cpus is not None:  # a core of its own: ranks do not time-share one
            os.sched_setaffinity(0, {cpus[rank]})
        _run_rank(name, rank, nproc, steps, port, Path(out), timeout_s)
    except BaseException:
        Path(out, f"error-rank{rank}.txt").write_text(traceback.format_exc())
        sys.stderr.flush()
        os._exit(1)


def _run_rank(
    name: str, rank: int, nproc: int, steps: int, port: int, out: Path, timeout_s: float
) -> None:
    import warnings

    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)  # before any parallel work: one thread besides gloo's
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(nproc))
    dist.init_process_group(
        "gloo",
        rank=rank,
        world_size=nproc,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    program = WORKLOADS[name].program(rank, nproc, steps, dist)
    next(program)  # set-up runs outside the profiled window
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in program:
            pass
    prof.export_chrome_trace(str(out / f"rank{rank}.json.gz"))
    dist.barrier()
    dist.destroy_process_group()
