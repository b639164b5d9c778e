"""Live capture: a small real distributed workload on CPU under ``torch.profiler``.

``capture(out_dir, CaptureSettings(nproc=4, steps=3))`` starts ``nproc`` processes
that join one torch.distributed gloo job on 127.0.0.1 (a free port), run a tiny
transformer-like training step ``steps`` times under ``torch.profiler`` (CPU activity,
``record_shapes=True``) and write one Kineto trace per rank, ``rank<r>.json.gz``, plus
``capture.json`` (settings, layout, torch/python versions, host, file digests).

The step (tensor parallel pairs x pipeline stages, sequence-parallel style):
- rank 0 broadcasts the batch's token ids over the world (int64);
- per layer, inside the rank's tensor-parallel group: all_gather of the sequence shard,
  column-parallel matmul + GELU, row-parallel matmul, reduce_scatter back to the shard
  (real matmuls between the collectives);
- pipeline: stage s hands its activations to stage s+1 (send/recv between the ranks of
  equal tensor-parallel rank; with 2 processes, rank 0 hands off to rank 1);
- backward stand-in (matmuls producing gradients), then data-parallel style async
  all_reduce of three gradient buckets of distinct sizes over the world, and a
  synchronous all_reduce of the loss.

Group attribution (what lets the import give every gloo collective a known group):
tensor-parallel groups are created with ``new_group`` (``group_desc`` ``tp<s>``) only
when they differ in membership from the world (a subgroup equal to the world could
not be told apart from it in a gloo trace); at the start of the profiled region every
group runs a *group probe*: two rounds in which one member (first the group's first
rank, then its second) issues late, while the others issue two async
``all_gather_single`` back to back. On every non-late rank the first work blocks on the
late member, so the second runs on the group's other gloo run-loop thread: both threads
of every group run an all_gather whose output/input ratio gives the group size, which
the import reads as evidence of thread ownership. The probe is recorded as
``record_function("tracecanary.capture:group_probe")``; it is part of the captured
workload, not hidden.

After the run every rank's trace is imported (``tracecanary.kineto``); a collective
whose group the import cannot establish fails the capture. Failure (a rank raises, the
run exceeds ``timeout_s``, the import check fails) raises ``RunFailed`` (exit 1) and
leaves no output directory behind.
"""

from __future__ import annotations

import importlib.metadata
import multiprocessing
import os
import platform
import socket
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

from tracecanary.canonical import atomic_output, sha256_file, write_json
from tracecanary.errors import InputError, RunFailed
from tracecanary.formats.ids import CAPTURE_FORMAT
from tracecanary.ports import free_local_port

# Imported once in the fork server, then shared by every rank: torch.profiler's first
# start imports torch._inductor (seconds of CPU), which would otherwise run per rank.
_PRELOAD = [
    "torch",
    "torch.distributed",
    "torch.profiler",
    "torch._inductor",
    "tracecanary.capture",
]


@dataclass(frozen=True)
class CaptureSettings:
    """Workload size and run limits. ``nproc`` must be even (tensor-parallel pairs)."""

    nproc: int = 4
    steps: int = 3
    hidden: int = 64
    seq_len: int = 32
    layers_per_stage: int = 2
    probe_delay_s: float = 0.05
    timeout_s: float = 120.0


@dataclass(frozen=True)
class Layout:
    tp_size: int
    pp_size: int
    tp_groups: tuple[tuple[int, ...], ...]  # empty when the tp group is the world
    p2p: tuple[tuple[int, int], ...]  # (src, dst) pipeline hand-offs


def capture_environment() -> dict:
    """What a live gloo capture ran on, as ``capture.json`` records it."""
    return {
        "torch": importlib.metadata.version("torch"),
        "python": platform.python_version(),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "backend": "gloo",
        "master_addr": "127.0.0.1",
        "profiler": "torch.profiler.profile(activities=[CPU], record_shapes=True)",
    }


