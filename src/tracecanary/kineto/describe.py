"""What one call says about its collective, layer by layer.

Layers, first that answers wins, each field on its own:
1. ``record_param_comms`` args (``Collective name``, ``dtype``, ``In/Out msg nelems``,
   ``Group size``, ``Process Group *``, ``Global rank start/stride``, ``Src/Dst Rank``);
2. the linked NCCL kernel's copy of those args (joined by ``External id``);
3. the ``c10d::`` op's ``Input Dims``/``Input type``/``Concrete Inputs``, then the
   ``nccl:``/``gloo:`` annotation's ``Input Dims``/``Input type`` (the only place a
   ``TensorList``'s dtype is written);
4. the NCCL kernel name (op and dtype only; never sizes).

The op name follows the API: the ``c10d::`` op takes precedence (for gloo,
``reduce_scatter`` runs as ``gloo:all_reduce``), then ``Collective name``, then the
annotation, then the kernel. Sizes follow the nccl-tests convention: ``all_gather`` =
output bytes, ``reduce_scatter`` = input bytes, ``all_reduce``/``broadcast``/``reduce``/
``all_to_all`` = this rank's buffer, send/recv = the message, ``barrier`` = 0.
Where the output of a list-form all_gather / the input of a list-form reduce_scatter is
not recorded, bytes = recorded side x group size, resolved once the group is known.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tracecanary.errors import ImportRefused
from tracecanary.formats.trace import uneven_splits
from tracecanary.formats.vocab import DTYPE_BYTES
from tracecanary.kineto.calls import Call
from tracecanary.kineto.ranks import parse_rank_list
from tracecanary.kineto.vocab import (
    NON_TENSOR_TYPES,
    bare_name,
    dtype_from_cpp,
    dtype_from_kernel,
    dtype_from_scalar_type,
    kernel_op,
    normalize_op,
)

META_KEYS = (
    "Collective name",
    "dtype",
    "In msg nelems",
    "Out msg nelems",
    "In split size",
    "Out split size",
    "Group size",
    "Global rank start",
    "Global rank stride",
    "Process Group Name",
    "Process Group Description",
    "Process Group Ranks",
    "Process Group ID",
    "Src Rank",
    "Dst Rank",
    "Seq",
)

# c10d op -> (position of the buffer that carries the nccl-tests size, how it counts)
#   "tensors": sum of a TensorList / tensor argument at that position
#   "times_group": that side times the group size (the other side is not recorded)
_C10D_SIZE: dict[str, tuple[int, str]] = {
    "allreduce_": (0, "tensors"),
    "allreduce_coalesced_": (0, "tensors"),
    "broadcast_": (0, "tensors"),
    "reduce_": (0, "tensors"),
    "send": (0, "tensors"),
    "recv_": (0, "tensors"),
    "recv_any_source_": (0, "tensors"),
    "_allgather_base_": (0, "tensors"),  # output
    "allgather_": (1, "times_group"),  # input list; output Tensor[][] unrecorded
    "allgather_coalesced_": (1, "times_group"),
    "allgather_into_tensor_coalesced_": (0, "tensors"),  # outputs
    "_reduce_scatter_base_": (1, "tensors"),  # input
    "reduce_scatter_": (0, "times_group"),  # output list; input Tensor[][] unrecorded
    "reduce_scatter_tensor_coalesced_": (1, "tensors"),  # inputs
    "alltoall_base_": (1, "tensors"),  # input
    "alltoall_": (1, "tensors"),  # input list
    "gather_": (1, "tensors"),  # this rank's input
    "scatter_": (0, "tensors"),  # this rank's output
}
# position of root (group rank) / peer (group rank) in Concrete Inputs
_C10D_ROOT = {"broadcast_": 2, "reduce_": 3}
_C10D_PEER = {"send": 2, "recv_": 2}
# expected gloo work: c10d op -> (gloo annotation name, source of the expected dims,
# many events?) where dims source is (position, "each" tensor | "whole" list) or None
GLOO_WORK: dict[str, tuple[str, tuple[int, str] | None, bool]] = {
    "allreduce_": ("gloo:all_reduce", (0, "whole"), False),
    "allreduce_coalesced_": ("gloo:all_reduce", (0, "whole"), False),
    "_reduce_scatter_base_": ("gloo:all_reduce", (1, "whole"), False),
    "reduce_scatter_": ("gloo:all_reduce", (0, "each"), True),
    "allgather_": ("gloo:all_gather", (1, "whole"), False),
    "allgather_coalesced_": ("gloo:all_gather", (1, "whole"), False),
    "_allgather_base_": ("gloo:all_gather", (1, "whole"), False),
    "broadcast_": ("gloo:broadcast", (0, "whole"), False),
    "reduce_": ("gloo:reduce", (0, "whole"), False),
    "gather_": ("gloo:gather", (1, "whole"), False),
    "scatter_": ("gloo:scatter", None, False),
    "alltoall_base_": ("gloo:all_to_all", (1, "whole"), False),
    "alltoall_": ("gloo:all_to_all", (1, "whole"), False),
    "barrier": ("gloo:barrier", None, False),
    "send": ("gloo:send", (0, "whole"), False),
    "recv_": ("gloo:recv", (0, "whole"), False),
    "recv_any_source_": ("gloo:recv", (0, "whole"), False),
}


@dataclass
class Described:
    """A call's collective as far as its own events tell (group not yet resolved)."""

    call: Call
    index: int  # trace event index of the call's outermost event
    op: str
    op_from: str  # which layer named the op
    raw_name: str  # name the op was read from (for custom:<name> listings)
    mapped: bool
    dtype: str | None
    dtype_field: str
    bytes_: int | None  # payload bytes, or the recorded side when times_group
    times_group: bool
    size_field: str
    meta: dict[str, Any]
    group_name: str | None  # Process Group Name / ID from metadata
    group_size_hints: set[int] = field(default_factory=set)
    root_group_rank: int | None = None
    peer_group_rank: int | None = None
    peer_global: int | None = None
    is_async: bool = False
    c10d_key: str | None = None  # c10d op name without prefix, e.g. "allreduce_"
    work_name: str | None = None
    work_dims: list | None = None  # expected dims of each gloo work event (None = any)
    work_many: bool = False
    c10d_args: list = field(default_factory=list)
    # an all_to_all's rows per member as recorded, (send, receive), each a list or None
    # (not recorded: equal parts), and where they were read; see ``split_elements``
    split_rows: tuple | None = None
    split_field: str = ""


