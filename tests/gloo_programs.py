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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tp_dp_program(rank: int, dist) -> None:
    """An ordinary TP x DP step: TP all_reduce and all_gather, DP gradient all_reduce,
    a DP scatter from the DP group's first rank (non-root members record no dtype)."""
    import torch

    tp = [dist.new_group(g) for g in TP_GROUPS][rank // 2]
    dps = [dist.new_group(g) for g in DP_GROUPS]
    dp = dps[rank % 2]
    dp_root = DP_GROUPS[rank % 2][0]
    yield  # the profiled window starts here
    for step in range(STEPS):
        act = torch.full((8,), float(step))
        dist.all_reduce(act, group=tp)
        grad = torch.ones(16)
        dist.all_reduce(grad, group=dp)
        full = torch.empty(16)
        dist.all_gather_into_tensor(full, act, group=tp)
        shard = torch.empty(4)
        chunks = [torch.ones(4), torch.ones(4)] if rank == dp_root else None
        dist.scatter(shard, chunks, src=dp_root, group=dp)


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
