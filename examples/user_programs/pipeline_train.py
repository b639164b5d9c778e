"""A user's pipeline-parallel training loop (gloo, CPU, 2 processes):
torch.distributed.pipelining, a GPipe schedule of 4 microbatches over 2 stages. It
imports nothing of TraceCanary; record it unmodified with
``tracecanary capture -o DIR -- python pipeline_train.py [STEPS]``."""

import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

WORLD, WIDTH = 2, 32


def train(rank: int, world: int, port: int, steps: int) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(rank)
    part = torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU())
    stage = PipelineStage(part, rank, world, torch.device("cpu"))
    schedule = ScheduleGPipe(stage, n_microbatches=4, loss_fn=lambda out, y: out.square().mean())
    opt = torch.optim.SGD(part.parameters(), lr=1e-3)
    for _ in range(steps):
        if rank == 0:
            schedule.step(torch.randn(8, WIDTH))
        else:
            schedule.step(target=torch.zeros(8, WIDTH))
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free_port = s.getsockname()[1]
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    mp.spawn(train, args=(WORLD, free_port, steps), nprocs=WORLD)