def _tensor_args(ev) -> list[tuple[str, Any, Any]]:
    """(kind, shapes, dtype) per positional arg: kind 'tensor' (shapes=[shape]),
    'list' (shapes=list of shapes or None if unrecorded), 'other'."""
    dims = ev.args.get("Input Dims")
    types = ev.args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list):
        return []
    out = []
    for k, t in enumerate(types):
        d = dims[k] if k < len(dims) else None
        if t == "TensorList":
            if isinstance(d, list) and d and all(isinstance(x, list) for x in d):
                out.append(("list", d, None))
            else:
                out.append(("list", None, None))
        elif not isinstance(t, str) or t in NON_TENSOR_TYPES:
            out.append(("other", None, None))
        else:
            out.append(("tensor", [d] if isinstance(d, list) else None, t))
    return out


def _numel(shape: Any) -> int | None:
    if not isinstance(shape, list) or not all(
        isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in shape
    ):
        return None
    return math.prod(shape)


def _sum_numel(shapes: list | None) -> int | None:
    if shapes is None:
        return None
    total = 0
    for s in shapes:
        n = _numel(s)
        if n is None:
            return None
        total += n
    return total


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def _annotation(call: Call):
    """First nccl:/gloo: annotation with recorded shapes, else the first one."""
    best = None
    for ev in call.annotations:
        if ev.name.startswith(("nccl:", "gloo:", "rccl:")):
            if best is None:
                best = ev
            if isinstance(ev.args.get("Input Dims"), list):
                return ev
    return best


def _annotation_dtype(ev, file: str) -> str | None:
    types = ev.args.get("Input type") if ev is not None else None
    if not isinstance(types, list):
        return None
    found = {t for t in types if isinstance(t, str) and t not in NON_TENSOR_TYPES}
    if not found:
        return None
    if len(found) > 1:
        raise ImportRefused(
            f"tensors of one collective have different dtypes {sorted(found)}",
            file=file,
            record=ev.index,
            field="args.Input type",
        )
    return _cpp_or_refuse(found.pop(), ev.index, "args.Input type", file)


def _cpp_or_refuse(t: str, index: int, field_name: str, file: str) -> str:
    dt = dtype_from_cpp(t)
    if dt is None:
        raise ImportRefused(
            f"dtype {t!r} is outside the supported set (float32, float16, bfloat16, "
            "float64, int8, uint8, int32, int64, bool)",
            file=file,
            record=index,
            field=field_name,
        )
    return dt