def layout_for(nproc: int) -> Layout:
    """Tensor-parallel pairs x pipeline stages for ``nproc`` ranks (even, >= 2)."""
    if nproc < 2 or nproc % 2:
        raise InputError(f"--nproc must be an even number >= 2, got {nproc}", field="nproc")
    tp, pp = 2, nproc // 2
    tp_groups = tuple(tuple(range(s * tp, (s + 1) * tp)) for s in range(pp)) if pp > 1 else ()
    if pp > 1:
        p2p = tuple((s * tp + t, (s + 1) * tp + t) for s in range(pp - 1) for t in range(tp))
    else:
        p2p = ((0, 1),)
    return Layout(tp, pp, tp_groups, p2p)


def capture(out_dir: str | os.PathLike, settings: CaptureSettings) -> dict:
    """Run the workload; write ``rank<r>.json.gz`` + ``capture.json`` atomically into
    ``out_dir``; return the capture.json document."""
    if settings.steps < 1:
        raise InputError(f"--steps must be >= 1, got {settings.steps}", field="steps")
    layout = layout_for(settings.nproc)
    started = time.perf_counter()
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)
    with atomic_output(out_dir, directory=True) as tmp:
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the result is a plain directory
        init_method = f"tcp://127.0.0.1:{free_local_port()}"
        procs = [
            ctx.Process(
                target=_worker,
                args=(rank, asdict(settings), init_method, str(tmp)),
                name=f"tracecanary-capture-rank{rank}",
            )
            for rank in range(settings.nproc)
        ]
        for p in procs:
            p.start()
        join_all(procs, settings.timeout_s, Path(tmp))
        files = {}
        for rank in range(settings.nproc):
            path = Path(tmp) / f"rank{rank}.json.gz"
            if not path.is_file():
                raise RunFailed(f"rank {rank} wrote no trace", file=str(out_dir))
            files[path.name] = sha256_file(path)
        check = _import_check(Path(tmp), settings.nproc, out_dir)
        doc = {
            "format": CAPTURE_FORMAT,
            "settings": asdict(settings),
            "layout": {
                "tp_size": layout.tp_size,
                "pp_size": layout.pp_size,
                "groups": [{"desc": "default_pg", "ranks": list(range(settings.nproc))}]
                + [{"desc": f"tp{s}", "ranks": list(g)} for s, g in enumerate(layout.tp_groups)],
                "p2p": [list(pair) for pair in layout.p2p],
            },
            "environment": capture_environment(),
            "files": files,
            "import_check": check,
            "wall_s": round(time.perf_counter() - started, 3),
        }
        write_json(Path(tmp) / "capture.json", doc)
    return doc


def _import_check(tmp: Path, nproc: int, out_dir) -> dict:
    """Import every rank's trace; fail the capture if any collective's group cannot be
    established (the traces would be refused downstream)."""
    from tracecanary.kineto import import_kineto_file

    collectives = 0
    for rank in range(nproc):
        doc = import_kineto_file(tmp / f"rank{rank}.json.gz")
        unknown = doc["meta"]["kineto"]["unknown_groups"]
        if unknown:
            raise RunFailed(
                f"rank {rank}: the import cannot establish the group of "
                f"{sum(unknown.values())} collectives ({', '.join(sorted(unknown))})",
                file=str(out_dir),
            )
        collectives += len(doc["events"])
    return {"collectives": collectives, "unknown_groups": 0}


def join_all(procs: list, timeout_s: float, tmp: Path, what: str = "capture") -> None:
    """Wait for every rank process; RunFailed naming the first failed rank (with the last
    line of its ``error-rank<r>.txt``) or the timeout. Every process is ended on return."""
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            alive = [p for p in procs if p.exitcode is None]
            failed = [p for p in procs if p.exitcode not in (None, 0)]
            if failed:
                raise RunFailed(_failure(procs.index(failed[0]), failed[0].exitcode, tmp))
            if not alive:
                return
            if time.monotonic() > deadline:
                raise RunFailed(f"{what} did not finish within {timeout_s} s")
            alive[0].join(timeout=0.1)
    finally:
        for p in procs:
            if p.exitcode is None:
                p.terminate()
        for p in procs:
            p.join(timeout=5)
            if p.exitcode is None:
                p.kill()
                p.join()


def _failure(rank: int, code: int, tmp: Path) -> str:
    err = tmp / f"error-rank{rank}.txt"
    last = ""
    if err.is_file():
        lines = [ln for ln in err.read_text(errors="replace").splitlines() if ln.strip()]
        last = lines[-1] if lines else ""
    return f"rank {rank} failed (exit code {code}){': ' + last if last else ''}"


