"""The per-rank replayer and ladder runner: ``python -m tracecanary.physical.worker``.

Runs under ``physical.local_ranks``, torchrun or any launcher that sets RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT. Two sub-commands:

``replay --program DIR --staging S --backend B --config FILE [--warmup W] [--iters K]
[--use-timestamps] [--fault SPEC]``
    Parses ``DIR/<RANK>.json``, creates the process groups from its ``init`` entries
    (in order, on every rank; a group holding every rank is the world group), runs
    ``W`` untimed passes and ``K`` timed passes of the whole program, each pass
    starting after a world barrier. Per executed op and timed pass: ``start_ns`` /
    ``end_ns`` (``time.monotonic_ns``, CLOCK_MONOTONIC of the host; on CUDA after a
    device synchronisation), ``latency_ns`` and the data-correctness check. With
    ``--use-timestamps`` every timed op waits until ``startTime_ns`` after its pass
    started (PARAM's ``--use-timestamp``; warm-up passes do not wait).

``sweep --staging S --backend B --collective C --dtype D --counts N,... --warmup W
--iters K --cycles Y [--config FILE] [--fault SPEC]``
    nccl-tests-style ladder: per rung (element count) and cycle, ``W`` untimed then
    ``K`` timed iterations, each checked.

Evidence: each rank writes ``S/rank<r>/env.json`` first, then one Parquet file per
timed pass or rung, then ``done.json`` followed by a final world barrier (so a rank
that passed the barrier knows every rank has written everything); on an exception
``failed.json`` with the error. Nothing is reported as correct that was not checked.

``--fault`` (test aid, recorded in attempt.json): ``kill-rank=R`` makes rank R exit
abruptly (``os._exit(86)``) halfway through the last timed pass (the last rung of a
sweep); ``hang-rank=R`` makes it sleep there forever (the launcher's timeout must
fire); ``corrupt-rank=R`` makes it perturb every payload it contributes.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
import torch.distributed as dist

from tracecanary.param.dtypes import PARAM_DTYPES, canonical_dtype
from tracecanary.param.program import parse_rank_file
from tracecanary.physical import correctness, strategies
from tracecanary.physical.environment import place_rank, rank_record
from tracecanary.physical.rank_contract import (
    KILL_EXIT_CODE,
    PROGRESS_PREFIX,
    REPLAY_ROW_SCHEMA,
    SWEEP_ROW_SCHEMA,
    parse_fault,
)


def _progress(rank: int, message: str) -> None:
    if rank == 0:
        print(PROGRESS_PREFIX + message, file=sys.stderr, flush=True)


def _write_table(table: pa.Table, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def _write_json(path: Path, doc: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


class _Rank:
    """Process-level setup shared by replay and sweep."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.rank = int(os.environ["RANK"])
        self.world_size = int(os.environ["WORLD_SIZE"])
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.backend = args.backend
        self.stage = Path(args.staging) / f"rank{self.rank}"
        self.stage.mkdir(parents=True, exist_ok=True)
        for stale in self.stage.iterdir():  # this rank owns its directory
            stale.unlink()
        if self.backend == "nccl":
            self.device = torch.device("cuda", self.local_rank)
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
        self.is_cuda = self.device.type == "cuda"
        self.env = rank_record(self.rank, self.local_rank, self.backend, self.device)
        if not self.is_cuda:
            local_world = int(os.environ.get("LOCAL_WORLD_SIZE", self.world_size))
            self.env["placement"] = place_rank(self.local_rank, local_world)
        self.host = self.env["host"]
        _write_json(self.stage / "env.json", self.env)
        fault = parse_fault(args.fault)
        self.fault_kind = fault[0] if fault and fault[1] == self.rank else None
        timeout = datetime.timedelta(seconds=float(args.pg_timeout))
        kwargs = {"device_id": self.device} if self.is_cuda else {}
        dist.init_process_group(self.backend, timeout=timeout, **kwargs)

    def sync(self) -> None:
        if self.is_cuda:
            torch.cuda.synchronize(self.device)

    def maybe_fault(self) -> None:
        if self.fault_kind == "kill-rank":
            os._exit(KILL_EXIT_CODE)
        if self.fault_kind == "hang-rank":
            while True:
                time.sleep(3600)

    def finish(self, rows: int) -> None:
        # done.json BEFORE the final barrier: once any rank passes the barrier, every
        # rank's done.json exists, so the assembling node never races a slower node.
        _write_json(self.stage / "done.json", {"rank": self.rank, "rows": rows})
        dist.barrier()
        dist.destroy_process_group()


