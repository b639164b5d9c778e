"""Run one zoo workload live: ``nproc`` gloo ranks on 127.0.0.1 under ``torch.profiler``
(CPU activity, ``record_shapes=True``), one Kineto trace per rank.

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
    name: str, out_dir: str | os.PathLike, *, steps: int | None = None, timeout_s: float = 300.0
) -> dict:
    """Run workload ``name`` (see module docstring); return capture.json's document."""
    if name not in WORKLOADS:
        raise InputError(
            f"unknown workload {name!r}; known: {', '.join(sorted(WORKLOADS))}", field="workload"
        )
    workload = WORKLOADS[name]
    steps = workload.default_steps if steps is None else steps
    if steps < 1:
        raise InputError(f"--steps must be >= 1, got {steps}", field="steps")
    started = time.perf_counter()
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)
    with atomic_output(out_dir, directory=True) as tmp:
        os.chmod(tmp, 0o755)
        port = free_local_port()
        procs = [
            ctx.Process(target=_worker, args=(name, r, steps, port, str(tmp), timeout_s))
            for r in range(NPROC)
        ]
        for p in procs:
            p.start()
        join_all(procs, timeout_s, Path(tmp), what="workload")
        files = {}
        for r in range(NPROC):
            path = Path(tmp) / f"rank{r}.json.gz"
            if not path.is_file():
                raise RunFailed(f"rank {r} wrote no trace", file=str(out_dir))
            files[path.name] = sha256_file(path)
        check = _import_check(Path(tmp), out_dir)
        doc = {
            "format": CAPTURE_FORMAT,
            "settings": {
                "workload": name,
                "nproc": NPROC,
                "steps": steps,
                "hidden": 64,
                "seq_len": 16,
                "layers_per_stage": 1,
                "timeout_s": timeout_s,
            },
            "layout": workload.layout,
            "environment": capture_environment(),
            "files": files,
            "import_check": check,
            "wall_s": round(time.perf_counter() - started, 3),
        }
        for stale in Path(tmp).glob("error-rank*.txt"):
            stale.unlink()
        write_json(Path(tmp) / "capture.json", doc)
    return doc


def _import_check(tmp: Path, out_dir) -> dict:
    """Import every rank and merge with a same-host calibration (groups settled)."""
    from tracecanary.kineto import import_kineto_file
    from tracecanary.merge import merge_captures
    from tracecanary.trace_io import write_trace

    with tempfile.TemporaryDirectory(prefix="tracecanary-zoo-check-") as work:
        paths = []
        for r in range(NPROC):
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
                        "ranks": list(range(NPROC)),
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
    return {"collectives": summary["events"], "unknown_groups": 0}


def _worker(name: str, rank: int, steps: int, port: int, out: str, timeout_s: float) -> None:
    try:
        _run_rank(name, rank, steps, port, Path(out), timeout_s)
    except BaseException:
        Path(out, f"error-rank{rank}.txt").write_text(traceback.format_exc())
        sys.stderr.flush()
        os._exit(1)


def _run_rank(name: str, rank: int, steps: int, port: int, out: Path, timeout_s: float) -> None:
    import warnings

    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(NPROC))
    dist.init_process_group(
        "gloo",
        rank=rank,
        world_size=NPROC,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    program = WORKLOADS[name].program(rank, NPROC, steps, dist)
    next(program)  # set-up runs outside the profiled window
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in program:
            pass
    prof.export_chrome_trace(str(out / f"rank{rank}.json.gz"))
    dist.barrier()
    dist.destroy_process_group()
