"""A user's 2-D parallel training loop (gloo, CPU, 4 processes): DTensor tensor parallel
(ColwiseParallel / RowwiseParallel) x FSDP2 (fully_shard) on a (dp=2, tp=2) device mesh.
It imports nothing of TraceCanary; record it unmodified with
``tracecanary capture -o DIR -- python tp_fsdp2_train.py [STEPS]``."""

import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

WORLD, WIDTH, LAYERS = 4, 32, 2


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(WIDTH, 4 * WIDTH)
        self.down = torch.nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(x)))


def train(rank: int, world: int, port: int, steps: int) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    model = torch.nn.Sequential(*[Block() for _ in range(LAYERS)])
    for block in model:
        parallelize_module(block, mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for _ in range(steps):
        model(torch.randn(8, WIDTH)).square().mean().backward()
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free_port = s.getsockname()[1]
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    mp.spawn(train, args=(WORLD, free_port, steps), nprocs=WORLD)
