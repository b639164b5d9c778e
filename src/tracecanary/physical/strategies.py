"""How one op, or one fused bucket of ops, is carried out through torch.distributed.

Every strategy returns a ``Prepared``: ``run`` is the timed part (issue and wait; the
caller adds the CUDA synchronisation), ``finish`` the untimed part that puts the result
where the correctness check reads it. Layout copies that a real implementation would
do once (padding, packing chunk inputs) happen before ``run`` and are not timed; the
communication calls themselves are.

Modes (``config/physical.yaml``):
    native      one direct call per op (all_to_all(v) via all_to_all_single; scatter and
                gather, which only sweeps run, via dist.scatter / dist.gather)
    decomposed  all_reduce = reduce_scatter + all_gather; broadcast = scatter + all_gather;
                reduce = reduce_scatter + gather; all_gather = one broadcast per member;
                reduce_scatter = one reduce per member; all_to_all(v) = pairwise
                isend/irecv rounds. barrier, send and recv stay native.
    chunked     the payload split into ``chunks`` pieces issued asynchronously and
                waited together (send/recv too); barrier stays native.
    fused       consecutive ops of one group with the same kind, dtype and root, each and
                together at most ``bucket_bytes``, run as one op on a packed buffer
                (all_reduce, broadcast, reduce, all_gather, reduce_scatter).
Global ranks are used for roots and peers (torch.distributed's convention).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from tracecanary.param.dtypes import DtypeInfo
from tracecanary.physical.correctness import OpBuffers

FUSABLE_KINDS = frozenset({"all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter"})

_all_gather_flat = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter_flat = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


@dataclass(frozen=True)
class OpSpec:
    """One executed op of this rank's program (sizes in elements, ranks global)."""

    index: int  # position among this rank's executed ops
    op: str
    in_elems: int
    out_elems: int
    info: DtypeInfo | None
    pg_id: int
    members: tuple[int, ...]
    root: int
    src: int
    dst: int
    in_split: tuple[int, ...] | None
    out_split: tuple[int, ...] | None
    nbytes: int


@dataclass
class Prepared:
    run: Callable[[], None]
    finish: Callable[[], None] | None = None


class Comm:
    """This rank's view of the process groups (pg_id -1 = the world group)."""

    def __init__(self, rank: int, device: torch.device, groups: dict[int, object]) -> None:
        self.rank = rank
        self.device = device
        self._groups = groups

    def group(self, pg_id: int):
        return self._groups.get(pg_id)


def _wait_all(works) -> None:
    for w in works:
        if w is not None:
            w.wait()


# ---------------------------------------------------------------- native


def native(spec: OpSpec, buf: OpBuffers, comm: Comm) -> Prepared:
    grp = comm.group(spec.pg_id)
    op = spec.op
    if op == "all_reduce":
        return Prepared(lambda: dist.all_reduce(buf.send, group=grp))
    if op == "reduce":
        return Prepared(lambda: dist.reduce(buf.send, dst=spec.root, group=grp))
    if op == "broadcast":
        return Prepared(lambda: dist.broadcast(buf.send, src=spec.root, group=grp))
    if op == "all_gather":
        return Prepared(lambda: _all_gather_flat(buf.recv, buf.send, group=grp))
    if op == "reduce_scatter":
        return Prepared(lambda: _reduce_scatter_flat(buf.recv, buf.send, group=grp))
    if op == "scatter":  # sweeps only: no trace op is a scatter
        pieces = list(buf.send.split(spec.out_elems)) if comm.rank == spec.root else None
        return Prepared(lambda: dist.scatter(buf.recv, pieces, src=spec.root, group=grp))
    if op == "gather":  # sweeps only: no trace op is a gather
        slots = list(buf.recv.split(spec.in_elems)) if comm.rank == spec.root else None
        return Prepared(lambda: dist.gather(buf.send, slots, dst=spec.root, group=grp))
    if op == "all_to_all":
        return Prepared(lambda: dist.all_to_all_single(buf.recv, buf.send, group=grp))
    if op == "all_to_allv":
        return Prepared(
            lambda: dist.all_to_all_single(
                buf.recv, buf.send, list(spec.out_split), list(spec.in_split), group=grp
            )
        )
    if op == "barrier":
        return Prepared(lambda: dist.barrier(group=grp))
    if op == "send":
        return Prepared(lambda: dist.send(buf.send, dst=spec.dst))
    if op == "recv":
        return Prepared(lambda: dist.recv(buf.recv, src=spec.src))
    raise ValueError(f"no native strategy for {op!r}")


