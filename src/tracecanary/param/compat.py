"""The compatibility layer for upstream PARAM's replayer, applied at launch, in each rank.

Upstream ``train/comms/pt/commsTraceReplay.py`` at commit 1e115ff has three defects that
stop or mis-execute a valid basic trace. Each patch below is the smallest change that
removes one of them; it wraps an upstream function at runtime (PARAM's files are never
edited) and is recorded by ``id`` in the attempt's ``environment.json``:

``use-device-time``
    ``comms_utils.py:826`` reads ``args.use_device_time``, which only ``comms.py:202``
    defines: the replayer stops before reading a trace (AttributeError). The patch adds
    the flag (``--use-device-time``, default off, upstream's own default) to the
    replayer's argument parser.
``rooted-src``
    ``commsTraceReplay.py:800`` reads ``curComm.srcOrDst`` for a broadcast and neither
    basic parser (``commsTraceReplay.py:1531-1572``, ``commsTraceParser.py:89-112``)
    sets it, whatever the JSON says: every broadcast dies (AttributeError). The patch
    sets ``srcOrDst`` of every parsed broadcast and reduce after the trace is read: the
    entry's ``root`` (a global rank), else the first member of its group (torch's group
    rank 0, the meaning of upstream's default ``srcOrDst = 0`` at ``:1376``).
``reduce-root``
    ``runComms`` copies ``srcOrDst`` into the collective's arguments only for broadcast
    (``commsTraceReplay.py:799``); a reduce keeps ``srcOrDst = 0`` from ``:1376`` (or the
    last broadcast's root), so it reduces to global rank 0, and on a group without rank 0
    dies (``ValueError: Global rank 0 is not part of group``). The patch copies it for
    reduce as well.

Guarantees: ``check`` says, before any process starts, which upstream name a patch
needs and does not find (a PARAM other than 1e115ff); ``apply`` patches exactly the
listed functions of the given module and returns the records of what it applied.
"""

from __future__ import annotations

import types
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Patch:
    """One documented runtime patch: what upstream does wrong, where, and the change."""

    id: str
    upstream: str  # file:line of the defect in PARAM 1e115ff
    defect: str
    change: str
    needs: tuple[str, ...]  # attributes of the replayer module (dotted) the patch wraps


PATCHES: tuple[Patch, ...] = (
    Patch(
        id="use-device-time",
        upstream="train/comms/pt/comms_utils.py:826",
        defect="commsParamsHolderBase reads args.use_device_time, which only comms.py:202 "
        "defines: the replayer stops with AttributeError before reading any trace",
        change="commsTraceReplayBench.readArgs adds --use-device-time (store_true, default "
        "False) to the parser when absent",
        needs=("commsTraceReplayBench.readArgs",),
    ),
    Patch(
        id="rooted-src",
        upstream="train/comms/pt/commsTraceReplay.py:800",
        defect="runComms reads curComm.srcOrDst for broadcast; the basic parsers "
        "(commsTraceReplay.py:1531-1572, commsTraceParser.py:89-112) never set it: every "
        "broadcast dies with AttributeError",
        change="after readTrace, every broadcast and reduce gets srcOrDst = its root "
        "(global rank), else the first member of its group",
        needs=("commsTraceReplayBench.readTrace",),
    ),
    Patch(
        id="reduce-root",
        upstream="train/comms/pt/commsTraceReplay.py:1376",
        defect="srcOrDst is fixed at 0 and runComms copies the entry's only for broadcast "
        "(:799): a reduce goes to global rank 0, or fails on a group without rank 0",
        change="runComms copies curComm.srcOrDst into the collective arguments for reduce too",
        needs=("commsTraceReplayBench.runComms",),
    ),
)


def records() -> list[dict]:
    """The patches as plain records (for environment.json), in application order."""
    return [{k: v for k, v in asdict(p).items() if k != "needs"} for p in PATCHES]


def _lookup(module: types.ModuleType, dotted: str):
    obj = module
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def check(module: types.ModuleType) -> list[str]:
    """The ``patch id: missing name`` problems of applying every patch to ``module``."""
    problems = []
    for patch in PATCHES:
        for name in patch.needs:
            try:
                _lookup(module, name)
            except AttributeError:
                problems.append(f"{patch.id}: {module.__name__}.{name} not found")
    return problems


def _first_members(comms: list) -> dict[int, int]:
    """pg_id -> its first (lowest) global rank, from the parsed ``init`` entries."""
    return {
        c.pgId: min(c.groupRanks)
        for c in comms
        if getattr(c, "comms", None) == "init" and c.groupRanks and c.pgId is not None
    }


def apply(module: types.ModuleType) -> list[dict]:
    """Patch the replayer module (``...commsTraceReplay``) in place; return ``records()``."""
    problems = check(module)
    if problems:
        raise RuntimeError("PARAM compatibility patches cannot apply: " + "; ".join(problems))
    bench = module.commsTraceReplayBench

    read_args = bench.readArgs

    def read_args_with_device_time(self, parser):
        if not any("--use-device-time" in a.option_strings for a in parser._actions):
            parser.add_argument("--use-device-time", action="store_true", default=False)
        return read_args(self, parser)

    read_trace = bench.readTrace

    def read_trace_with_roots(self, *args, **kwargs):
        result = read_trace(self, *args, **kwargs)
        first = _first_members(self.comms_trace)
        for comm in self.comms_trace:
            if getattr(comm, "comms", None) in ("broadcast", "reduce"):
                if comm.root is not None:
                    comm.srcOrDst = int(comm.root)
                else:
                    comm.srcOrDst = first.get(comm.pgId, 0) if comm.pgId is not None else 0
        return result

    run_comms = bench.runComms

    def run_comms_with_reduce_root(self, collName, curComm, *args, **kwargs):
        if collName == "reduce" and getattr(curComm, "srcOrDst", None) is not None:
            self.collectiveArgs.srcOrDst = curComm.srcOrDst
        return run_comms(self, collName, curComm, *args, **kwargs)

    bench.readArgs = read_args_with_device_time
    bench.readTrace = read_trace_with_roots
    bench.runComms = run_comms_with_reduce_root
    return records()