def describe(call: Call, file: str) -> Described:
    """Layered reading of one call; refuses a dtype outside the supported set."""
    rpc_args = call.rpc.args if call.rpc is not None else {}
    meta: dict[str, Any] = {k: rpc_args[k] for k in META_KEYS if k in rpc_args}
    meta_from = {k: "record_param_comms" for k in meta}
    if call.kernels:
        kargs = call.kernels[0].args
        for k in META_KEYS:
            if k not in meta and k in kargs:
                meta[k] = kargs[k]
                meta_from[k] = "kernel args"
    ann = _annotation(call)
    kernel_name = call.kernels[0].name if call.kernels else None

    # --- op name (API first) ---
    c10d_key = None
    if call.c10d is not None:
        c10d_key = call.c10d.name[len("c10d::") :]
        raw, op_from = call.c10d.name, "c10d op"
        op, mapped = normalize_op(raw)
    elif isinstance(meta.get("Collective name"), str):
        raw, op_from = meta["Collective name"], meta_from["Collective name"]
        op, mapped = normalize_op(raw)
    elif ann is not None:
        raw, op_from = ann.name, "annotation"
        op, mapped = normalize_op(raw)
    elif kernel_name is not None:
        raw, op_from = kernel_name.split("(")[0], "kernel name"
        op = kernel_op(kernel_name) or "custom:nccl_kernel"
        mapped = not op.startswith("custom:")
    else:
        raw, op_from = call.root.name, "event name"
        op, mapped = normalize_op(raw)

    index = call.root.index
    d = Described(
        call=call,
        index=index,
        op=op,
        op_from=op_from,
        raw_name=bare_name(raw),
        mapped=mapped,
        dtype=None,
        dtype_field="dtype",
        bytes_=None,
        times_group=False,
        size_field="args.In msg nelems",
        meta=meta,
        group_name=None,
        c10d_key=c10d_key,
    )
    d.c10d_args = c10d_args = _tensor_args(call.c10d) if call.c10d is not None else []

    # --- dtype ---
    if isinstance(meta.get("dtype"), str):
        d.dtype = dtype_from_scalar_type(meta["dtype"])
        if d.dtype is None:
            raise ImportRefused(
                f"dtype {meta['dtype']!r} is outside the supported set (float32, float16, "
                "bfloat16, float64, int8, uint8, int32, int64, bool)",
                file=file,
                record=call.rpc.index if call.rpc is not None else index,
                field="args.dtype",
            )
        d.dtype_field = f"{meta_from['dtype']}.dtype"
    if d.dtype is None and call.c10d is not None:
        pos = _C10D_SIZE.get(c10d_key, (0, "tensors"))[0]
        order = [pos] + [k for k in range(len(c10d_args)) if k != pos]
        for k in order:
            if k < len(c10d_args) and c10d_args[k][0] == "tensor":
                d.dtype = _cpp_or_refuse(c10d_args[k][2], call.c10d.index, "args.Input type", file)
                d.dtype_field = "c10d op Input type"
                break
    if d.dtype is None and ann is not None:
        d.dtype = _annotation_dtype(ann, file)
        d.dtype_field = "annotation Input type"
    if d.dtype is None:
        for w in call.annotations:  # nested gloo work (monitored barrier, sync p2p)
            d.dtype = _annotation_dtype(w, file)
            if d.dtype is not None:
                d.dtype_field = "annotation Input type"
                break
    if d.dtype is None and kernel_name is not None:
        d.dtype = dtype_from_kernel(kernel_name)
        d.dtype_field = "kernel name"

    # --- sizes ---
    _sizes(d, c10d_args, ann)

    # --- group, root, peer ---
    pg = meta.get("Process Group Name")
    if isinstance(pg, str) and pg:
        d.group_name = pg
    elif "Process Group ID" in meta and _int_or_none(meta["Process Group ID"]) is not None:
        d.group_name = str(_int_or_none(meta["Process Group ID"]))
    gsize = _int_or_none(meta.get("Group size"))
    if gsize is not None and gsize > 0:
        d.group_size_hints.add(gsize)
    concrete = call.c10d.args.get("Concrete Inputs") if call.c10d is not None else None
    if isinstance(concrete, list):
        d.is_async = "True" in concrete
        if c10d_key in _C10D_ROOT and len(concrete) > _C10D_ROOT[c10d_key]:
            d.root_group_rank = _int_or_none(concrete[_C10D_ROOT[c10d_key]])
        if c10d_key in _C10D_PEER and len(concrete) > _C10D_PEER[c10d_key]:
            d.peer_group_rank = _int_or_none(concrete[_C10D_PEER[c10d_key]])
        if c10d_key == "alltoall_base_":
            for k in (2, 3):
                if len(concrete) > k:
                    try:
                        splits = parse_rank_list(concrete[k])
                    except ValueError:
                        continue
                    if not splits.truncated and splits.head:
                        d.group_size_hints.add(len(splits.head))
            if len(concrete) > 4:  # (output, input, pg, output rows, input rows, ...)
                where = (call.c10d.index, "args.Concrete Inputs", file)
                d.split_rows = (_split_list(concrete[4], *where), _split_list(concrete[3], *where))
                d.split_field = "args.Concrete Inputs"
    if d.split_rows is None and op == "all_to_all":
        source = call.rpc if call.rpc is not None else (call.kernels or [call.root])[0]
        rows = tuple(
            _split_list(meta[k], source.index, f"args.{k}", file) if k in meta else None
            for k in ("In split size", "Out split size")
        )
        if any(rows):  # NCCL's record_param_comms (gloo writes none)
            d.split_rows, d.split_field = rows, f"{meta_from['In split size']}.In split size"
    if op == "send" and _int_or_none(meta.get("Dst Rank")) is not None:
        d.peer_global = _int_or_none(meta["Dst Rank"])
    if op == "recv" and _int_or_none(meta.get("Src Rank")) is not None:
        d.peer_global = _int_or_none(meta["Src Rank"])
    _shape_hints(d, c10d_args)

    # --- expected gloo work ---
    nested = [a for a in call.annotations if a.name.startswith("gloo:")]
    if nested:  # work ran inside the call (sync send/recv, monitored_barrier)
        call.work = nested
    elif c10d_key in GLOO_WORK:
        name, dims_src, many = GLOO_WORK[c10d_key]
        d.work_name, d.work_many = name, many
        if dims_src is not None and dims_src[0] < len(c10d_args):
            kind, shapes, _ = c10d_args[dims_src[0]]
            if kind in ("tensor", "list") and shapes is not None:
                d.work_dims = [shapes[0]] if dims_src[1] == "each" else shapes
    return d


