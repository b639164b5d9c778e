"""The zoo's programs: ordinary PyTorch distributed code, one generator per workload.

A program runs inside one rank after ``init_process_group("gloo")``: it builds its model
and process groups, ``yield``s once (the profiled window starts there), then runs
``steps`` steps (``tp_decode``: decode tokens after a prefill). Seeds are fixed, so every
run issues the same collectives. Sizes are chosen so a 4-rank capture takes well under
a minute on two CPU cores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Workload:
    name: str
    program: Callable[..., Iterator[None]]
    default_steps: int
    description: str
    layout: dict  # on 4 ranks: tp_size, pp_size, groups [{desc, ranks}], p2p [[src, dst]]
    # the world sizes the program runs on; one whose layout spans all ranks (data, tensor
    # or pipeline parallel over the world) runs on 2 as well, a rank per core of a 2-core
    # machine instead of two ranks sharing one
    ranks: tuple[int, ...] = (4,)

    def layout_on(self, world: int) -> dict:
        """The layout on ``world`` ranks (one of ``ranks``): the 4-rank layout scaled."""
        if world not in self.ranks:
            raise ValueError(f"{self.name} runs on {self.ranks} ranks, not {world}")
        if world == 4:
            return self.layout
        return {
            "tp_size": world if self.layout["tp_size"] == 4 else self.layout["tp_size"],
            "pp_size": world if self.layout["pp_size"] == 4 else self.layout["pp_size"],
            "groups": _world(world),
            "p2p": [[r, r + 1] for r in range(world - 1)] if self.layout["p2p"] else [],
        }


def ddp(rank: int, world: int, steps: int, dist) -> Iterator[None]:
    """DistributedDataParallel training of a small transformer encoder; small gradient
    buckets so each step all_reduces several buckets."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
    model = DistributedDataParallel(
        torch.nn.Sequential(layer, torch.nn.Linear(64, 64)), bucket_cap_mb=0.02
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(100 + rank)
    yield
    for _ in range(steps):
        x = torch.randn(2, 8, 64, generator=gen)
        model(x).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()


def fsdp2_tp(rank: int, world: int, steps: int, dist) -> Iterator[None]:
    """DeviceMesh 2x2: DTensor ``parallelize_module`` on "tp", FSDP2 ``fully_shard`` on
    "dp"."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    mesh = init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32))
    parallelize_module(model, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    fully_shard(model, mesh=mesh["dp"])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    yield
    for step in range(steps):
        gen = torch.Generator().manual_seed(10 * step + rank // 2)
        model(torch.randn(4, 32, generator=gen)).sum().backward()
        opt.step()
        opt.zero_grad()


def tp_decode(rank: int, world: int, steps: int, dist) -> Iterator[None]:
    """A Llama-architecture model (``tracecanary.zoo.llama``), tensor parallel over all
    ranks: a 16-token prefill, then ``steps`` greedy decode tokens with a KV cache."""
    import torch

    from tracecanary.zoo.llama import LlamaConfig, build, forward

    config = LlamaConfig()
    model = build(config, rank, world)
    group = dist.group.WORLD
    prompt = torch.arange(16) % config.vocab
    yield
    with torch.no_grad():
        cache: list = []
        logits = forward(model, prompt, torch.arange(16), cache, group, dist)
        for t in range(steps):
            token = logits.argmax().reshape(1)
            logits = forward(model, token, torch.tensor([16 + t]), cache, group, dist)


def pp(rank: int, world: int, steps: int, dist) -> Iterator[None]:
    """``torch.distributed.pipelining``: one stage per rank, GPipe schedule, 4
    microbatches per step (activations and gradients travel by send/recv)."""
    import torch
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    torch.manual_seed(rank)
    stage_module = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU())
    stage = PipelineStage(stage_module, rank, world, torch.device("cpu"))

    def loss_fn(out, target):
        return (out - target).pow(2).mean()

    schedule = ScheduleGPipe(stage, n_microbatches=4, loss_fn=loss_fn)
    gen = torch.Generator().manual_seed(7)
    yield
    for _ in range(steps):
        x = torch.randn(8, 32, generator=gen)
        target = torch.randn(8, 32, generator=gen)
        if rank == 0:
            schedule.step(x)
        elif rank == world - 1:
            schedule.step(target=target)
        else:
            schedule.step()


def moe(rank: int, world: int, steps: int, dist) -> Iterator[None]:
    """Mixture-of-Experts, expert parallel x data parallel on a 2 x (world / 2) grid: each
    expert-parallel group ([0, 1], [2, 3]) holds one expert per rank; top-1 routing, the
    per-expert token counts exchanged with an int64 ``all_to_all_single``, tokens
    dispatched and combined with the autograd-aware ``all_to_all_single``
    (``torch.distributed.nn.functional``; uneven splits that change every step, two more
    in backward), the experts' gradients all_reduced over their data-parallel group
    ([0, 2], [1, 3]) and the router's over the world."""
    import warnings

    import torch
    from torch.distributed.nn.functional import all_to_all_single

    warnings.filterwarnings("ignore", category=FutureWarning)  # torch 2.13 deprecates it
    ep_size = 2
    ep_groups = [dist.new_group(list(range(k, k + ep_size))) for k in range(0, world, ep_size)]
    dp_groups = [dist.new_group(list(range(k, world, ep_size))) for k in range(ep_size)]
    ep, dp = ep_groups[rank // ep_size], dp_groups[rank % ep_size]
    width, tokens = 16, 32
    torch.manual_seed(0)  # one router on every rank
    router = torch.nn.Linear(width, ep_size)
    torch.manual_seed(1 + rank % ep_size)  # expert e is replicated over its dp group
    expert = torch.nn.Sequential(
        torch.nn.Linear(width, 2 * width), torch.nn.ReLU(), torch.nn.Linear(2 * width, width)
    )
    opt = torch.optim.SGD([*router.parameters(), *expert.parameters()], lr=1e-2)
    gen = torch.Generator().manual_seed(100 + rank)
    yield
    for _ in range(steps):
        x = torch.randn(tokens, width, generator=gen)
        gate, choice = router(x).softmax(-1).max(-1)
        order = choice.argsort(stable=True)
        send_counts = torch.bincount(choice, minlength=ep_size)
        recv_counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv_counts, send_counts, group=ep)
        send, recv = send_counts.tolist(), recv_counts.tolist()
        routed = (x * gate.unsqueeze(-1))[order]
        arrived = all_to_all_single(torch.empty(sum(recv), width), routed, recv, send, group=ep)
        done = all_to_all_single(torch.empty(tokens, width), expert(arrived), send, recv, group=ep)
        torch.empty_like(done).index_copy(0, order, done).square().mean().backward()
        for p in expert.parameters():
            dist.all_reduce(p.grad, group=dp)
        for p in router.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        opt.zero_grad()


def _world(n: int) -> list[dict]:
    return [{"desc": "default_pg", "ranks": list(range(n))}]


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            "ddp",
            ddp,
            50,
            "DDP training of a small transformer, gradient buckets",
            {"tp_size": 1, "pp_size": 1, "groups": _world(4), "p2p": []},
            ranks=(2, 4),
        ),
        Workload(
            "fsdp2_tp",
            fsdp2_tp,
            50,
            "DeviceMesh 2x2: FSDP2 fully_shard on dp, DTensor tensor parallel on tp",
            {
                "tp_size": 2,
                "pp_size": 1,
                "groups": _world(4)
                + [{"desc": "mesh_dp", "ranks": r} for r in ([0, 2], [1, 3])]
                + [{"desc": "mesh_tp", "ranks": r} for r in ([0, 1], [2, 3])],
                "p2p": [],
            },
        ),
        Workload(
            "tp_decode",
            tp_decode,
            200,
            "Llama-architecture decoder, tensor parallel over all ranks, prefill + KV-cache decode",
            {"tp_size": 4, "pp_size": 1, "groups": _world(4), "p2p": []},
            ranks=(2, 4),
        ),
        Workload(
            "moe",
            moe,
            20,
            "Mixture-of-Experts, expert parallel 2 x data parallel 2: all_to_allv dispatch "
            "and combine (splits change every step, two more in backward), DP all_reduce",
            {
                "tp_size": 1,
                "pp_size": 1,
                "groups": _world(4)
                + [{"desc": "expert_parallel", "ranks": r} for r in ([0, 1], [2, 3])]
                + [{"desc": "data_parallel", "ranks": r} for r in ([0, 2], [1, 3])],
                "p2p": [],
            },
        ),
        Workload(
            "pp",
            pp,
            50,
            "torch.distributed.pipelining, a stage per rank, GPipe, 4 microbatches (send/recv)",
            {"tp_size": 1, "pp_size": 4, "groups": _world(4), "p2p": [[0, 1], [1, 2], [2, 3]]},
            ranks=(2, 4),
        ),
    )
}
