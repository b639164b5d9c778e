"""From a Kineto event list to communication *calls*, one per issued collective.

One pass over ``traceEvents`` keeps only the events whose name marks communication
(``c10d::*`` ops, ``record_param_comms``, ``nccl:*``/``gloo:*`` annotations, NCCL
kernels); everything else is skipped without building objects. On each CPU thread the
kept events nest: the outermost one is the call (normally the ``c10d::`` API op), the
``record_param_comms`` record and the ``nccl:``/``gloo:`` annotations inside it belong
to it. ``gloo:`` annotations that no call contains are gloo *work* (they run on the
group's run-loop threads, or on the caller's thread for send/recv) and are paired with
their calls later (``tracecanary.kineto.gloo``). ``record_param_comms`` records of
``work.wait()`` (``Collective name`` ``wait``) are filtered and counted. NCCL kernels
are indexed by ``External id`` for the second metadata layer.

Units: ``start_ns``/``end_ns`` are integer nanoseconds of the trace's own ``ts`` scale
(relative or absolute, see ``importer``); exact, no float rounding.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from tracecanary.errors import ImportRefused
from tracecanary.kineto.load import us_to_ns
from tracecanary.kineto.vocab import is_nccl_kernel

RPC = "record_param_comms"
_PREFIXES = frozenset({"c10d:", "nccl:", "gloo:", "rccl:"})
_CPU_PREFIXES = ("c10d::", "nccl:", "gloo:", "rccl:")
GPU_CATS = frozenset(
    {
        "kernel",
        "gpu_user_annotation",
        "gpu_memcpy",
        "gpu_memset",
        "cuda_runtime",
        "cuda_driver",
        "cuda_sync",
    }
)


@dataclass(slots=True)
class Ev:
    """One kept trace event (only communication events become these)."""

    index: int
    name: str
    cat: str
    pid: Any
    tid: Any
    start_ns: int
    end_ns: int
    args: dict

    @property
    def thread(self) -> tuple:
        return (self.pid, self.tid)


@dataclass(slots=True)
class Call:
    """One issued communication call and the evidence attached to it."""

    root: Ev
    c10d: Ev | None = None
    rpc: Ev | None = None
    annotations: list[Ev] = field(default_factory=list)
    kernels: list[Ev] = field(default_factory=list)
    work: list[Ev] = field(default_factory=list)
    ambiguous_with: set[int] = field(default_factory=set)  # ids of calls sharing a work FIFO

    @property
    def start_ns(self) -> int:
        return self.root.start_ns

    @property
    def thread(self) -> tuple:
        return self.root.thread


@dataclass
class Extracted:
    calls: list[Call]
    work: list[Ev]  # gloo annotations outside any call, in start order
    kernels_by_ext: dict[Any, list[Ev]]
    n_kernels: int
    n_wait_filtered: int
    n_events: int
    n_rpc: int
    n_rpc_with_metadata: int
    has_c10d: bool


def _select(trace_events: list, file: str) -> list[int]:
    """Indices of events whose name marks communication (one cheap pass)."""
    prefixes = _PREFIXES
    try:
        return [
            i
            for i, e in enumerate(trace_events)
            if (n := e.get("name")) is not None
            and (n[:5] in prefixes or n == RPC or n[:4] == "nccl" or n[:4] == "rccl")
        ]
    except (AttributeError, TypeError):
        pass
    for i, e in enumerate(trace_events):  # locate the malformed record
        if not isinstance(e, dict):
            raise ImportRefused("trace event is not a JSON object", file=file, record=i)
        if "name" in e and not isinstance(e["name"], str):
            raise ImportRefused("event name is not a string", file=file, record=i, field="name")
    raise AssertionError("unreachable")  # pragma: no cover


def _as_ev(i: int, e: dict, file: str) -> Ev | None:
    if e.get("ph") != "X":
        return None
    start = us_to_ns(e.get("ts"))
    if start is None:
        raise ImportRefused("timestamp missing or not a number", file=file, record=i, field="ts")
    dur = us_to_ns(e.get("dur", 0))
    if dur is None or dur < 0:
        raise ImportRefused("duration not a non-negative number", file=file, record=i, field="dur")
    args = e.get("args")
    if args is None:
        args = {}
    elif not isinstance(args, dict):
        raise ImportRefused("args is not a JSON object", file=file, record=i, field="args")
    for key, value in (("pid", e.get("pid")), ("tid", e.get("tid"))):
        if isinstance(value, list | dict):
            raise ImportRefused("not a number or string", file=file, record=i, field=key)
    if isinstance(args.get("External id"), list | dict):
        raise ImportRefused("not a number or string", file=file, record=i, field="args.External id")
    return Ev(
        i, e["name"], str(e.get("cat", "")), e.get("pid"), e.get("tid"), start, start + dur, args
    )


def _is_wait(ev: Ev) -> bool:
    return ev.name == RPC and ev.args.get("Collective name") == "wait"


def extract(trace_events: list, file: str) -> Extracted:
    """Calls, unattached gloo work and NCCL kernels of one trace."""
    kernels_by_ext: dict[Any, list[Ev]] = defaultdict(list)
    n_kernels = 0
    per_thread: dict[tuple, list[Ev]] = defaultdict(list)
    for i in _select(trace_events, file):
        ev = _as_ev(i, trace_events[i], file)
        if ev is None:
            continue
        if ev.cat in GPU_CATS:
            if ev.cat == "kernel" and is_nccl_kernel(ev.name):
                n_kernels += 1
                ext = ev.args.get("External id")
                if ext is not None:
                    kernels_by_ext[ext].append(ev)
            continue
        if ev.name != RPC and not ev.name.startswith(_CPU_PREFIXES):
            continue  # e.g. a python_function whose file name starts with "nccl"
        per_thread[ev.thread].append(ev)

    calls: list[Call] = []
    work: list[Ev] = []
    n_wait = n_rpc = n_rpc_meta = 0
    has_c10d = False
    for evs in per_thread.values():
        evs.sort(key=lambda ev: (ev.start_ns, -ev.end_ns, ev.index))
        stack: list[tuple[Ev, Call]] = []
        for ev in evs:
            if ev.name == RPC:
                n_rpc += 1
                if "Collective name" in ev.args:
                    n_rpc_meta += 1
            if ev.name.startswith("c10d::"):
                has_c10d = True
            # leave containers that ended before ev (a zero-length ev at a container's
            # end still counts as inside it)
            while stack and (
                stack[-1][0].end_ns < ev.start_ns
                or (stack[-1][0].end_ns == ev.start_ns and ev.end_ns > ev.start_ns)
            ):
                stack.pop()
            container = next((c for e, c in reversed(stack) if ev.end_ns <= e.end_ns), None)
            if _is_wait(ev):
                n_wait += 1
                continue
            if container is None:
                if ev.name.startswith("gloo:"):
                    work.append(ev)
                    continue
                call = Call(root=ev)
                _attach(call, ev)
                calls.append(call)
                stack.append((ev, call))
            else:
                _attach(container, ev)
                if not ev.name.startswith("gloo:"):  # gloo work contains no calls
                    stack.append((ev, container))
    calls.sort(key=lambda c: (c.start_ns, c.root.index))
    work.sort(key=lambda ev: (ev.start_ns, ev.index))
    for call in calls:
        for ext in _external_ids(call):
            if ext in kernels_by_ext:
                call.kernels = kernels_by_ext[ext]
                break
    return Extracted(
        calls=calls,
        work=work,
        kernels_by_ext=dict(kernels_by_ext),
        n_kernels=n_kernels,
        n_wait_filtered=n_wait,
        n_events=len(trace_events),
        n_rpc=n_rpc,
        n_rpc_with_metadata=n_rpc_meta,
        has_c10d=has_c10d,
    )


def _attach(call: Call, ev: Ev) -> None:
    if ev.name.startswith("c10d::"):
        if call.c10d is None:
            call.c10d = ev
    elif ev.name == RPC:
        if call.rpc is None:
            call.rpc = ev
    else:
        call.annotations.append(ev)


def _external_ids(call: Call) -> list:
    out = []
    for ev in (call.rpc, call.c10d, *call.annotations):
        if ev is not None and (ext := ev.args.get("External id")) is not None:
            out.append(ext)
    return out