# ---------------------------------------------------------------- decomposed


def _padded(t: torch.Tensor, ws: int) -> tuple[torch.Tensor, bool]:
    n = t.numel()
    size = -(-n // ws) * ws if n else ws
    if size == n:
        return t, False
    out = torch.zeros(size, dtype=t.dtype, device=t.device)
    out[:n].copy_(t)
    return out, True


def decomposed(spec: OpSpec, buf: OpBuffers, comm: Comm) -> Prepared:
    grp = comm.group(spec.pg_id)
    members = spec.members
    ws = len(members)
    op = spec.op
    g = members.index(comm.rank) if comm.rank in members else -1
    if op in ("barrier", "send", "recv") or ws == 1:
        return native(spec, buf, comm)

    if op in ("all_reduce", "broadcast", "reduce"):
        padded, copied = _padded(buf.send, ws)
        piece = padded.numel() // ws
        chunk = torch.empty(piece, dtype=padded.dtype, device=padded.device)
        pieces = list(padded.split(piece))

        if op == "all_reduce":

            def run() -> None:
                _reduce_scatter_flat(chunk, padded, group=grp)
                _all_gather_flat(padded, chunk, group=grp)

        elif op == "broadcast":

            def run() -> None:
                dist.scatter(
                    chunk, pieces if comm.rank == spec.root else None, src=spec.root, group=grp
                )
                _all_gather_flat(padded, chunk, group=grp)

        else:

            def run() -> None:
                _reduce_scatter_flat(chunk, padded, group=grp)
                dist.gather(
                    chunk, pieces if comm.rank == spec.root else None, dst=spec.root, group=grp
                )

        def finish() -> None:
            if copied:
                buf.send.copy_(padded[: buf.send.numel()])

        return Prepared(run, finish)

    if op == "all_gather":
        n = spec.in_elems
        blocks = list(buf.recv.split(n)) if n else [buf.recv[:0]] * ws
        blocks[g].copy_(buf.send)

        def run() -> None:
            for j, member in enumerate(members):
                dist.broadcast(blocks[j], src=member, group=grp)

        return Prepared(run)

    if op == "reduce_scatter":
        c = spec.out_elems
        work = buf.send.clone()
        blocks = list(work.split(c)) if c else [work[:0]] * ws

        def run() -> None:
            for j, member in enumerate(members):
                dist.reduce(blocks[j], dst=member, group=grp)

        return Prepared(run, lambda: buf.recv.copy_(blocks[g]))

    if op in ("all_to_all", "all_to_allv"):
        in_split = spec.in_split or tuple([spec.in_elems // ws] * ws)
        out_split = spec.out_split or tuple([spec.out_elems // ws] * ws)
        send_blocks = list(buf.send.split(list(in_split)))
        recv_blocks = list(buf.recv.split(list(out_split)))
        recv_blocks[g].copy_(send_blocks[g])

        def run() -> None:
            for step in range(1, ws):
                to = (g + step) % ws
                frm = (g - step) % ws
                works = []
                if in_split[to]:
                    works.append(dist.isend(send_blocks[to], dst=members[to]))
                if out_split[frm]:
                    works.append(dist.irecv(recv_blocks[frm], src=members[frm]))
                _wait_all(works)

        return Prepared(run)
    raise ValueError(f"no decomposed strategy for {op!r}")


# ---------------------------------------------------------------- chunked


def _piece_bounds(n: int, k: int) -> list[tuple[int, int]]:
    """``k`` contiguous (offset, length) pieces of ``n`` (fewer when n < k; none if n == 0)."""
    k = max(1, min(k, n))
    base, extra = divmod(n, k)
    bounds, offset = [], 0
    for i in range(k):
        length = base + (1 if i < extra else 0)
        if length:
            bounds.append((offset, length))
        offset += length
    return bounds


def chunked(spec: OpSpec, buf: OpBuffers, comm: Comm, chunks: int) -> Prepared:
    grp = comm.group(spec.pg_id)
    members = spec.members
    ws = len(members)
    op = spec.op
    if op == "barrier":
        return native(spec, buf, comm)

    if op in ("all_reduce", "broadcast", "reduce", "send", "recv"):
        target = buf.recv if op == "recv" else buf.send
        views = [target[o : o + n] for o, n in _piece_bounds(target.numel(), chunks)]

        def run() -> None:
            if op == "all_reduce":
                works = [dist.all_reduce(v, group=grp, async_op=True) for v in views]
            elif op == "broadcast":
                works = [dist.broadcast(v, src=spec.root, group=grp, async_op=True) for v in views]
            elif op == "reduce":
                works = [dist.reduce(v, dst=spec.root, group=grp, async_op=True) for v in views]
            elif op == "send":
                works = [dist.isend(v, dst=spec.dst) for v in views]
            else:
                works = [dist.irecv(v, src=spec.src) for v in views]
            _wait_all(works)

        return Prepared(run)

    if op == "all_gather":
        n = spec.in_elems
        bounds = _piece_bounds(n, chunks)
        outs = [
            torch.empty(ws * ln, dtype=buf.send.dtype, device=buf.send.device) for _, ln in bounds
        ]
        ins = [buf.send[o : o + ln] for o, ln in bounds]

        def run() -> None:
            _wait_all(
                [
                    _all_gather_flat(out, x, group=grp, async_op=True)
                    for out, x in zip(outs, ins, strict=True)
                ]
            )

        def finish() -> None:
            full = buf.recv.view(ws, n)
            for (o, ln), out in zip(bounds, outs, strict=True):
                full[:, o : o + ln].copy_(out.view(ws, ln))

        return Prepared(run, finish)

    if op == "reduce_scatter":
        c = spec.out_elems
        bounds = _piece_bounds(c, chunks)
        blocks = buf.send.view(ws, c)
        ins = [blocks[:, o : o + ln].contiguous().view(-1) for o, ln in bounds]
        outs = [buf.recv[o : o + ln] for o, ln in bounds]

        def run() -> None:
            _wait_all(
                [
                    _reduce_scatter_flat(out, x, group=grp, async_op=True)
                    for out, x in zip(outs, ins, strict=True)
                ]
            )

        return Prepared(run)

    if op in ("all_to_all", "all_to_allv"):
        in_split = spec.in_split or tuple([spec.in_elems // ws] * ws)
        out_split = spec.out_split or tuple([spec.out_elems // ws] * ws)
        send_blocks = list(buf.send.split(list(in_split)))
        recv_blocks = list(buf.recv.split(list(out_split)))
        # Piece i of every block: both sides cut a block of b elements the same way.
        in_bounds = [_piece_bounds_fixed(b, chunks) for b in in_split]
        out_bounds = [_piece_bounds_fixed(b, chunks) for b in out_split]
        pieces = []
        for i in range(chunks):
            x = torch.cat(
                [send_blocks[h][o : o + ln] for h, (o, ln) in enumerate(b[i] for b in in_bounds)]
            )
            sizes_out = [b[i][1] for b in out_bounds]
            sizes_in = [b[i][1] for b in in_bounds]
            out = torch.empty(sum(sizes_out), dtype=buf.recv.dtype, device=buf.recv.device)
            pieces.append((x, out, sizes_in, sizes_out))

        def run() -> None:
            _wait_all(
                [
                    dist.all_to_all_single(out, x, so, si, group=grp, async_op=True)
                    for x, out, si, so in pieces
                ]
            )

        def finish() -> None:
            for i, (_, out, _, sizes_out) in enumerate(pieces):
                parts = out.split(sizes_out)
                for j, part in enumerate(parts):
                    o, ln = out_bounds[j][i]
                    recv_blocks[j][o : o + ln].copy_(part)

        return Prepared(run, finish)
    raise ValueError(f"no chunked strategy for {op!r}")


def _piece_bounds_fixed(n: int, k: int) -> list[tuple[int, int]]:
    """Exactly ``k`` (offset, length) pieces of ``n``, empty ones allowed (all_to_all)."""
    base, extra = divmod(n, k)
    bounds, offset = [], 0
    for i in range(k):
        length = base + (1 if i < extra else 0)
        bounds.append((offset, length))
        offset += length
    return bounds


# ---------------------------------------------------------------- fused


def plan_buckets(specs: list[OpSpec], bucket_bytes: int) -> list[list[int]]:
    """Execution steps: lists of indices into ``specs`` (this rank's executed ops).

    Within one group's own sequence, a run of consecutive ops with the same kind (in
    ``FUSABLE_KINDS``), dtype and root, each and together at most ``bucket_bytes``,
    becomes one step issued at the position of its first op. The rule reads only the
    group's sequence, which is identical on every member (checked before launch), so
    all members fuse identically; a fused op needs nothing its members had not
    already reached at its first op, so moving the later ops earlier cannot deadlock.
    """
    steps: list[list[int]] = []
    open_bucket: dict[int, tuple[list[int], int]] = {}  # pg_id -> (step, bytes so far)
    for spec in specs:
        if spec.op in ("send", "recv"):
            # p2p is not part of any group's collective sequence: it must not open or
            # close a bucket, or members would fuse differently.
            steps.append([spec.index])
            continue
        fusable = spec.op in FUSABLE_KINDS and 0 < spec.nbytes <= bucket_bytes
        current = open_bucket.pop(spec.pg_id, None)
        if current is not None:
            step, total = current
            head = specs[step[0]]
            if (
                fusable
                and spec.op == head.op
                and spec.info == head.info
                and spec.root == head.root
                and total + spec.nbytes <= bucket_bytes
            ):
                step.append(spec.index)
                open_bucket[spec.pg_id] = (step, total + spec.nbytes)
                continue
        step = [spec.index]
        steps.append(step)
        if fusable:
            open_bucket[spec.pg_id] = (step, spec.nbytes)
    return steps


def fused(specs: list[OpSpec], bufs: list[OpBuffers], comm: Comm) -> Prepared:
    """One op on the packed payloads of ``specs`` (all the same kind, dtype, group, root)."""
    head = specs[0]
    grp = comm.group(head.pg_id)
    ws = len(head.members)
    op = head.op
    if op in ("all_reduce", "broadcast", "reduce"):
        packed = torch.cat([b.send for b in bufs])

        def run() -> None:
            if op == "all_reduce":
                dist.all_reduce(packed, group=grp)
            elif op == "broadcast":
                dist.broadcast(packed, src=head.root, group=grp)
            else:
                dist.reduce(packed, dst=head.root, group=grp)

        def finish() -> None:
            for b, part in zip(bufs, packed.split([b.send.numel() for b in bufs]), strict=True):
                b.send.copy_(part)

        return Prepared(run, finish)

    if op == "all_gather":
        sizes = [s.in_elems for s in specs]
        total = sum(sizes)
        packed = torch.cat([b.send for b in bufs])
        out = torch.empty(ws * total, dtype=packed.dtype, device=packed.device)

        def run() -> None:
            _all_gather_flat(out, packed, group=grp)

        def finish() -> None:
            grid = out.view(ws, total)
            offset = 0
            for b, n in zip(bufs, sizes, strict=True):
                b.recv.view(ws, n).copy_(grid[:, offset : offset + n])
                offset += n

        return Prepared(run, finish)

    if op == "reduce_scatter":
        sizes = [s.out_elems for s in specs]
        total = sum(sizes)
        packed = torch.cat(
            [b.send.view(ws, n) for b, n in zip(bufs, sizes, strict=True)], dim=1
        ).reshape(-1)
        out = torch.empty(total, dtype=packed.dtype, device=packed.device)

        def run() -> None:
            _reduce_scatter_flat(out, packed, group=grp)

        def finish() -> None:
            for b, part in zip(bufs, out.split(sizes), strict=True):
                b.recv.copy_(part)

        return Prepared(run, finish)
    raise ValueError(f"no fused strategy for {op!r}")
