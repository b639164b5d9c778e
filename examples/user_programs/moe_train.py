"""A user's Mixture-of-Experts layer (gloo, CPU, expert parallel over every rank): top-1
routing, the token counts exchanged first with an int64 ``all_to_all_single``, tokens
dispatched to their expert's rank and combined back with the autograd-aware
``torch.distributed.nn.functional.all_to_all_single`` (uneven split sizes that change
every step; backward adds two more), and the dense (router) gradients all_reduced
data-parallel. It imports nothing of TraceCanary; record it unmodified with
``tracecanary capture -o DIR -- torchrun --standalone --nproc-per-node 2 moe_train.py
[STEPS]`` (``--tokens`` and ``--width`` size it)."""

import argparse
import warnings

import torch
import torch.distributed as dist
from torch.distributed.nn.functional import all_to_all_single

# torch 2.13 marks this autograd-aware all_to_all_single deprecated; it is what MoE code calls
warnings.filterwarnings("ignore", category=FutureWarning, module=__name__)


def main(args: argparse.Namespace) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    torch.manual_seed(0)  # the router is the same on every rank
    router = torch.nn.Linear(args.width, world)  # one expert per rank
    torch.manual_seed(1 + rank)  # each rank's expert its own
    expert = torch.nn.Sequential(
        torch.nn.Linear(args.width, 2 * args.width),
        torch.nn.ReLU(),
        torch.nn.Linear(2 * args.width, args.width),
    )
    opt = torch.optim.SGD([*router.parameters(), *expert.parameters()], lr=1e-2)
    gen = torch.Generator().manual_seed(100 + rank)
    for _ in range(args.steps):
        x = torch.randn(args.tokens, args.width, generator=gen)
        scores = router(x).softmax(-1)
        gate, choice = scores.max(-1)  # top-1: each token to one expert's rank
        order = choice.argsort(stable=True)
        send_counts = torch.bincount(choice, minlength=world)
        recv_counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv_counts, send_counts)  # int64 counts first
        send_split, recv_split = send_counts.tolist(), recv_counts.tolist()
        tokens = (x * gate.unsqueeze(-1))[order]  # gated before dispatch: both get gradients
        arrived = all_to_all_single(
            torch.empty(sum(recv_split), args.width), tokens, recv_split, send_split
        )
        done = all_to_all_single(
            torch.empty(args.tokens, args.width), expert(arrived), send_split, recv_split
        )
        out = torch.empty_like(done).index_copy(0, order, done)
        out.square().mean().backward()
        for p in router.parameters():  # the dense part is data parallel
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("steps", nargs="?", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--width", type=int, default=16)
    main(parser.parse_args())
