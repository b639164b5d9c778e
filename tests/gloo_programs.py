"""Small ordinary gloo programs captured under torch.profiler inside the tests (4 ranks,
CPU, deterministic seeds): no group probe, no change a user would have to make. Used by
tests/test_merge_groups.py and tests/test_kineto_campaign.py."""

from __future__ import annotations

import datetime
import multiprocessing
import os
import socket
from pathlib import Path

from tracecanary.canonical import write_json
from tracecanary.kineto import import_kineto_file
from tracecanary.trace_io import write_trace

NPROC = 4
STEPS = 3
TP_GROUPS = ([0, 1], [2, 3])
DP_GROUPS = ([0, 2], [1, 3])
TP_ACTIVATION = 8
"""float32 elements the TP reduce_scatter reduces (and the all_gather rebuilds)."""
DP_GRADIENT = 16
"""float32 elements of the DP gradient all_reduce."""
DP_SCATTER_CHUNK = 4
"""float32 elements each DP member receives from the scatter."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tp_dp_program(rank: int, dist) -> None:
    """An ordinary TP x DP step with Megatron-style sequence parallelism: the TP
    row-parallel output is reduce-scattered and the next column-parallel input
    all-gathered over TP, the DP gradient is all-reduced, and a DP scatter runs from the
    DP group's first rank (non-root members record no dtype).

    Why sequence parallel rather than a TP all_reduce: gloo runs a group's work on its two
    run-loop threads, usually alternating, so a TP all_reduce often runs alone on one
    thread. Nothing a gloo trace holds then tells the world group from the TP group for
    it (an all_reduce records no group size; every rank issues the same one, so the world
    group's sequences agree too; the world group's own threads, created first, do no
    work in the window), and merge rightly refuses in the runs where that thread has the
    lower id on every rank and the timing happens to overlap. The reduce_scatter and
    all_gather record the group size (2) in their shapes, as in a real sequence-parallel
    program, which excludes the world group; thread order then settles TP against DP."""
    import torch

    tp = [dist.new_group(g) for g in TP_GROUPS][rank // 2]
    dps = [dist.new_group(g) for g in DP_GROUPS]
    dp = dps[rank % 2]
    dp_root = DP_GROUPS[rank % 2][0]
    yield  # the profiled window starts here
    for step in range(STEPS):
        act = torch.full((TP_ACTIVATION,), float(step))
        shard = torch.empty(TP_ACTIVATION // len(TP_GROUPS[0]))
        dist.reduce_scatter_tensor(shard, act, group=tp)
        grad = torch.ones(DP_GRADIENT)
        dist.all_reduce(grad, group=dp)
        full = torch.empty(TP_ACTIVATION)
        dist.all_gather_into_tensor(full, shard, group=tp)
        piece = torch.empty(DP_SCATTER_CHUNK)
        chunks = [torch.ones(DP_SCATTER_CHUNK)] * len(DP_GROUPS[0]) if rank == dp_root else None
        dist.scatter(piece, chunks, src=dp_root, group=dp)


def _fsdp2_tp_program(rank: int, dist) -> None:
    """DeviceMesh 2x2: DTensor tensor parallel on "tp", FSDP2 ``fully_shard`` on "dp"."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))
    parallelize_module(model, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    fully_shard(model, mesh=mesh["dp"])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    yield
    for step in range(2):
        gen = torch.Generator().manual_seed(10 * step + rank // 2)
        model(torch.randn(4, 16, generator=gen)).sum().backward()
        opt.step()
        opt.zero_grad()


PROGRAMS = {"tp_dp": _tp_dp_program, "fsdp2_tp": _fsdp2_tp_program}


def _rank_main(name: str, rank: int, port: int, out: str) -> None:
    import warnings

    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(NPROC))
    dist.init_process_group(
        "gloo", rank=rank, world_size=NPROC, timeout=datetime.timedelta(seconds=120)
    )
    program = PROGRAMS[name](rank, dist)
    next(program)  # set-up (group creation, model) runs outside the profiled window
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in program:
            pass
    prof.export_chrome_trace(str(Path(out) / f"rank{rank}.json"))
    dist.barrier()
    dist.destroy_process_group()


def capture_program(name: str, out: Path) -> list[Path]:
    out.mkdir(parents=True)
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.distributed", "torch.profiler"])
    port = _free_port()
    procs = [ctx.Process(target=_rank_main, args=(name, r, port, str(out))) for r in range(NPROC)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    for p in procs:
        if p.exitcode is None:
            p.kill()
    assert [p.exitcode for p in procs] == [0] * NPROC
    return [out / f"rank{r}.json" for r in range(NPROC)]


def import_all(traces: list[Path], out: Path) -> list[Path]:
    paths = []
    for r, trace in enumerate(traces):
        doc = import_kineto_file(trace)
        path = out / f"import{r}.json"
        write_trace(doc, path)
        paths.append(path)
    return paths


def write_same_host(path: Path) -> Path:
    write_json(
        path,
        {
            "format": "tracecanary.calibration/v1",
            "reference": "host",
            "method": "same-host",
            "clocks": [
                {"ranks": list(range(NPROC)), "offset_ns": 0, "drift_ppb": 0, "uncertainty_ns": 0}
            ],
        },
    )
    return path
