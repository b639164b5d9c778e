"""A user's DDP training loop (gloo, CPU, 2 processes): 16 linear layers under
DistributedDataParallel with small gradient buckets. It imports nothing of TraceCanary;
record it unmodified with ``tracecanary capture -o DIR -- python ddp_train.py [STEPS]``
(``--layers``, ``--width``, ``--bucket-mb`` size the model and its gradient buckets)."""

import argparse
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

WORLD = 2


def train(rank: int, world: int, port: int, args: argparse.Namespace) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    layers = [torch.nn.Linear(args.width, args.width) for _ in range(args.layers)]
    ddp = DistributedDataParallel(torch.nn.Sequential(*layers), bucket_cap_mb=args.bucket_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    for _ in range(args.steps):
        ddp(torch.randn(8, args.width)).square().mean().backward()
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("steps", nargs="?", type=int, default=5)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--bucket-mb", type=float, default=0.01)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free_port = s.getsockname()[1]
    mp.spawn(train, args=(WORLD, free_port, parser.parse_args()), nprocs=WORLD)
