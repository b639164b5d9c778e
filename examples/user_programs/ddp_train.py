"""A user's DDP training loop (gloo, CPU, 2 processes): 16 linear layers under
DistributedDataParallel with small gradient buckets. It imports nothing of TraceCanary;
record it unmodified with ``tracecanary capture -o DIR -- python ddp_train.py [STEPS]``."""

import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

WORLD, LAYERS, WIDTH = 2, 16, 64


def train(rank: int, world: int, port: int, steps: int) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)])
    ddp = DistributedDataParallel(model, bucket_cap_mb=0.01)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    for _ in range(steps):
        ddp(torch.randn(8, WIDTH)).square().mean().backward()
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free_port = s.getsockname()[1]
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    mp.spawn(train, args=(WORLD, free_port, steps), nprocs=WORLD)