def finalize(d: Described, file: str) -> None:
    """After gloo pairing: a TensorList's dtype is written only on its gloo work
    annotation; take it from there and compute the sizes that needed it."""
    if d.dtype is None:
        for w in d.call.work:
            d.dtype = _annotation_dtype(w, file)
            if d.dtype is not None:
                d.dtype_field = "gloo work Input type"
                break
    if d.bytes_ is None:
        _sizes(d, d.c10d_args, _annotation(d.call) or (d.call.work[0] if d.call.work else None))


def _sizes(d: Described, c10d_args: list, ann) -> None:
    """Fill d.bytes_ (and times_group) from the first layer that has sizes."""
    if d.op == "barrier":
        d.bytes_, d.size_field = 0, "barrier (no payload)"
        return
    if d.dtype is None:
        return
    es = DTYPE_BYTES[d.dtype]
    meta = d.meta
    n_in = _int_or_none(meta.get("In msg nelems"))
    n_out = _int_or_none(meta.get("Out msg nelems"))
    if n_in is not None or n_out is not None:
        if d.op == "all_gather":
            n, f = n_out, "Out msg nelems"
        elif d.op == "recv" or d.op == "custom:scatter":
            n, f = (n_out, "Out msg nelems") if n_out else (n_in, "In msg nelems")
        else:
            n, f = (n_in, "In msg nelems") if n_in else (n_out, "Out msg nelems")
        if n is not None and n >= 0:
            d.bytes_, d.size_field = n * es, f
            return
    if d.c10d_key is not None and c10d_args:
        pos, how = _C10D_SIZE.get(d.c10d_key, (_first_tensor(c10d_args), "tensors"))
        if pos is not None and pos < len(c10d_args):
            kind, shapes, _ = c10d_args[pos]
            n = _sum_numel(shapes) if kind in ("tensor", "list") else None
            if n is not None:
                d.bytes_, d.size_field = n * es, "c10d op Input Dims"
                d.times_group = how == "times_group"
                return
    if ann is not None:
        dims = ann.args.get("Input Dims")
        n = _sum_numel(dims) if isinstance(dims, list) else None
        if n is not None and dims:
            d.bytes_, d.size_field = n * es, "annotation Input Dims"
            # nccl:/gloo: all_gather annotations record the input only
            d.times_group = d.op == "all_gather"
            if d.op == "reduce_scatter" and ann.name.startswith("gloo:"):
                d.times_group = False  # gloo runs it as all_reduce over the full input
            return