def _wait_until(target_ns: int) -> None:
    while True:
        remaining = target_ns - time.monotonic_ns()
        if remaining <= 0:
            return
        if remaining > 2_000_000:
            time.sleep((remaining - 1_000_000) / 1e9)


def _make_groups(program, world_size: int) -> dict[int, object]:
    """pg_id -> process group (None = world). As PARAM does, the first group holding every
    rank is the world group; every other ``init`` entry becomes ``new_group`` (called on
    every rank in file order, since group creation is collective)."""
    groups: dict[int, object] = {-1: None}
    world_taken = False
    for g in program.groups:
        if not world_taken and g.ranks == tuple(range(world_size)):
            groups[g.pg_id] = None
            world_taken = True
        else:
            groups[g.pg_id] = dist.new_group(ranks=list(g.ranks))
    return groups


def replay(args: argparse.Namespace) -> int:
    rk = _Rank(args)
    config = json.loads(Path(args.config).read_text(encoding="utf-8"))
    mode = config["mode"]
    program = parse_rank_file(
        Path(args.program) / f"{rk.rank}.json", rk.rank, rk.world_size, backend=rk.backend
    )
    comm = strategies.Comm(rk.rank, rk.device, _make_groups(program, rk.world_size))
    ops = program.executed()
    n = len(ops)
    specs = [
        strategies.OpSpec(
            index=i,
            op=row.op,
            in_elems=int(row.in_elems),
            out_elems=int(row.out_elems),
            info=PARAM_DTYPES.get(row.dtype),
            pg_id=int(row.pg_id),
            members=program.members(int(row.pg_id)),
            root=int(row.root),
            src=int(row.src_rank),
            dst=int(row.dst_rank),
            in_split=row.in_split,
            out_split=row.out_split,
            nbytes=int(row.bytes),
        )
        for i, row in enumerate(ops.itertuples(index=False))
    ]
    if mode == "fused":
        steps = strategies.plan_buckets(specs, int(config["bucket_bytes"]))
    else:
        steps = [[i] for i in range(n)]
    bucket = np.full(n, -1, dtype=np.int64)
    occ = ops["occ"].to_numpy()
    for step in steps:
        if len(step) > 1:
            bucket[step] = occ[step[0]]
    start_time_ns = ops["start_time_ns"].to_numpy()
    corrupt = rk.fault_kind == "corrupt-rank"
    op_barrier = bool(config.get("op_barrier", False))
    bytes_arr = ops["bytes"].to_numpy()

    static = {
        "occ": pa.array(occ, pa.int64()),
        "marker": pa.array(ops["marker"].tolist(), pa.string()),
        "op": pa.array(ops["op"].tolist(), pa.string()),
        "bytes": pa.array(bytes_arr, pa.int64()),
        "dtype": pa.array(
            [PARAM_DTYPES[d].canonical if d else "" for d in ops["dtype"]], pa.string()
        ),
        "weight": pa.array(ops["weight"].to_numpy(), pa.float64()),
        "phase": pa.array(ops["phase"].tolist(), pa.string()),
        "rank": pa.array(np.full(n, rk.rank, dtype=np.int64)),
        "host": pa.array([rk.host] * n, pa.string()),
        "fused_bucket": pa.array(bucket),
        "entry": pa.array(ops["entry"].to_numpy(), pa.int64()),
        "pg_id": pa.array(ops["pg_id"].to_numpy(), pa.int64()),
    }

    def run_pass(timed: bool, iteration: int, last: bool):
        start = np.zeros(n, dtype=np.int64)
        end = np.zeros(n, dtype=np.int64)
        ok = np.zeros(n, dtype=bool)
        dist.barrier()
        t0 = time.monotonic_ns()
        for k, step in enumerate(steps):
            if last and k == len(steps) // 2:
                rk.maybe_fault()
            head = specs[step[0]]
            if timed and args.use_timestamps:
                _wait_until(t0 + int(start_time_ns[step[0]]))
            bufs = [
                correctness.prepare(
                    specs[i].op,
                    in_elems=specs[i].in_elems,
                    out_elems=specs[i].out_elems,
                    info=specs[i].info,
                    members=specs[i].members,
                    rank=rk.rank,
                    root=specs[i].root,
                    src=specs[i].src,
                    in_split=specs[i].in_split,
                    out_split=specs[i].out_split,
                    device=rk.device,
                    corrupt=corrupt,
                )
                for i in step
            ]
            if len(step) > 1:
                prepared = strategies.fused([specs[i] for i in step], bufs, comm)
            elif mode == "decomposed":
                prepared = strategies.decomposed(head, bufs[0], comm)
            elif mode == "chunked":
                prepared = strategies.chunked(head, bufs[0], comm, int(config["chunks"]))
            else:
                prepared = strategies.native(head, bufs[0], comm)
            if op_barrier and head.op not in ("send", "recv"):
                dist.barrier(group=comm.group(head.pg_id))
            rk.sync()
            s = time.monotonic_ns()
            prepared.run()
            rk.sync()
            e = time.monotonic_ns()
            if prepared.finish is not None:
                prepared.finish()
            if len(step) == 1:
                start[step[0]], end[step[0]] = s, e
                ok[step[0]] = correctness.check(bufs[0])
                continue
            # A fused bucket: each op gets its bytes' share of the bucket's time.
            weights = bytes_arr[step].astype(np.float64)
            shares = (
                weights / weights.sum() if weights.sum() > 0 else np.full(len(step), 1 / len(step))
            )
            bounds = s + np.round(np.concatenate([[0.0], np.cumsum(shares)]) * (e - s)).astype(
                np.int64
            )
            for j, i in enumerate(step):
                start[i], end[i] = bounds[j], bounds[j + 1]
                ok[i] = correctness.check(bufs[j])
        return start, end, ok

    for w in range(args.warmup):
        run_pass(False, w, False)
    _progress(rk.rank, f"replay: {n} ops on rank 0, {args.warmup} warm-up passes done")
    total_rows = 0
    for it in range(args.iters):
        t = time.monotonic_ns()
        start, end, ok = run_pass(True, it, it == args.iters - 1)
        table = pa.table(
            {
                **static,
                "iteration": pa.array(np.full(n, it, dtype=np.int64)),
                "start_ns": pa.array(start),
                "end_ns": pa.array(end),
                "latency_ns": pa.array(end - start),
                "correct": pa.array(ok),
            }
        ).select(REPLAY_ROW_SCHEMA.names)
        _write_table(table.cast(REPLAY_ROW_SCHEMA), rk.stage / f"rows-{it:06d}.parquet")
        total_rows += n
        _progress(
            rk.rank,
            f"replay: pass {it + 1}/{args.iters} done in {(time.monotonic_ns() - t) / 1e6:.1f} ms",
        )
    rk.finish(total_rows)
    return 0


