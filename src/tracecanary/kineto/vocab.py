"""Name and dtype vocabularies of PyTorch profiler (Kineto) traces, normalized.

Collective names arrive in four spellings (``c10d::`` op names, ``record_param_comms``
``Collective name`` values, ``nccl:``/``gloo:`` annotation names, NCCL kernel names); each
maps to one trace op (``all_reduce`` ... ``recv``) only through an explicit table. A name
that is not in the table is never guessed at: it becomes ``custom:<name>``, so ``gather``
never turns into ``all_gather`` and ``scatter`` never into ``reduce_scatter``.

Dtypes arrive in three vocabularies (c10 ScalarType names, C++ type names from
``Input type``, NCCL kernel-name suffixes); each maps to one of
``tracecanary.formats.vocab.DTYPES``. A dtype
outside that set is reported as ``None`` so the caller can refuse it.
"""

from __future__ import annotations

import re

from tracecanary.formats.vocab import OPS

# Keys are the name lower-cased with every prefix, underscore and "::" removed, so the
# spellings "allreduce_", "all_reduce", "AllReduce" meet; values are trace ops. Only
# spellings seen in traces or in the torch sources are listed.
_OP_KEYS: dict[str, str] = {
    # every plain op under its own name ("all_reduce" -> "allreduce")
    **{op.replace("_", ""): op for op in OPS},
    # all_reduce
    "allreducecoalesced": "all_reduce",
    # all_gather (list, tensor, single, coalesced forms all gather into every rank)
    "allgatherbase": "all_gather",
    "allgathercoalesced": "all_gather",
    "allgatherintotensor": "all_gather",
    "allgatherintotensorcoalesced": "all_gather",
    "allgathersingle": "all_gather",
    # reduce_scatter
    "reducescatterbase": "reduce_scatter",
    "reducescattertensor": "reduce_scatter",
    "reducescattertensorcoalesced": "reduce_scatter",
    "reducescattersingle": "reduce_scatter",
    # all_to_all (equal splits and explicit splits are the same API op)
    "alltoallbase": "all_to_all",
    "alltoallv": "all_to_all",
    "alltoallsingle": "all_to_all",
    # rooted (out-of-place forms)
    "broadcastoop": "broadcast",
    "reduceoop": "reduce",
    # barrier (monitored_barrier's internal send/recv are part of the barrier)
    "monitoredbarrier": "barrier",
    # point to point
    "recvanysource": "recv",
}

_PREFIX_RE = re.compile(r"^(?:c10d::|_c10d_functional::|nccl:|gloo:|rccl:)")
_CUSTOM_BAD = re.compile(r"[^A-Za-z0-9_.:/+-]+")


def op_key(name: str) -> str:
    """The lookup key of a collective name (see ``_OP_KEYS``)."""
    bare = _PREFIX_RE.sub("", name.strip())
    return bare.replace("::", "").replace("_", "").lower()


def bare_name(name: str) -> str:
    """The name without its ``c10d::``/``nccl:``/``gloo:`` prefix and edge underscores."""
    return _PREFIX_RE.sub("", name.strip()).strip("_") or name.strip()


def custom_op(name: str) -> str:
    """``custom:<name>`` with characters outside the trace op alphabet replaced by '_'."""
    cleaned = _CUSTOM_BAD.sub("_", bare_name(name)).strip("_")
    return f"custom:{cleaned or 'unnamed'}"


def normalize_op(name: str) -> tuple[str, bool]:
    """(trace op, mapped?) for a c10d op / Collective name / annotation name."""
    op = _OP_KEYS.get(op_key(name))
    if op is not None:
        return op, True
    return custom_op(name), False


# ncclKernel_AllReduce_RING_LL_Sum_float(...), ncclDevKernel_AllGather_RING_LL(...),
# ncclDevKernel_AllReduce_Sum_f32_RING_LL(...), ncclDevKernel_Generic(...)
_KERNEL_RE = re.compile(r"^(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)(?:_([^(]*))?")
_KERNEL_OPS = {
    "AllReduce": "all_reduce",
    "AllGather": "all_gather",
    "ReduceScatter": "reduce_scatter",
    "Broadcast": "broadcast",
    "Reduce": "reduce",
}


def is_nccl_kernel(name: str) -> bool:
    return _KERNEL_RE.match(name) is not None


def kernel_op(name: str) -> str | None:
    """Trace op named by an NCCL kernel, or ``custom:nccl_<Kind>`` for kernels that serve
    several ops (``SendRecv`` runs both all_to_all and p2p; ``Generic`` says nothing);
    ``None`` if ``name`` is not an NCCL kernel."""
    m = _KERNEL_RE.match(name)
    if m is None:
        return None
    kind = m.group(1)
    return _KERNEL_OPS.get(kind) or f"custom:nccl_{kind}"


# --- dtypes -------------------------------------------------------------------------

_SCALAR_TYPE = {  # c10 ScalarType names (record_param_comms "dtype")
    "Float": "float32",
    "Half": "float16",
    "BFloat16": "bfloat16",
    "Double": "float64",
    "Char": "int8",
    "Byte": "uint8",
    "Int": "int32",
    "Long": "int64",
    "Bool": "bool",
}
_CPP_TYPE = {  # C++ type names ("Input type")
    "float": "float32",
    "double": "float64",
    "c10::Half": "float16",
    "c10::BFloat16": "bfloat16",
    "signed char": "int8",
    "int8_t": "int8",
    "unsigned char": "uint8",
    "uint8_t": "uint8",
    "int": "int32",
    "int32_t": "int32",
    "long int": "int64",
    "long": "int64",
    "long long": "int64",
    "long long int": "int64",
    "int64_t": "int64",
    "bool": "bool",
}
_KERNEL_TYPE = {  # NCCL kernel-name suffixes
    "f32": "float32",
    "float": "float32",
    "f16": "float16",
    "half": "float16",
    "bf16": "bfloat16",
    "__nv_bfloat16": "bfloat16",
    "bfloat16": "bfloat16",
    "f64": "float64",
    "double": "float64",
    "i8": "int8",
    "int8_t": "int8",
    "u8": "uint8",
    "uint8_t": "uint8",
    "i32": "int32",
    "int32_t": "int32",
    "i64": "int64",
    "int64_t": "int64",
}
# Input type entries that are not tensors of a known dtype
NON_TENSOR_TYPES = frozenset({"", "Scalar", "ScalarList", "TensorList", "GenericList", "None"})


def dtype_from_scalar_type(value: str) -> str | None:
    return _SCALAR_TYPE.get(value)


def dtype_from_cpp(value: str) -> str | None:
    return _CPP_TYPE.get(value)


_KERNEL_TYPE_RE = re.compile(
    r"(?:^|_)("
    + "|".join(sorted((re.escape(k) for k in _KERNEL_TYPE), key=len, reverse=True))
    + r")(?=_|$)"
)


def dtype_from_kernel(name: str) -> str | None:
    """Dtype from an NCCL kernel name's suffix. Unreliable (a Long broadcast runs an
    int8_t kernel): callers use it only when no other layer names the dtype."""
    m = _KERNEL_RE.match(name)
    if m is None or not m.group(2):
        return None
    found = _KERNEL_TYPE_RE.search(m.group(2))
    return _KERNEL_TYPE[found.group(1)] if found else None