# --- inside each rank --------------------------------------------------------------


def _worker(rank: int, settings: dict, init_method: str, out_dir: str) -> None:
    try:
        _run_rank(rank, CaptureSettings(**settings), init_method, Path(out_dir))
    except BaseException:
        Path(out_dir, f"error-rank{rank}.txt").write_text(traceback.format_exc())
        sys.stderr.flush()
        os._exit(1)


def _run_rank(rank: int, s: CaptureSettings, init_method: str, out: Path) -> None:
    import datetime
    import warnings

    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, record_function

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    n = s.nproc
    layout = layout_for(n)
    dist.init_process_group(
        "gloo",
        init_method=init_method,
        rank=rank,
        world_size=n,
        timeout=datetime.timedelta(seconds=s.timeout_s),
    )
    world = dist.group.WORLD
    tp_handles = [
        dist.new_group(list(g), group_desc=f"tp{k}") for k, g in enumerate(layout.tp_groups)
    ]
    stage = rank // layout.tp_size
    tp_group = tp_handles[stage] if tp_handles else world
    tp_ranks = list(layout.tp_groups[stage]) if tp_handles else list(range(n))
    tp = layout.tp_size

    gen = torch.Generator().manual_seed(1234 + rank)
    h, seq, ffn = s.hidden, s.seq_len, 4 * s.hidden
    if seq % tp:
        raise ValueError("seq_len must be divisible by the tensor-parallel size")
    vocab = 256
    emb = torch.randn(vocab, h, generator=gen)
    w1 = [torch.randn(h, ffn // tp, generator=gen) / h**0.5 for _ in range(s.layers_per_stage)]
    w2 = [torch.randn(ffn // tp, h, generator=gen) / ffn**0.5 for _ in range(s.layers_per_stage)]
    sends = [dst for src, dst in layout.p2p if src == rank]
    recvs = [src for src, dst in layout.p2p if dst == rank]
    # stages > 1: receive before computing; one stage: both sides hand off after it
    recv_first = layout.pp_size > 1
    dist.barrier()

    def probe(group, members: list[int]) -> None:
        x = torch.full((4,), float(rank))
        for late in members[:2]:
            if rank == late:
                time.sleep(s.probe_delay_s)
            outs = [torch.empty(4 * len(members)) for _ in range(2)]
            works = [dist.all_gather_single(o, x, group=group, async_op=True) for o in outs]
            for w in works:
                w.wait()

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with record_function("tracecanary.capture:group_probe"):
            probe(world, list(range(n)))
            if tp_handles:
                probe(tp_group, tp_ranks)
        for step in range(s.steps):
            with record_function(f"tracecanary.capture:step{step}"):
                tokens = torch.randint(0, vocab, (seq,), generator=gen)
                dist.broadcast(tokens, src=0)
                shard = emb[tokens].reshape(tp, seq // tp, h)[rank % tp].contiguous()
                for src in recvs if recv_first else ():  # activations from the previous stage
                    dist.recv(shard, src=src)
                for layer in range(s.layers_per_stage):
                    full = torch.empty(seq, h)
                    dist.all_gather_single(full, shard, group=tp_group)
                    hidden = torch.nn.functional.gelu(full @ w1[layer])
                    partial = hidden @ w2[layer]
                    shard = torch.empty(seq // tp, h)
                    dist.reduce_scatter_single(shard, partial, group=tp_group)
                for dst in sends:  # pipeline: activations to the next stage
                    dist.send(shard, dst=dst)
                for src in () if recv_first else recvs:
                    dist.recv(torch.empty_like(shard), src=src)
                loss = (shard.float() ** 2).mean().reshape(1)
                # backward stand-in: gradient-shaped matmuls, then DDP-style bucketed
                # async all_reduce over the world (three buckets of distinct sizes)
                grads = [shard.T @ shard, (w1[0].T @ w1[0]).flatten(), w2[0].flatten()[: h * 3]]
                works = [dist.all_reduce(g.contiguous(), async_op=True) for g in grads]
                for w in works:
                    w.wait()
                dist.all_reduce(loss)
    prof.export_chrome_trace(str(out / f"rank{rank}.json.gz"))
    dist.barrier()
    dist.destroy_process_group()