def _sweep_op(collective: str, count: int, ws: int) -> tuple[str, int, int]:
    """(correctness op, in_elems, out_elems) for a rung of ``count`` total elements."""
    if collective == "all_gather":
        return "all_gather", count // ws, count
    if collective in ("reduce_scatter", "scatter"):
        return collective, count, count // ws
    if collective == "gather":
        return "gather", count // ws, count
    return collective, count, count


def _sweep_rung(rk: _Rank, collective: str, count: int, info, mode: str, config: dict, comm):
    """(reset, run, finish, checked buffers) for one rung; buffers filled once, reset per
    iteration from pristine copies (the reset is not timed)."""
    ws = rk.world_size
    members = tuple(range(ws))
    corrupt = rk.fault_kind == "corrupt-rank"
    if collective == "sendrecv":
        nxt, prv = (rk.rank + 1) % ws, (rk.rank - 1) % ws
        send_buf = correctness.prepare(
            "send", in_elems=count, out_elems=count, info=info, members=members,
            rank=rk.rank, src=rk.rank, device=rk.device, corrupt=corrupt,
        )  # fmt: skip
        recv_buf = correctness.prepare(
            "recv", in_elems=count, out_elems=count, info=info, members=members,
            rank=rk.rank, src=prv, device=rk.device,
        )  # fmt: skip
        pristine = recv_buf.recv.clone()

        def reset() -> None:
            recv_buf.recv.copy_(pristine)

        def run() -> None:
            strategies._wait_all(
                [dist.isend(send_buf.send, dst=nxt), dist.irecv(recv_buf.recv, src=prv)]
            )

        return reset, run, None, recv_buf

    op, in_elems, out_elems = _sweep_op(collective, count, ws)
    buf = correctness.prepare(
        op, in_elems=in_elems, out_elems=out_elems, info=info, members=members,
        rank=rk.rank, root=0, src=-1, device=rk.device, corrupt=corrupt,
    )  # fmt: skip
    pristine_send = buf.send.clone()
    pristine_recv = None if buf.recv is None or buf.recv is buf.send else buf.recv.clone()

    def reset() -> None:
        buf.send.copy_(pristine_send)
        if pristine_recv is not None:
            buf.recv.copy_(pristine_recv)

    spec = strategies.OpSpec(
        index=0, op=op, in_elems=in_elems, out_elems=out_elems, info=info, pg_id=-1,
        members=members, root=0, src=-1, dst=-1, in_split=None, out_split=None,
        nbytes=count * info.element_bytes,
    )  # fmt: skip
    if mode == "decomposed":
        prepared = strategies.decomposed(spec, buf, comm)
    elif mode == "chunked":
        prepared = strategies.chunked(spec, buf, comm, int(config["chunks"]))
    else:
        prepared = strategies.native(spec, buf, comm)
    return reset, prepared.run, prepared.finish, buf


