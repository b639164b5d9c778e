"""A user's ring-attention loop (gloo, CPU, 2 processes): the sequence is split across
ranks; each step passes the key/value blocks around the ring with ``isend`` / ``irecv``
(world - 1 hops, attention on each block as it arrives) and ends with an
``all_gather`` of the attention outputs. It imports nothing of TraceCanary; record it
unmodified with ``tracecanary capture -o DIR -- python ring_attention.py [STEPS]``."""

import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD, BLOCK, HEAD_DIM = 2, 16, 32


def ring_step(q, k, v, rank: int, world: int):
    """One ring-attention pass: softmax over every rank's key block, online."""
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    out = torch.zeros_like(q)
    norm = torch.zeros(q.shape[0], 1)
    top = torch.full((q.shape[0], 1), float("-inf"))
    for hop in range(world):
        if hop < world - 1:  # pass the current block on while attending to it
            k_next, v_next = torch.empty_like(k), torch.empty_like(v)
            ops = [
                dist.isend(k, nxt),
                dist.isend(v, nxt),
                dist.irecv(k_next, prv),
                dist.irecv(v_next, prv),
            ]
        scores = q @ k.T / HEAD_DIM**0.5
        new_top = torch.maximum(top, scores.max(-1, keepdim=True).values)
        scale = (top - new_top).exp()
        weights = (scores - new_top).exp()
        out = out * scale + weights @ v
        norm = norm * scale + weights.sum(-1, keepdim=True)
        top = new_top
        if hop < world - 1:
            for op in ops:
                op.wait()
            k, v = k_next, v_next
    return out / norm


def run(rank: int, world: int, port: int, steps: int) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(rank)
    proj = torch.randn(HEAD_DIM, 3 * HEAD_DIM, generator=gen) / HEAD_DIM**0.5
    for _ in range(steps):
        x = torch.randn(BLOCK, HEAD_DIM, generator=gen)
        q, k, v = (x @ proj).split(HEAD_DIM, dim=-1)
        out = ring_step(q, k.contiguous(), v.contiguous(), rank, world)
        gathered = [torch.empty_like(out) for _ in range(world)]
        dist.all_gather(gathered, out.contiguous())
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free_port = s.getsockname()[1]
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    mp.spawn(run, args=(WORLD, free_port, steps), nprocs=WORLD)
