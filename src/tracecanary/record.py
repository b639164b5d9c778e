"""Recording a user's own torch.distributed program: ``tracecanary.record``.

::

    import tracecanary

    with tracecanary.record("captures/") as rec:      # after init_process_group
        with rec.phase("prefill"):
            dist.all_reduce(x)
        ...

    @tracecanary.record("captures/")                  # or as a decorator
    def train_step(...): ...

Every rank writes ``<out_dir>/rank<r>.json``: a per-rank capture in the native trace
format (``tracecanary.trace/v1``), exactly what ``tracecanary merge`` reads. Its
``meta.clock_domains`` declares the clock: the host name and ``CLOCK_MONOTONIC`` (one
system-wide clock per host, so captures of one host are related by a same-host
calibration; across hosts a measured calibration is needed).

What is recorded. For the duration of the context every binding of a watched function
in a loaded module (``torch.distributed.<name>`` for each name in ``RECORDED_CALLS``,
the functional collectives of ``torch.distributed._functional_collectives`` that
DTensor and tensor parallelism call, ``FUNCTIONAL_CALLS``, and DDP's
``torch.distributed._broadcast_coalesced``), including a user's ``from
torch.distributed import all_reduce``, is replaced by a wrapper that records and calls
the original; every binding is restored on exit (also on error). A call made inside
another recorded call is the outer call's work and is not recorded again. A
``DistributedDataParallel`` model that has no communication hook gets the stock
``allreduce_hook`` at its first forward in the context (the same arithmetic as DDP's
built-in all_reduce: the bucket divided by the group size, then summed), so that its
gradient buckets are issued through ``torch.distributed.all_reduce`` and recorded; the
hook stays registered after the context (DDP takes one hook per model: a program that
registers its own only after its first forward under a recording is refused by DDP). Names a torch build lacks are skipped. Per event: ``op`` (the native op), ``bytes`` (nccl-tests
convention, ``docs/kineto.md``: all_gather the output, reduce_scatter the input,
all_to_all the send buffer, the buffer otherwise, barrier 0), ``dtype``, ``group`` (the
default group is ``world``; another is ``pg:<its group name>``, with its global ranks in
``groups``), ``root`` / ``peer`` as global ranks (``scatter`` and ``gather``, which have
no native op, are ``custom:scatter`` / ``custom:gather`` as the Kineto import names
them: this rank's part, no root), ``phase`` when set, ``ts_ns`` (the
issue time on this host's monotonic clock) and ``latency_ns`` (issue to return) only for
a synchronous call on CPU tensors, where the call returns when the collective is done.
An asynchronous call (a functional collective is one), or one on CUDA tensors (the call
returns once enqueued), records no latency: not measured is absent, never 0. A
coalesced broadcast (DDP's parameter and buffer sync) is one ``broadcast`` per bucket,
bucketed as c10d buckets it (by dtype and device, up to the bucket size). An uneven
all_to_all carries ``send_splits`` / ``recv_splits`` (elements per member,
``formats.trace.SPLIT_FIELDS``): ``all_to_all_single`` (and the functional one) given
``input_split_sizes`` or ``output_split_sizes`` (rows of dim 0, converted to elements;
a list not given is torch's equal parts) and list-form ``all_to_all`` (a tensor per
peer), unless every part sent and received is the same (equal parts need no splits).

Completeness (``tracecanary.record_completeness``): on exit the operations the gloo
backend numbered on every process group during the context are compared with what was
recorded; any difference (operations issued by a path no wrapper sees: a builtin DDP
comm hook, ``monitored_barrier``, a functional collective's
coalesced form, a function object held since before the context) refuses the
recording (``IncompleteRecording``, no capture written). Groups on other backends are
named as unchecked in the capture's notes.

Refusals (``InputError``, at the call, before the collective runs): a tensor dtype
outside ``formats.vocab.DTYPES``; a receive without a source rank (its peer would be
unknown); entering a context when torch.distributed is not initialized; nesting two
recordings. At exit: an incomplete recording (above). A capture file is written only when
the context exits without an exception (atomically); an exception leaves no capture of
that run behind.
"""

