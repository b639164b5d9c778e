"""The program behind this directory's Flight Recorder dumps (torch 2.13.0+cpu, gloo,
2 ranks on 127.0.0.1): every collective the recorder keeps for gloo, no send/recv (gloo
records none, see docs/flight-recorder.md), then each rank dumps its recorder in both
forms, JSON (``rank<r>.json``) and pickle (``rank<r>.pkl``).

Run: ``python tests/data/flight_recorder/program.py OUT_DIR``.
"""

import os
import sys

os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")  # read when the recorder starts


def main(rank: int, world: int, port: int, out: str) -> None:
    import torch
    import torch._C._distributed_c10d as c10d
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    pair = dist.new_group([0, 1], group_desc="pair")
    dist.all_reduce(torch.ones(8))
    dist.broadcast(torch.zeros(4, dtype=torch.int64), src=0)
    dist.all_gather_into_tensor(torch.empty(16), torch.ones(8))
    dist.reduce_scatter_tensor(torch.empty(4), torch.ones(8))
    dist.all_reduce(torch.ones(3, dtype=torch.bfloat16), group=pair)
    dist.barrier()
    dist.all_reduce(torch.ones(2), async_op=True).wait()
    dist.all_to_all_single(torch.empty(4), torch.ones(4))
    dist.all_gather([torch.empty(2) for _ in range(world)], torch.ones(2))
    dist.reduce(torch.ones(2), dst=0)
    dist.scatter(torch.empty(2), [torch.ones(2)] * world if rank == 0 else None, src=0)
    dist.gather(torch.ones(2), [torch.empty(2) for _ in range(world)] if rank == 0 else None)
    dist.barrier()
    with open(f"{out}/rank{rank}.json", "wb") as f:
        f.write(c10d._dump_fr_trace_json(True, False))  # includeCollectives, onlyActive
    with open(f"{out}/rank{rank}.pkl", "wb") as f:
        f.write(c10d._dump_fr_trace(True, False, False))  # + includeStackTraces
    dist.destroy_process_group()


if __name__ == "__main__":
    import torch.multiprocessing as mp

    os.makedirs(sys.argv[1], exist_ok=True)
    mp.spawn(main, args=(2, 29541, sys.argv[1]), nprocs=2)