def _split_list(value: Any, index: int, field_name: str, file: str) -> list[int] | None:
    """A recorded split-size list (rows of dim 0), None where empty (equal parts);
    refuses one the profiler truncated or that is not a list of counts."""
    try:
        splits = parse_rank_list(value)
    except ValueError as err:
        raise ImportRefused(
            f"all_to_all split sizes unreadable: {err}", file=file, record=index, field=field_name
        ) from None
    if splits.truncated:
        raise ImportRefused(
            "all_to_all split sizes truncated by the profiler: the per-member sizes of this "
            "all_to_allv are not in the trace; record it with tracecanary capture -- CMD",
            file=file,
            record=index,
            field=field_name,
        )
    if any(v < 0 for v in splits.head):
        raise ImportRefused(
            "all_to_all split size below 0", file=file, record=index, field=field_name
        )
    return list(splits.head) or None


def split_elements(d: Described, group_size: int | None, file: str) -> dict:
    """The ``send_splits`` / ``recv_splits`` (elements) of an all_to_all whose call
    records split sizes (``formats.trace.uneven_splits``: {} for equal parts). Split sizes
    count rows of dim 0: a row is the buffer's elements over its rows (the c10d op's
    ``Input Dims``: output first, input second; NCCL's ``In/Out msg nelems`` otherwise). A
    list-form call gives each peer's tensor. A side not recorded is equal parts of its
    buffer."""
    if d.op != "all_to_all":
        return {}
    if d.c10d_key == "alltoall_" and len(d.c10d_args) > 1:
        (_, out_shapes, _), (_, in_shapes, _) = d.c10d_args[0], d.c10d_args[1]
        if in_shapes and out_shapes:
            return uneven_splits(
                [_numel(s) or 0 for s in in_shapes], [_numel(s) or 0 for s in out_shapes]
            )
        return {}
    if d.split_rows is None or not any(d.split_rows):
        return {}
    send_rows, recv_rows = d.split_rows
    n = len(send_rows or recv_rows) if group_size is None else group_size
    sides = []
    for k, (rows, nelems) in enumerate(
        ((send_rows, d.meta.get("In msg nelems")), (recv_rows, d.meta.get("Out msg nelems")))
    ):
        position = 1 - k  # c10d op: output at 0, input at 1
        shape = None
        if position < len(d.c10d_args) and d.c10d_args[position][0] == "tensor":
            shapes = d.c10d_args[position][1]
            shape = shapes[0] if shapes else None
        if isinstance(shape, list) and shape:
            total_rows, per_row = int(shape[0]), math.prod(int(x) for x in shape[1:])
        else:
            total = _int_or_none(nelems)
            total_rows = sum(rows) if rows else None
            if total is None or not total_rows or total % total_rows:
                raise ImportRefused(
                    "all_to_all split sizes recorded, but not the buffer they divide "
                    "(no Input Dims, no msg nelems)",
                    file=file,
                    record=d.index,
                    field=d.split_field,
                )
            per_row = total // total_rows
        if rows is None:
            rows = [total_rows // n] * n if n else []
        sides.append([r * per_row for r in rows])
    return uneven_splits(sides[0], sides[1])


def recorded_elements(d: Described) -> int | None:
    """Elements of this rank's own buffer as the c10d op's shapes record them (the
    position that carries the nccl-tests size), or None; dtype-free, for calls whose
    dtype no layer records (non-root scatter/gather)."""
    if d.c10d_key is None or not d.c10d_args:
        return None
    pos, how = _C10D_SIZE.get(d.c10d_key, (_first_tensor(d.c10d_args), "tensors"))
    if pos is None or pos >= len(d.c10d_args) or how != "tensors":
        return None
    kind, shapes, _ = d.c10d_args[pos]
    return _sum_numel(shapes) if kind in ("tensor", "list") else None


def _first_tensor(args: list) -> int | None:
    for k, (kind, _, _) in enumerate(args):
        if kind in ("tensor", "list"):
            return k
    return None


def _shape_hints(d: Described, c10d_args: list) -> None:
    """Group size implied by recorded shapes (output/input ratio, list lengths)."""

    def numel_at(k):
        if k < len(c10d_args) and c10d_args[k][0] in ("tensor", "list"):
            return _sum_numel(c10d_args[k][1])
        return None

    key = d.c10d_key
    if key == "_allgather_base_":
        out, inp = numel_at(0), numel_at(1)
        if out and inp and out % inp == 0:
            d.group_size_hints.add(out // inp)
    elif key == "_reduce_scatter_base_":
        out, inp = numel_at(0), numel_at(1)
        if out and inp and inp % out == 0:
            d.group_size_hints.add(inp // out)
    elif key == "alltoall_":
        for k in (0, 1):
            if k < len(c10d_args) and c10d_args[k][0] == "list" and c10d_args[k][1]:
                d.group_size_hints.add(len(c10d_args[k][1]))