from __future__ import annotations

import functools
import inspect
import os
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tracecanary.errors import InputError
from tracecanary.formats.ids import TRACE_FORMAT
from tracecanary.formats.trace import uneven_splits
from tracecanary.formats.vocab import DTYPES
from tracecanary.record_completeness import (
    COMPLETENESS_NOTE,
    NOT_CHECKED,
    UNSIZED_NOTE,
    IncompleteRecording,
    compare,
    gloo_operations,
    group_states,
)

CLOCK_NAME = "CLOCK_MONOTONIC"
WORLD_GROUP = "world"

# torch.distributed name -> native op
RECORDED_CALLS: dict[str, str] = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "all_gather_single": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_single": "reduce_scatter",
    "all_to_all": "all_to_all",
    "all_to_all_single": "all_to_all",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "barrier": "barrier",
    "send": "send",
    "recv": "recv",
    "isend": "send",
    "irecv": "recv",
    "scatter": "custom:scatter",  # no native op: named as the Kineto import names them
    "gather": "custom:gather",
}

FUNCTIONAL_MODULE = "torch.distributed._functional_collectives"
# functional collective (FUNCTIONAL_MODULE) -> native op; each takes its input as
# ``self`` and its group as ``group`` (a process group, a mesh or mesh dimension, ranks)
FUNCTIONAL_CALLS: dict[str, str] = {
    "all_reduce": "all_reduce",
    "broadcast": "broadcast",
    "all_gather_tensor": "all_gather",
    "all_gather_tensor_autograd": "all_gather",
    "all_gather_single": "all_gather",
    "all_gather_single_autograd": "all_gather",
    "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_tensor_autograd": "reduce_scatter",
    "reduce_scatter_single": "reduce_scatter",
    "reduce_scatter_single_autograd": "reduce_scatter",
    "all_to_all_single": "all_to_all",
    "all_to_all_single_autograd": "all_to_all",
}
COALESCED_BROADCAST = "_broadcast_coalesced"  # torch.distributed's, which DDP calls
# C++ entry points whose collectives Python cannot size: DDP's start-up. The operations
# they run are counted (backend sequence numbers) and named in the capture's notes.
UNSIZED_CALLS: dict[str, str] = {
    "_verify_params_across_processes": "DDP's parameter-shape check at construction",
}
UNSIZED_REBUILD = "DDP's bucket-order sync after its first iteration"

# which argument holds the payload that the nccl-tests convention counts
_PAYLOAD_ARGUMENT = {
    "all_reduce": "tensor",
    "all_gather": "tensor_list",
    "all_gather_into_tensor": "output_tensor",
    "all_gather_single": "output_tensor",
    "reduce_scatter": "input_list",
    "reduce_scatter_tensor": "input",
    "reduce_scatter_single": "input",
    "all_to_all": "input_tensor_list",
    "all_to_all_single": "input",
    "broadcast": "tensor",
    "reduce": "tensor",
    "send": "tensor",
    "recv": "tensor",
    "isend": "tensor",
    "irecv": "tensor",
    "scatter": "tensor",  # the part this rank receives, as the Kineto import counts it
    "gather": "tensor",  # the part this rank sends
}
_ROOT_ARGUMENT = {"broadcast": ("src", "group_src"), "reduce": ("dst", "group_dst")}
_PEER_ARGUMENT = {
    "send": ("dst", "group_dst"),
    "isend": ("dst", "group_dst"),
    "recv": ("src", "group_src"),
    "irecv": ("src", "group_src"),
}

_active_lock = threading.Lock()
_active: list[Recorder] = []
_inside = threading.local()  # .depth: recorded calls running on this thread


