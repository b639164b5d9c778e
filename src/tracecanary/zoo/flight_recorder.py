"""Run one zoo workload live with PyTorch's Flight Recorder on, and dump it per rank.

``record_flight_recorder(name, out_dir, nproc=2, steps=N)`` runs the workload's program
(``tracecanary.zoo.programs``, unchanged) on ``nproc`` gloo ranks on 127.0.0.1, no
profiler, with ``TORCH_FR_BUFFER_SIZE`` set (torch's own default is 2000 entries, on for
every process group), and after a closing barrier each rank dumps its recorder the two
ways torch offers: ``rank<r>.json`` (``_dump_fr_trace_json``) and ``rank<r>.pkl``
(``_dump_fr_trace``, the pickle torch's dump-on-timeout writer and ``torchfrtrace`` use).

Guarantees: ``out_dir`` receives both files for every rank, atomically, or nothing
(``RunFailed`` naming the first failing rank, or the timeout).
"""

from __future__ import annotations

import datetime
import multiprocessing
import os
import sys
import traceback
from pathlib import Path

from tracecanary.canonical import atomic_output
from tracecanary.capture import join_all
from tracecanary.errors import InputError, RunFailed
from tracecanary.ports import free_local_port
from tracecanary.zoo.programs import WORKLOADS

BUFFER_SIZE = 20_000


def record_flight_recorder(
    name: str,
    out_dir: str | os.PathLike,
    *,
    nproc: int = 2,
    steps: int = 3,
    buffer_size: int = BUFFER_SIZE,
    timeout_s: float = 300.0,
) -> list[Path]:
    """Run workload ``name`` and dump each rank's recorder (see module docstring);
    return the dump paths, JSON then pickle per rank."""
    if name not in WORKLOADS:
        raise InputError(
            f"unknown workload {name!r}; known: {', '.join(sorted(WORKLOADS))}", field="workload"
        )
    ctx = multiprocessing.get_context("spawn")
    with atomic_output(out_dir, directory=True) as tmp:
        os.chmod(tmp, 0o755)
        port = free_local_port()
        procs = [
            ctx.Process(
                target=_worker,
                args=(name, r, nproc, steps, port, str(tmp), buffer_size, timeout_s),
            )
            for r in range(nproc)
        ]
        for p in procs:
            p.start()
        join_all(procs, timeout_s, Path(tmp), what="workload")
        for r in range(nproc):
            for suffix in ("json", "pkl"):
                if not (Path(tmp) / f"rank{r}.{suffix}").is_file():
                    raise RunFailed(f"rank {r} wrote no rank{r}.{suffix}", file=str(out_dir))
    return [Path(out_dir) / f"rank{r}.{s}" for r in range(nproc) for s in ("json", "pkl")]


def _worker(*args) -> None:
    rank, out = args[1], args[5]
    try:
        _run_rank(*args)
    except BaseException:
        Path(out, f"error-rank{rank}.txt").write_text(traceback.format_exc())
        sys.stderr.flush()
        os._exit(1)


def _run_rank(
    name: str,
    rank: int,
    nproc: int,
    steps: int,
    port: int,
    out: str,
    buffer_size: int,
    timeout_s: float,
) -> None:
    # read once, when the recorder is first used: before the first process group
    os.environ["TORCH_FR_BUFFER_SIZE"] = str(buffer_size)
    import warnings

    import torch
    import torch._C._distributed_c10d as c10d
    import torch.distributed as dist

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=nproc,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    for _ in WORKLOADS[name].program(rank, nproc, steps, dist):
        pass
    dist.barrier()
    # includeCollectives=True, onlyActive=False (and, for the pickle, no stack traces)
    Path(out, f"rank{rank}.json").write_bytes(c10d._dump_fr_trace_json(True, False))
    Path(out, f"rank{rank}.pkl").write_bytes(c10d._dump_fr_trace(True, False, False))
    dist.destroy_process_group()