def sweep(args: argparse.Namespace) -> int:
    rk = _Rank(args)
    config = json.loads(Path(args.config).read_text(encoding="utf-8"))
    mode = config["mode"]
    info = canonical_dtype(args.dtype)
    ws = rk.world_size
    comm = strategies.Comm(rk.rank, rk.device, {-1: None})
    counts = [int(c) for c in args.counts.split(",")]
    total_rows = 0
    # Cycle-major, as nccl-tests -N: every cycle walks the whole ladder, so drift over
    # time shows up as a difference between cycles rather than between rungs.
    for cycle in range(args.cycles):
        for rung, count in enumerate(counts):
            last = cycle == args.cycles - 1 and rung == len(counts) - 1
            reset, run, finish, checked = _sweep_rung(
                rk, args.collective, count, info, mode, config, comm
            )
            latency = np.zeros(args.iters, dtype=np.int64)
            ok = np.zeros(args.iters, dtype=bool)
            dist.barrier()
            for w in range(args.warmup + args.iters):
                reset()
                if last and w == args.warmup + args.iters // 2:
                    rk.maybe_fault()
                rk.sync()
                s = time.monotonic_ns()
                run()
                rk.sync()
                e = time.monotonic_ns()
                if finish is not None:
                    finish()
                if w >= args.warmup:
                    latency[w - args.warmup] = e - s
                    ok[w - args.warmup] = correctness.check(checked)
            n = args.iters
            nbytes = count * info.element_bytes
            table = pa.table(
                {
                    "collective": pa.array([args.collective] * n, pa.string()),
                    "dtype": pa.array([info.canonical] * n, pa.string()),
                    "world_size": pa.array(np.full(n, ws, dtype=np.int64)),
                    "bytes": pa.array(np.full(n, nbytes, dtype=np.int64)),
                    "cycle": pa.array(np.full(n, cycle, dtype=np.int64)),
                    "iteration": pa.array(np.arange(n, dtype=np.int64)),
                    "rank": pa.array(np.full(n, rk.rank, dtype=np.int64)),
                    "latency_ns": pa.array(latency),
                    "correct": pa.array(ok),
                },
                schema=SWEEP_ROW_SCHEMA,
            )
            _write_table(table, rk.stage / f"rows-{cycle:04d}-{rung:04d}.parquet")
            total_rows += n
            _progress(
                rk.rank,
                f"sweep: cycle {cycle + 1}/{args.cycles} {args.collective} {nbytes} B "
                f"({rung + 1}/{len(counts)}) mean {latency.mean() / 1e3:.1f} us",
            )
    rk.finish(total_rows)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tracecanary.physical.worker")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("replay", "sweep"):
        p = sub.add_parser(name)
        p.add_argument("--staging", required=True)
        p.add_argument("--backend", choices=("gloo", "nccl"), required=True)
        p.add_argument("--warmup", type=int, default=1)
        p.add_argument("--iters", type=int, default=1)
        p.add_argument("--pg-timeout", type=float, default=600.0)
        p.add_argument("--fault", default=None)
        p.add_argument("--config", default=None)
    rp = sub.choices["replay"]
    rp.add_argument("--program", required=True)
    rp.add_argument("--use-timestamps", action="store_true")
    sp = sub.choices["sweep"]
    sp.add_argument("--collective", required=True)
    sp.add_argument("--dtype", default="float32")
    sp.add_argument("--counts", required=True)
    sp.add_argument("--cycles", type=int, default=1)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    stage = Path(args.staging) / f"rank{os.environ.get('RANK', '?')}"
    try:
        return replay(args) if args.command == "replay" else sweep(args)
    except BaseException as err:  # noqa: BLE001 - recorded as evidence, then re-raised
        stage.mkdir(parents=True, exist_ok=True)
        _write_json(
            stage / "failed.json",
            {
                "rank": int(os.environ.get("RANK", "-1")),
                "error": f"{type(err).__name__}: {err}"[:2000],
                "traceback": traceback.format_exc()[-4000:],
            },
        )
        raise


if __name__ == "__main__":
    sys.exit(main())