def _tensors(value: Any) -> list:
    return list(value) if isinstance(value, list | tuple) else [value]


def _dtype_name(tensor, call: str) -> str:
    name = str(tensor.dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise InputError(
            f"tracecanary.record: {call} on a {name} tensor: dtype not in the trace "
            f"vocabulary ({', '.join(DTYPES)})",
            field="dtype",
        )
    return name


def _tensor_bytes(tensors: list) -> int:
    return sum(int(t.numel()) * int(t.element_size()) for t in tensors)


def _single_splits(send, recv, send_rows, recv_rows, size: int) -> dict:
    """An ``all_to_all_single``'s splits in elements (``send_splits``, ``recv_splits``):
    torch's split sizes count rows of dim 0 (a missing list: equal parts); {} when the
    call gives neither list (an even all_to_all). ``recv`` is the output tensor or its
    shape."""
    if not send_rows and not recv_rows:
        return {}

    def elements(shape, rows) -> list[int]:
        shape = tuple(shape)
        per_row = 1
        for extent in shape[1:]:
            per_row *= int(extent)
        if rows:
            return [int(r) * per_row for r in rows]
        total = int(shape[0]) if shape else 1
        return [total // size * per_row] * size

    return uneven_splits(
        elements(send.shape, send_rows), elements(getattr(recv, "shape", recv), recv_rows)
    )


def broadcast_buckets(tensors: list, bucket_bytes: int) -> list[list[int]]:
    """The buckets (tensor indexes) in which c10d's ``broadcast_coalesced`` broadcasts
    ``tensors``: c10d's own assignment (``_compute_bucket_assignment_by_size``, by dtype
    and device up to ``bucket_bytes``, ordered by first tensor)."""
    import torch.distributed as dist

    buckets, _ = dist._compute_bucket_assignment_by_size(tensors, [bucket_bytes])
    return [list(bucket) for bucket in buckets]


class Recorder:
    """One rank's recording: the events so far, the groups they used, and the backend
    operations they account for per process group."""

    def __init__(self, out_dir: str | os.PathLike, phase: str | None) -> None:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            raise InputError(
                "tracecanary.record: torch.distributed is not initialized "
                "(call init_process_group first)",
                field="torch.distributed",
            )
        self.dist = dist
        self.out_dir = Path(out_dir)
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.host = socket.gethostname()
        self.events: list[dict] = []
        self.groups: dict[str, list[int]] = {WORLD_GROUP: list(range(self.world_size))}
        self.current_phase = phase
        self.installed = False
        self.lock = threading.Lock()  # DDP's hooks record from the autograd thread
        self.seen: Counter = Counter()  # process group -> backend operations recorded
        self.bindings: list[tuple[dict, str, Callable, Callable]] = []
        self.ddp_forward: tuple[type, Callable] | None = None
        self.reducer_rebuild: tuple[type, Callable] | None = None
        self.start_states: dict = {}
        self.unchecked: list[str] = []
        self.unsized: Counter = Counter()  # (process group, what ran them) -> operations

    @contextmanager
    def phase(self, name: str | None) -> Iterator[None]:
        """Label the collectives issued inside with ``phase`` ``name`` (None: no phase)."""
        before, self.current_phase = self.current_phase, name
        try:
            yield
        finally:
            self.current_phase = before

    def _process_group(self, group):
        return self.dist.distributed_c10d._get_default_group() if group is None else group

    def _label(self, group) -> str:
        dist = self.dist
        if group is None or group is dist.GroupMember.WORLD:
            return WORLD_GROUP
        return f"pg:{group.group_name}"

    def _group_id(self, group) -> str:
        gid = self._label(group)
        if gid not in self.groups:  # the world is there from the start
            self.groups[gid] = [int(r) for r in self.dist.get_process_group_ranks(group)]
        return gid

    def _global_rank(self, args: dict, names: tuple[str, str], group, call: str) -> int:
        plain, in_group = names
        if args.get(plain) is not None:
            return int(args[plain])
        if args.get(in_group) is not None:
            if group is None:
                return int(args[in_group])
            return int(self.dist.get_global_rank(group, int(args[in_group])))
        raise InputError(
            f"tracecanary.record: {call} without {plain} (or {in_group}): "
            "the peer would be unknown",
            field=plain,
        )

    def _event(self, call: str, args: dict) -> dict:
        group = args.get("group")
        event: dict[str, Any] = {
            "rank": self.rank,
            "op": RECORDED_CALLS[call],
            "group": self._group_id(group),
        }
        if call == "barrier":
            event["bytes"], event["dtype"] = 0, "uint8"  # a barrier carries no payload
        else:
            tensors = _tensors(args[_PAYLOAD_ARGUMENT[call]])
            event["bytes"] = _tensor_bytes(tensors)
            event["dtype"] = _dtype_name(tensors[0], call)
        if call == "all_to_all":  # the list form: one tensor per peer, sized each
            event.update(
                uneven_splits(
                    [int(t.numel()) for t in args["input_tensor_list"]],
                    [int(t.numel()) for t in args["output_tensor_list"]],
                )
            )
        elif call == "all_to_all_single":
            event.update(
                _single_splits(
                    args["input"],
                    args["output"],
                    args.get("input_split_sizes"),
                    args.get("output_split_sizes"),
                    self.dist.get_world_size(group),
                )
            )
        if call in _ROOT_ARGUMENT:
            event["root"] = self._global_rank(args, _ROOT_ARGUMENT[call], group, call)
        if call in _PEER_ARGUMENT:
            event["peer"] = self._global_rank(args, _PEER_ARGUMENT[call], group, call)
        return event

    def _functional_group(self, args: dict, call: str):
        """The process group a functional collective runs on (it may be named by a
        mesh, a mesh dimension, a list of ranks or a group name)."""
        funcol = sys.modules[FUNCTIONAL_MODULE]
        try:
            group = funcol._resolve_group(args["group"], args.get("tag", ""))
            if isinstance(group, str):
                group = self.dist.distributed_c10d._resolve_process_group(group)
        except (RuntimeError, ValueError, TypeError, KeyError, AssertionError) as err:
            raise InputError(
                f"tracecanary.record: functional {call}: its group cannot be resolved ({err})",
                field="group",
            ) from None
        return None if group is self.dist.GroupMember.WORLD else group

    def _functional_event(self, call: str, args: dict) -> tuple[dict, object]:
        group = self._functional_group(args, call)
        op = FUNCTIONAL_CALLS[call]
        tensor = args["self"]
        size = self.dist.get_world_size(group)
        event: dict[str, Any] = {
            "rank": self.rank,
            "op": op,
            "group": self._group_id(group),
            "bytes": _tensor_bytes([tensor]) * (size if op == "all_gather" else 1),
            "dtype": _dtype_name(tensor, call),
        }
        if op == "all_to_all":
            output_splits = args.get("output_split_sizes")
            output_rows = sum(output_splits) if output_splits else tensor.shape[0]
            output_shape = (output_rows, *tensor.shape[1:]) if tensor.dim() else ()
            event.update(
                _single_splits(
                    tensor,
                    output_shape,
                    args.get("input_split_sizes"),
                    output_splits,
                    size,
                )
            )
        if op == "broadcast":  # ``src`` is the root's rank in the group
            src = int(args["src"])
            event["root"] = src if group is None else int(self.dist.get_global_rank(group, src))
        return event, group

    def _record(self, events: list[dict], group, operations: int, start: int, end: int | None):
        with self.lock:
            for event in events:
                event["seq"] = len(self.events)
                event["ts_ns"] = start
                if end is not None:
                    event["latency_ns"] = end - start
                if self.current_phase is not None:
                    event["phase"] = self.current_phase
                self.events.append(event)
            self.seen[self._process_group(group)] += operations

    def _call(self, original: Callable, describe: Callable, args, kwargs):
        """Run ``original``; record what ``describe(args, kwargs)`` says it is: (events,
        group, backend operations, synchronous on CPU). Not recorded: a call inside a
        recorded call, or one made after the recording ended."""
        if not self.installed or getattr(_inside, "depth", 0):
            return original(*args, **kwargs)
        events, group, operations, timed = describe(args, kwargs)
        _inside.depth = 1
        try:
            start = time.monotonic_ns()
            result = original(*args, **kwargs)
            end = time.monotonic_ns()
        finally:
            _inside.depth = 0
        self._record(events, group, operations, start, end if timed else None)
        return result

    def _wrap_call(self, call: str, original: Callable) -> Callable:
        signature = inspect.signature(original)

        def describe(args, kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            event = self._event(call, bound.arguments)
            group = bound.arguments.get("group")
            synchronous = call in ("send", "recv") or not bound.arguments.get("async_op")
            on_cpu = all(
                t.device.type == "cpu"
                for value in bound.arguments.values()
                for t in _tensors(value)
                if hasattr(t, "device") and hasattr(t, "numel")
            )
            size = self.dist.get_world_size(group)
            return [event], group, gloo_operations(event["op"], call, size), synchronous and on_cpu

        @functools.wraps(original)
        def recorded(*args, **kwargs):
            return self._call(original, describe, args, kwargs)

        return recorded

    def _wrap_functional(self, call: str, original: Callable) -> Callable:
        signature = inspect.signature(original)

        def describe(args, kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            event, group = self._functional_event(call, bound.arguments)
            return [event], group, 1, False  # asynchronous: the result is waited on later

        @functools.wraps(original)
        def recorded(*args, **kwargs):
            return self._call(original, describe, args, kwargs)

        return recorded

    def _wrap_coalesced_broadcast(self, original: Callable) -> Callable:
        """``_broadcast_coalesced(process_group, tensors, bucket_bytes, src)``: one
        ``broadcast`` per bucket (``broadcast_buckets``)."""

        def describe(args, kwargs):
            if len(args) != 4 or kwargs:  # not DDP's call: left to the completeness check
                return [], None, 0, False
            group, tensors, bucket_bytes, src = args
            group = None if group is self.dist.GroupMember.WORLD else group
            root = int(src) if group is None else int(self.dist.get_global_rank(group, src))
            events = []
            for bucket in broadcast_buckets(list(tensors), int(bucket_bytes)):
                members = [tensors[i] for i in bucket]
                events.append(
                    {
                        "rank": self.rank,
                        "op": "broadcast",
                        "group": self._group_id(group),
                        "bytes": _tensor_bytes(members),
                        "dtype": _dtype_name(members[0], COALESCED_BROADCAST),
                        "root": root,
                    }
                )
            on_cpu = all(t.device.type == "cpu" for t in tensors)
            return events, group, len(events), on_cpu

        def recorded(*args, **kwargs):
            return self._call(original, describe, args, kwargs)

        return recorded

    def _wrap_unsized(self, what: str, original: Callable) -> Callable:
        """Run a C++ entry point whose collectives cannot be sized from Python; count
        the operations it runs per group (sequence numbers before and after)."""

        def counted(*args, **kwargs):
            if not self.installed or getattr(_inside, "depth", 0):
                return original(*args, **kwargs)
            before = group_states(self.dist, self._label)
            _inside.depth = 1
            try:
                result = original(*args, **kwargs)
            finally:
                _inside.depth = 0
            after = group_states(self.dist, self._label)
            with self.lock:
                for group, state in after.items():
                    prior = before.get(group)
                    ran = (state.number or 0) - ((prior.number or 0) if prior else 0)
                    if ran:
                        self.unsized[(group, what)] += ran
            return result

        return counted

    def _watched(self) -> dict[int, tuple[Callable, Callable]]:
        """id(original) -> (original, wrapper) for every watched function this torch has."""
        watched: dict[int, tuple[Callable, Callable]] = {}
        for call in RECORDED_CALLS:
            original = getattr(self.dist, call, None)
            if original is not None:  # a name this torch does not have is skipped
                watched[id(original)] = (original, self._wrap_call(call, original))
        funcol = sys.modules.get(FUNCTIONAL_MODULE)
        if funcol is None:
            import torch.distributed._functional_collectives as funcol
        for call in FUNCTIONAL_CALLS:
            original = getattr(funcol, call, None)
            if original is not None:
                watched[id(original)] = (original, self._wrap_functional(call, original))
        original = getattr(self.dist, COALESCED_BROADCAST, None)
        if original is not None:
            watched[id(original)] = (original, self._wrap_coalesced_broadcast(original))
        for call, what in UNSIZED_CALLS.items():
            original = getattr(self.dist, call, None)
            if original is not None:
                watched[id(original)] = (original, self._wrap_unsized(what, original))
        return watched

    def _install_ddp_hook(self) -> None:
        """Give a DDP model without a communication hook the stock ``allreduce_hook`` at
        its first forward, so its buckets go through ``torch.distributed.all_reduce``."""
        try:
            from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
            from torch.nn.parallel import DistributedDataParallel
        except ImportError:
            return
        forward = DistributedDataParallel.forward
        recorder = self

        @functools.wraps(forward)
        def hooked_forward(model, *args, **kwargs):
            if recorder.installed and not getattr(model, "_tracecanary_hooked", False):
                model._tracecanary_hooked = True
                if not getattr(model, "_comm_hooks", None):
                    try:
                        model.register_comm_hook(model.process_group, allreduce_hook)
                    except RuntimeError:  # a builtin hook: the completeness check tells
                        pass
            return forward(model, *args, **kwargs)

        DistributedDataParallel.forward = hooked_forward
        self.ddp_forward = (DistributedDataParallel, forward)
        reducer = getattr(self.dist, "Reducer", None)
        rebuild = getattr(reducer, "_rebuild_buckets", None)
        if rebuild is not None:
            reducer._rebuild_buckets = self._wrap_unsized(UNSIZED_REBUILD, rebuild)
            self.reducer_rebuild = (reducer, rebuild)

    def install(self) -> None:
        self.start_states = group_states(self.dist, self._label)
        watched = self._watched()
        for module in list(sys.modules.values()):
            namespace = getattr(module, "__dict__", None)
            if not isinstance(namespace, dict):
                continue
            for name, value in list(namespace.items()):
                entry = watched.get(id(value))
                if entry is not None and entry[0] is value:
                    namespace[name] = entry[1]
                    self.bindings.append((namespace, name, value, entry[1]))
        self._install_ddp_hook()
        self.installed = True

    def restore(self) -> None:
        self.installed = False
        for namespace, name, original, wrapper in reversed(self.bindings):
            if namespace.get(name) is wrapper:  # unless the program rebound the name
                namespace[name] = original
        self.bindings.clear()
        if self.ddp_forward is not None:
            cls, forward = self.ddp_forward
            cls.forward = forward
            self.ddp_forward = None
        if self.reducer_rebuild is not None:
            cls, rebuild = self.reducer_rebuild
            cls._rebuild_buckets = rebuild
            self.reducer_rebuild = None

    def completeness_notes(self) -> list[str]:
        """What the completeness check established, and what ran without being recorded."""
        checked = "every operation the gloo backend numbered on the other groups of this "
        checked += "rank during the recording was recorded (backend sequence numbers)"
        if self.unsized:
            checked += ", but for the unsized operations noted"
        if not self.unchecked:
            notes = [COMPLETENESS_NOTE + checked.replace("the other groups", "every group")]
        else:
            unchecked = ", ".join(self.unchecked)
            notes = [f"{COMPLETENESS_NOTE}{NOT_CHECKED}{unchecked}; {checked}"]
        counts = Counter({(self._label(g), what): n for (g, what), n in self.unsized.items()})
        for (label, what), count in sorted(counts.items()):
            notes.append(
                f"{UNSIZED_NOTE}{count} operations on group {label} run by {what} inside "
                "C++ (their sizes are not visible from Python)"
            )
        return notes

    def check_complete(self) -> None:
        """Raise ``IncompleteRecording`` unless every checked group ran exactly the
        operations recorded on it (``record_completeness``); note the unchecked ones."""
        accounted = Counter(self.seen)
        for (group, _), count in self.unsized.items():
            accounted[group] += count
        differences, self.unchecked = compare(
            self.start_states, group_states(self.dist, self._label), accounted
        )
        if differences:
            raise IncompleteRecording(
                f"tracecanary.record: rank {self.rank}: {'; '.join(differences)}: operations "
                "ran through a path the recorder does not see (a builtin DDP comm hook, "
                "monitored_barrier, a coalesced functional collective, a "
                "function held since before recording began); no capture written. Record "
                "this program under torch.profiler and import it with tracecanary "
                "import-kineto",
                field="completeness",
            )

    def document(self) -> dict:
        """This rank's capture (``tracecanary.trace/v1``)."""
        return {
            "format": TRACE_FORMAT,
            "meta": {
                "world_size": self.world_size,
                "source": f"tracecanary.record (rank {self.rank}, host {self.host}, pid {os.getpid()})",
                "clock_domains": [
                    {
                        "id": f"{self.host}/{CLOCK_NAME}",
                        "ranks": [self.rank],
                        "host": self.host,
                        "clock": CLOCK_NAME,
                    }
                ],
                "notes": [
                    f"recorded in-process by tracecanary.record: ts_ns is the issue time on "
                    f"host {self.host}'s {CLOCK_NAME} (shared by every process of the host)",
                    "latency_ns: issue to return of synchronous calls on CPU tensors only; "
                    "absent for asynchronous calls and CUDA tensors (not measured)",
                    *self.completeness_notes(),
                ],
            },
            "groups": [{"id": gid, "ranks": ranks} for gid, ranks in sorted(self.groups.items())],
            "events": self.events,
        }

    def write(self) -> Path:
        from tracecanary.trace_io import write_trace

        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / f"rank{self.rank}.json"
        write_trace(self.document(), path)
        return path


class record:  # noqa: N801 - used like contextlib's lower-case context managers
    """Record this rank's torch.distributed collectives into ``out_dir/rank<r>.json``
    (see the module doc). A context manager (yields the ``Recorder``, whose
    ``phase(name)`` labels a region) and a decorator (each call of the decorated
    function is one recording, replacing the rank's capture file)."""

    def __init__(self, out_dir: str | os.PathLike, *, phase: str | None = None) -> None:
        self.out_dir = out_dir
        self.initial_phase = phase
        self.recorder: Recorder | None = None

    def __enter__(self) -> Recorder:
        recorder = Recorder(self.out_dir, self.initial_phase)
        with _active_lock:
            if _active:
                raise InputError(
                    "tracecanary.record: a recording is already active in this process",
                    field="record",
                )
            _active.append(recorder)
        recorder.install()
        self.recorder = recorder
        return recorder

    def __exit__(self, exc_type, exc, tb) -> None:
        recorder, self.recorder = self.recorder, None
        recorder.restore()
        with _active_lock:
            _active.remove(recorder)
        if exc_type is None:
            recorder.check_complete()
            self.path = recorder.write()

    def __call__(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def recorded(*args, **kwargs):
            with record(self.out_dir, phase=self.initial_phase):
                return func(*args, **kwargs)

        return recorded
