"""Name, dtype and rank-list vocabularies of Kineto traces."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracecanary.kineto.ranks import parse_rank_list
from tracecanary.kineto.vocab import (
    dtype_from_cpp,
    dtype_from_kernel,
    dtype_from_scalar_type,
    kernel_op,
    normalize_op,
)


@pytest.mark.parametrize(
    ("name", "op"),
    [
        ("c10d::allreduce_", "all_reduce"),
        ("c10d::allreduce_coalesced_", "all_reduce"),
        ("allreduce", "all_reduce"),
        ("nccl:all_reduce", "all_reduce"),
        ("gloo:all_reduce", "all_reduce"),
        ("c10d::_allgather_base_", "all_gather"),
        ("_allgather_base", "all_gather"),
        ("nccl:_all_gather_base", "all_gather"),
        ("c10d::allgather_into_tensor_coalesced_", "all_gather"),
        ("c10d::_reduce_scatter_base_", "reduce_scatter"),
        ("c10d::reduce_scatter_", "reduce_scatter"),
        ("c10d::alltoall_base_", "all_to_all"),
        ("all_to_allv", "all_to_all"),
        ("c10d::broadcast_", "broadcast"),
        ("_broadcast_oop", "broadcast"),
        ("c10d::reduce_", "reduce"),
        ("c10d::barrier", "barrier"),
        ("c10d::monitored_barrier_", "barrier"),
        ("c10d::send", "send"),
        ("c10d::recv_", "recv"),
        ("c10d::recv_any_source_", "recv"),
    ],
)
def test_known_collective_names_map_to_trace_ops(name, op):
    assert normalize_op(name) == (op, True)


@pytest.mark.parametrize(
    ("name", "custom"),
    [
        ("c10d::gather_", "custom:gather"),  # not all_gather
        ("c10d::scatter_", "custom:scatter"),  # not reduce_scatter
        ("gather", "custom:gather"),
        ("allreduce_sparse", "custom:allreduce_sparse"),
        ("my op (v2)", "custom:my_op_v2"),
    ],
)
def test_unmapped_names_become_custom_never_a_cousin(name, custom):
    assert normalize_op(name) == (custom, False)


def test_kernel_names_give_op_and_an_unreliable_dtype():
    assert kernel_op("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)") == "all_reduce"
    assert kernel_op("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)") == (
        "all_gather"
    )
    assert kernel_op("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(x)") == "custom:nccl_SendRecv"
    assert kernel_op("ncclDevKernel_Generic(x)") == "custom:nccl_Generic"
    assert kernel_op("void gemm_kernel(x)") is None
    assert dtype_from_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)") == "float32"
    assert dtype_from_kernel("ncclKernel_Broadcast_RING_LL_Sum_int8_t(x)") == "int8"
    assert dtype_from_kernel("ncclKernel_AllReduce_RING_LL_Sum___nv_bfloat16(x)") == "bfloat16"
    assert dtype_from_kernel("ncclDevKernel_AllGather_RING_LL(x)") is None


def test_three_dtype_vocabularies_meet_in_one_set():
    assert dtype_from_scalar_type("BFloat16") == dtype_from_cpp("c10::BFloat16") == "bfloat16"
    assert dtype_from_scalar_type("Long") == dtype_from_cpp("long int") == dtype_from_cpp("long")
    assert dtype_from_scalar_type("Char") == dtype_from_cpp("signed char") == "int8"
    assert dtype_from_scalar_type("Byte") == dtype_from_cpp("unsigned char") == "uint8"
    assert dtype_from_scalar_type("Short") is None and dtype_from_cpp("short int") is None


def test_rank_list_forms():
    assert parse_rank_list("[0, 1, 2]").full == [0, 1, 2]
    assert parse_rank_list("[]").full == []
    assert parse_rank_list([4, 5]).full == [4, 5]
    old = parse_rank_list("[" + ", ".join(map(str, range(30))) + ", ...]")
    assert old.truncated and old.head == tuple(range(30)) and old.tail == ()
    new = parse_rank_list("[" + ", ".join(map(str, range(29))) + ", ..., 99]")
    assert new.truncated and new.tail == (99,)
    for bad in ("0, 1", "[0, x]", "[0, ..., 1, 2]", 7):
        with pytest.raises(ValueError):
            parse_rank_list(bad)


@given(
    st.lists(st.integers(0, 10_000), min_size=31, max_size=200, unique=True),
    st.booleans(),
    st.integers(0, 1000),
)
def test_truncated_lists_agree_only_with_their_full_list(ranks, newer, which):
    shown = ranks[:29] if newer else ranks[:30]
    text = "[" + ", ".join(map(str, shown)) + (f", ..., {ranks[-1]}]" if newer else ", ...]")
    listed = parse_rank_list(text)
    assert listed.truncated and listed.agrees_with(ranks)
    changed = list(ranks)
    k = which % (len(shown) + 1)
    k = len(changed) - 1 if k == len(shown) and newer else min(k, len(shown) - 1)
    changed[k] = -1
    assert not listed.agrees_with(changed)
