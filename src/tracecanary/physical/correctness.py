"""Deterministic rank-dependent fills and the expected result of every op kind.

Fill: the element at index ``i`` of a payload owned by group member ``g`` is
``(c + i) mod m`` with ``c = 7 g mod m`` (all_to_all(v) and scatter: ``c = 7 g + 3 h`` for the
block destined to member ``h``, so a misplaced block is caught; send/recv use the
global source rank). ``m`` is 251 for data-movement ops (127 for int8) and,
for sums, the largest modulus whose worst-case sum over the group stays exactly
representable in the dtype (``group_size * (m - 1) <= exact_limit``). Integer sums that
cannot stay in range wrap, and the expected value wraps the same way (two's complement);
float sums that cannot stay exact (more members than the dtype has exact integers, e.g.
bfloat16 with > 255 ranks) are compared with a relative tolerance of
``2 * group_size * eps`` and say so (``OpBuffers.rtol``). bool elements are True where
the integer fill is a multiple of 2 (of ``group_size + 1`` for sums, which are logical
OR, so the OR does not saturate to all True).

Out-of-place outputs are pre-filled with a sentinel (``m - 1``; bool False), in-place inputs carry
the rank's own pattern, so an op that silently did nothing fails the check.

Guarantees: the expected result depends only on the op's signature, its group and the
local rank, never on what the collective returned; ``check`` compares bit for bit
unless ``rtol`` is set. ``corrupt=True`` (the ``--fault corrupt-rank=R`` test aid)
perturbs every payload the rank contributes (element 0 + 1; bool: all flipped), after the fill and before
the op, so the error travels through the real collective to the receivers' checks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from tracecanary.param.dtypes import DtypeInfo

OWNER_STRIDE = 7
DEST_STRIDE = 3
DATA_MODULUS = 251


@dataclass
class OpBuffers:
    """Buffers of one op on one rank: ``send`` (payload, may be in place with ``recv``),
    ``recv`` (result), ``expected`` (None: nothing to check on this rank, e.g. a send,
    a barrier or a non-root reduce), ``rtol`` (None: exact comparison)."""

    send: torch.Tensor | None
    recv: torch.Tensor | None
    expected: torch.Tensor | None
    rtol: float | None = None


def data_modulus(info: DtypeInfo) -> int:
    if info.is_bool:
        return DATA_MODULUS
    return min(DATA_MODULUS, info.exact_limit)


def reduction_modulus(info: DtypeInfo, group_size: int) -> tuple[int, bool]:
    """``(m, exact)``: fill modulus for a sum over ``group_size`` members."""
    if info.is_bool:
        return DATA_MODULUS, True
    m = min(DATA_MODULUS, info.exact_limit // max(group_size, 1) + 1)
    if m >= 2:
        return m, True
    return 2, not info.is_float  # integers wrap identically on both sides


def _tile(cycle: torch.Tensor, n: int) -> torch.Tensor:
    """``cycle`` repeated to exactly ``n`` elements (a fresh contiguous tensor)."""
    m = cycle.numel()
    reps = -(-n // m) if n else 0
    return cycle.repeat(reps)[:n].clone() if reps * m != n else cycle.repeat(reps)


def pattern(
    offset: int, n: int, m: int, info: DtypeInfo, device: torch.device, bool_k: int = 2
) -> torch.Tensor:
    """``(offset + i) mod m`` for ``i in [0, n)`` in the dtype (bool: True where that
    value is a multiple of ``bool_k``). Built as one period in the dtype, then tiled."""
    cycle = (torch.arange(m, dtype=torch.int64, device=device) + offset) % m
    cycle = cycle % bool_k == 0 if info.is_bool else cycle.to(info.torch_dtype)
    return _tile(cycle, n)


def _sentinel(n: int, m: int, info: DtypeInfo, device: torch.device) -> torch.Tensor:
    if info.is_bool:
        return torch.zeros(n, dtype=torch.bool, device=device)
    return torch.full((n,), m - 1, dtype=info.torch_dtype, device=device)


def _sum_table(offsets: list[int], m: int, info: DtypeInfo, bool_k: int) -> np.ndarray:
    """``T[r] = sum_g ((c_g + r) mod m)`` as int64 (bool: OR of the members' bools)."""
    r = np.arange(m, dtype=np.int64)
    c = np.asarray(offsets, dtype=np.int64)[:, None]
    values = (c + r[None, :]) % m
    if info.is_bool:
        return (values % bool_k == 0).max(axis=0).astype(np.int64)
    return values.sum(axis=0)


def _sum_result(
    table: np.ndarray, start: int, n: int, m: int, info: DtypeInfo, device: torch.device
) -> torch.Tensor:
    """``T[(start + i) mod m]`` for ``i in [0, n)``, cast as the collective would."""
    period = torch.from_numpy(np.roll(table, -(start % m))).to(device)
    if info.is_bool:
        period = period.bool()
    elif info.is_float:
        period = period.to(torch.float64).to(info.torch_dtype)
    else:
        period = period.to(info.torch_dtype)  # int64 -> narrower ints wraps (two's complement)
    return _tile(period, n)


def _float_rtol(info: DtypeInfo, group_size: int) -> float:
    return 2.0 * group_size * torch.finfo(info.torch_dtype).eps


def _offset(owner: int, m: int) -> int:
    return (OWNER_STRIDE * owner) % m


def _corrupt(t: torch.Tensor | None) -> None:
    if t is None or t.numel() == 0:
        return
    if t.dtype == torch.bool:
        t.logical_not_()  # one flipped bit can vanish in an OR; a flipped payload cannot
    else:
        t[0] += 1


def prepare(
    op: str,
    *,
    in_elems: int,
    out_elems: int,
    info: DtypeInfo | None,
    members: tuple[int, ...],
    rank: int,
    root: int = -1,
    src: int = -1,
    in_split: tuple[int, ...] | None = None,
    out_split: tuple[int, ...] | None = None,
    device: torch.device,
    corrupt: bool = False,
) -> OpBuffers:
    """Fresh buffers for one op on global rank ``rank`` (see the module docstring)."""
    if op == "barrier":
        return OpBuffers(None, None, None)
    assert info is not None
    ws = len(members)
    if op in ("send", "recv"):
        m = data_modulus(info)
        payload = pattern(_offset(src, m), in_elems, m, info, device)
        if op == "send":
            if corrupt:
                _corrupt(payload)
            return OpBuffers(payload, None, None)
        return OpBuffers(None, _sentinel(in_elems, m, info, device), payload)

    g = members.index(rank)
    if op in ("all_reduce", "reduce", "reduce_scatter"):
        m, exact = reduction_modulus(info, ws)
        k = ws + 1  # bool: each member True on 1/(ws+1) of its elements, so the OR is not
        send = pattern(_offset(g, m), in_elems, m, info, device, k)  # all True
        if corrupt:
            _corrupt(send)
        table = _sum_table([_offset(j, m) for j in range(ws)], m, info, k)
        rtol = None if exact else _float_rtol(info, ws)
        if op == "reduce_scatter":
            recv = _sentinel(out_elems, m, info, device)
            expected = _sum_result(table, g * out_elems, out_elems, m, info, device)
            return OpBuffers(send, recv, expected, rtol)
        if op == "reduce" and rank != root:
            return OpBuffers(send, send, None)
        return OpBuffers(send, send, _sum_result(table, 0, in_elems, m, info, device), rtol)

    m = data_modulus(info)
    if op == "broadcast":
        send = pattern(_offset(g, m), in_elems, m, info, device)
        if corrupt:
            _corrupt(send)
        expected = pattern(_offset(members.index(root), m), in_elems, m, info, device)
        return OpBuffers(send, send, expected)
    if op == "scatter":  # in_elems: the root's n pieces; piece h carries (7 root + 3 h)
        r, per = members.index(root), out_elems
        send = torch.cat(
            [
                pattern((OWNER_STRIDE * g + DEST_STRIDE * h) % m, per, m, info, device)
                for h in range(ws)
            ]
        )
        if corrupt:
            _corrupt(send)
        expected = pattern((OWNER_STRIDE * r + DEST_STRIDE * g) % m, per, m, info, device)
        return OpBuffers(send, _sentinel(per, m, info, device), expected)
    if op == "gather":  # out_elems: the root's n pieces, checked on the root only
        send = pattern(_offset(g, m), in_elems, m, info, device)
        if corrupt:
            _corrupt(send)
        if rank != root:
            return OpBuffers(send, None, None)
        expected = torch.cat([pattern(_offset(j, m), in_elems, m, info, device) for j in range(ws)])
        return OpBuffers(send, _sentinel(out_elems, m, info, device), expected)
    if op == "all_gather":
        send = pattern(_offset(g, m), in_elems, m, info, device)
        if corrupt:
            _corrupt(send)
        expected = torch.cat([pattern(_offset(j, m), in_elems, m, info, device) for j in range(ws)])
        return OpBuffers(send, _sentinel(out_elems, m, info, device), expected)
    if op in ("all_to_all", "all_to_allv"):
        if in_split is None:
            in_split = tuple([in_elems // ws] * ws)
        if out_split is None:
            out_split = tuple([out_elems // ws] * ws)
        send = torch.cat(
            [
                pattern((OWNER_STRIDE * g + DEST_STRIDE * h) % m, in_split[h], m, info, device)
                for h in range(ws)
            ]
        )
        if corrupt:
            _corrupt(send)
        expected = torch.cat(
            [
                pattern((OWNER_STRIDE * j + DEST_STRIDE * g) % m, out_split[j], m, info, device)
                for j in range(ws)
            ]
        )
        return OpBuffers(send, _sentinel(out_elems, m, info, device), expected)
    raise ValueError(f"no fill for op {op!r}")


def check(buffers: OpBuffers) -> bool:
    """True when the result equals the expected one (or there is nothing to check here)."""
    if buffers.expected is None:
        return True
    actual = buffers.recv
    if actual is None or actual.shape != buffers.expected.shape:
        return False
    if buffers.rtol is None:
        return bool(torch.equal(actual, buffers.expected))
    return bool(
        torch.allclose(
            actual.to(torch.float64), buffers.expected.to(torch.float64), rtol=buffers.rtol, atol=0
        )
    )
