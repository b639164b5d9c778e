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

What is recorded. For the duration of the context, the module attributes
``torch.distributed.<name>`` for each name in ``RECORDED_CALLS`` are replaced by wrappers
and restored on exit (also on error); a wrapper records one event and calls the original.
Calls through other names (``from torch.distributed import all_reduce`` made before the
context, ``distributed_c10d.*``, object collectives, which call ``distributed_c10d``
internally) are not seen. Names a torch build lacks are skipped. Per event: ``op`` (the native op), ``bytes`` (nccl-tests
convention, ``docs/kineto.md``: all_gather the output, reduce_scatter the input,
all_to_all the send buffer, the buffer otherwise, barrier 0), ``dtype``, ``group`` (the
default group is ``world``; another is ``pg:<its group name>``, with its global ranks in
``groups``), ``root`` / ``peer`` as global ranks, ``phase`` when set, ``ts_ns`` (the
issue time on this host's monotonic clock) and ``latency_ns`` (issue to return) only for
a synchronous call on CPU tensors, where the call returns when the collective is done.
An asynchronous call, or one on CUDA tensors (the call returns once enqueued), records
no latency: not measured is absent, never 0.

Refusals (``InputError``, at the call, before the collective runs): a tensor dtype
outside ``formats.vocab.DTYPES``; a receive without a source rank (its peer would be
unknown); entering a context when torch.distributed is not initialized; nesting two
recordings. A capture file is written only when the context exits without an exception
(atomically); an exception leaves no capture of that run behind.
"""

from __future__ import annotations

import functools
import inspect
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tracecanary.errors import InputError
from tracecanary.formats.ids import TRACE_FORMAT
from tracecanary.formats.vocab import DTYPES

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
}

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


class Recorder:
    """One rank's recording: the events so far and the groups they used."""

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
        self.originals: dict[str, Callable] = {}

    @contextmanager
    def phase(self, name: str | None) -> Iterator[None]:
        """Label the collectives issued inside with ``phase`` ``name`` (None: no phase)."""
        before, self.current_phase = self.current_phase, name
        try:
            yield
        finally:
            self.current_phase = before

    def _group_id(self, group) -> str:
        dist = self.dist
        if group is None or group is dist.GroupMember.WORLD:
            return WORLD_GROUP
        gid = f"pg:{group.group_name}"
        self.groups.setdefault(gid, [int(r) for r in dist.get_process_group_ranks(group)])
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
            "seq": len(self.events),
            "op": RECORDED_CALLS[call],
            "group": self._group_id(group),
        }
        if call == "barrier":
            event["bytes"], event["dtype"] = 0, "uint8"  # a barrier carries no payload
        else:
            tensors = _tensors(args[_PAYLOAD_ARGUMENT[call]])
            event["bytes"] = sum(int(t.numel()) * int(t.element_size()) for t in tensors)
            event["dtype"] = _dtype_name(tensors[0], call)
        if call in _ROOT_ARGUMENT:
            event["root"] = self._global_rank(args, _ROOT_ARGUMENT[call], group, call)
        if call in _PEER_ARGUMENT:
            event["peer"] = self._global_rank(args, _PEER_ARGUMENT[call], group, call)
        if self.current_phase is not None:
            event["phase"] = self.current_phase
        return event

    def _wrap(self, call: str, original: Callable) -> Callable:
        signature = inspect.signature(original)

        @functools.wraps(original)
        def recorded(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            event = self._event(call, bound.arguments)
            synchronous = call in ("send", "recv") or not bound.arguments.get("async_op")
            on_cpu = all(
                t.device.type == "cpu"
                for value in bound.arguments.values()
                for t in _tensors(value)
                if hasattr(t, "device") and hasattr(t, "numel")
            )
            start = time.monotonic_ns()
            result = original(*args, **kwargs)
            end = time.monotonic_ns()
            event["ts_ns"] = start
            if synchronous and on_cpu:
                event["latency_ns"] = end - start
            self.events.append(event)
            return result

        return recorded

    def install(self) -> None:
        for call in RECORDED_CALLS:
            original = getattr(self.dist, call, None)
            if original is None:  # a name this torch does not have
                continue
            self.originals[call] = original
            setattr(self.dist, call, self._wrap(call, original))

    def restore(self) -> None:
        for call, original in self.originals.items():
            setattr(self.dist, call, original)
        self.originals.clear()

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
            self.path = recorder.write()

    def __call__(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def recorded(*args, **kwargs):
            with record(self.out_dir, phase=self.initial_phase):
                return func(*args, **kwargs)

        return recorded
