"""A source, its canary and a physical attempt as one Chrome Trace Event file, for
Perfetto (ui.perfetto.dev) and chrome://tracing.

The JSON Object Format of the Trace Event Format: ``traceEvents``, ``displayTimeUnit``
``ns``, ``otherData`` (what was exported) and ``format`` (``tracecanary.chrome-trace/v1``;
schema ``chrome-trace.schema.json``; readers skip a top-level key they do not know). Times are microseconds (``ts``, ``dur``; fractional:
the nanoseconds are kept) since the first collective of each view.

Processes (``pid``) are views of one rank, threads (``tid``) its groups, so every rank and
group has a track of its own:

- ``source · rank r`` (pid ``1_000_000 + r``): one slice per collective the rank takes part
  in, at its arrival (issue time + the rank's skew where skew is known, else the issue
  time), lasting the occurrence's measured latency; an occurrence without a measured
  latency is an instant event (never a zero-length guess);
- ``canary · rank r`` (pid ``2_000_000 + r``): the occurrences the canary *executes*
  (reduced execution), at the source's times, each with its ``weight`` (how many source
  occurrences it stands for) in ``args`` and on a ``weight`` counter of the rank;
- ``annotations`` (pid 1, thread ``tail windows``): one slice per tail window (a rare
  high-overlap stretch the canary keeps whole), from its first to its last arrival;
- ``physical · rank r`` (pid ``3_000_000 + r``, with an attempt archive): one slice per row
  of the attempt (``start_ns`` .. ``end_ns``, every timed pass), a thread per process
  group (``pg_id``; -1 is the world group).

Slices on one track never overlap partially (Perfetto drops those): a slice that would run
past the next one's start is cut there, its whole latency kept in ``args.latency_ns``.
A source with more than ``MAX_OCCURRENCES`` occurrences is exported with an even stride
over them (``otherData.occurrence_stride``), as the timeline PNG draws them.
Deterministic bytes: canonical JSON of the same inputs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tracecanary.canonical import write_json
from tracecanary.compile.document import load_canary
from tracecanary.compile.reductions import executed_selection
from tracecanary.errors import InputError, located
from tracecanary.formats.ids import CHROME_TRACE_FORMAT
from tracecanary.formats.schemas import validate
from tracecanary.load import load_program
from tracecanary.program import Program

MAX_OCCURRENCES = 200_000
ANNOTATIONS_PID = 1
SOURCE_PID, CANARY_PID, PHYSICAL_PID = 1_000_000, 2_000_000, 3_000_000
TAIL_TID = 1


def _us(ns) -> float:
    return round(float(ns) / 1000.0, 3)


def _metadata(pid: int, tid: int | None, name: str, sort_index: int) -> list[dict]:
    kind = "process" if tid is None else "thread"
    tid = 0 if tid is None else tid
    return [
        {"ph": "M", "pid": pid, "tid": tid, "name": f"{kind}_name", "args": {"name": name}},
        {
            "ph": "M",
            "pid": pid,
            "tid": tid,
            "name": f"{kind}_sort_index",
            "args": {"sort_index": sort_index},
        },
    ]


def _slices(
    pid: np.ndarray,
    tid: np.ndarray,
    start_ns: np.ndarray,
    latency_ns: np.ndarray,
    measured: np.ndarray,
    names: list[str],
    args: list[dict],
    category: str,
) -> list[dict]:
    """Complete events (``X``) where a latency was measured, instant events (``i``,
    thread scope) elsewhere; each slice cut at the next start on its (pid, tid) track."""
    order = np.lexsort((start_ns, tid, pid))
    end = start_ns + np.where(measured, latency_ns, 0)
    cut = end.copy()
    same_track = (pid[order][1:] == pid[order][:-1]) & (tid[order][1:] == tid[order][:-1])
    nxt = start_ns[order][1:]
    cut[order[:-1]] = np.where(same_track, np.minimum(end[order[:-1]], nxt), end[order[:-1]])
    events = []
    for i in order.tolist():
        event = {
            "name": names[i],
            "cat": category,
            "pid": int(pid[i]),
            "tid": int(tid[i]),
            "ts": _us(start_ns[i]),
            "args": args[i],
        }
        if measured[i]:
            event.update(ph="X", dur=_us(max(int(cut[i]) - int(start_ns[i]), 0)))
        else:
            event.update(ph="i", s="t")
        events.append(event)
    return events


def _label(op: str, size: int, dtype: str) -> str:
    return f"{op} {size} B {dtype}" if dtype else f"{op} {size} B"


def program_events(program: Program, canary: dict) -> tuple[list[dict], dict]:
    """The source, canary and annotation events of ``program`` and its ``canary`` (see
    module doc), and what ``otherData`` says about them."""
    n_canary = int(canary["structure"]["occurrences"])
    if n_canary != program.n:
        raise InputError(
            f"canary has {n_canary} logical occurrences, the source {program.n}: "
            "not a canary of this source",
            field="structure.occurrences",
        )
    occ_table = program.occurrences
    issue = program.issue_ns().astype(np.int64)
    members = program.members
    m_occ = members["occ"].to_numpy(dtype=np.int64)
    m_rank = members["rank"].to_numpy(dtype=np.int64)
    skew = members["skew_ns"].to_numpy(dtype=np.int64) if program.skew_known else 0
    arrival = issue[m_occ] + skew
    arrival = arrival - (int(arrival.min()) if arrival.size else 0)
    stride = max(1, -(-program.n // MAX_OCCURRENCES))
    keep = (m_occ % stride) == 0

    ops = occ_table["op"].astype(str).to_numpy()
    sizes = occ_table["bytes"].to_numpy(dtype=np.int64)
    dtypes = occ_table["dtype"].fillna("").astype(str).to_numpy()
    groups = occ_table["group"].astype(str).to_numpy()
    phases = occ_table["phase"].fillna("").astype(str).to_numpy()
    latency = occ_table["latency_ns"].fillna(0).to_numpy(dtype=np.int64)
    has_latency = occ_table["has_latency"].to_numpy(dtype=bool)
    tail = occ_table["tail"].to_numpy(dtype=bool)
    group_names = list(dict.fromkeys(groups.tolist()))
    group_tid = {g: i + 1 for i, g in enumerate(group_names)}
    tids = np.array([group_tid[g] for g in groups], dtype=np.int64)

    executed, weights = executed_selection(canary)
    weight_of = np.zeros(program.n)
    weight_of[executed] = weights
    is_executed = np.zeros(program.n, dtype=bool)
    is_executed[executed] = True

    def occurrence_args(o: int) -> dict:
        args = {"occ": o, "group": str(groups[o]), "bytes": int(sizes[o])}
        if dtypes[o]:
            args["dtype"] = str(dtypes[o])
        if phases[o]:
            args["phase"] = str(phases[o])
        if has_latency[o]:
            args["latency_ns"] = int(latency[o])
        if tail[o]:
            args["tail"] = True
        return args

    names = [_label(str(ops[o]), int(sizes[o]), str(dtypes[o])) for o in range(program.n)]
    base_args = [occurrence_args(o) for o in range(program.n)]
    events: list[dict] = []
    for view, pid0, sort0 in (("source", SOURCE_PID, 1), ("canary", CANARY_PID, 2)):
        for r in range(program.world_size):
            events += _metadata(pid0 + r, None, f"{view} · rank {r}", sort0 * 100_000 + r)
            for g in group_names:
                events += _metadata(pid0 + r, group_tid[g], f"group {g}", group_tid[g])
    events += _metadata(ANNOTATIONS_PID, None, "annotations", 0)
    events += _metadata(ANNOTATIONS_PID, TAIL_TID, "tail windows", 1)

    sel = np.flatnonzero(keep)
    o = m_occ[sel]
    events += _slices(
        SOURCE_PID + m_rank[sel],
        tids[o],
        arrival[sel],
        latency[o],
        has_latency[o],
        [names[i] for i in o.tolist()],
        [base_args[i] for i in o.tolist()],
        "source",
    )
    sel = np.flatnonzero(keep & is_executed[m_occ])
    o = m_occ[sel]
    events += _slices(
        CANARY_PID + m_rank[sel],
        tids[o],
        arrival[sel],
        latency[o],
        has_latency[o],
        [names[i] for i in o.tolist()],
        [{**base_args[i], "weight": float(weight_of[i])} for i in o.tolist()],
        "canary",
    )
    at, pids, w = arrival[sel], CANARY_PID + m_rank[sel], weight_of[o]
    for i in np.argsort(at, kind="stable").tolist():  # weight counter per rank
        events.append(
            {
                "ph": "C",
                "name": "weight",
                "pid": int(pids[i]),
                "ts": _us(at[i]),
                "args": {"weight": float(w[i])},
            }
        )

    first = np.full(program.n, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, m_occ, arrival)
    last = np.full(program.n, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(last, m_occ, arrival)
    edges = np.diff(np.concatenate([[0], tail.astype(np.int8), [0]]))
    windows = list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), strict=True))
    for k, (start, stop) in enumerate(windows):
        lo, hi = int(first[start:stop].min()), int(last[start:stop].max())
        events.append(
            {
                "ph": "X",
                "name": "tail window",
                "cat": "annotation",
                "pid": ANNOTATIONS_PID,
                "tid": TAIL_TID,
                "ts": _us(lo),
                "dur": _us(hi - lo),
                "args": {"window": k, "first_occ": int(start), "occurrences": int(stop - start)},
            }
        )
    other = {
        "world_size": program.world_size,
        "occurrences": program.n,
        "occurrence_stride": stride,
        "canary_executes": int(is_executed.sum()),
        "tail_windows": len(windows),
        "skew": "known" if program.skew_known else f"unknown: {program.skew_reason}",
    }
    return events, other


def attempt_events(archive: str | Path) -> tuple[list[dict], dict]:
    """The rows of one attempt archive (``rows.parquet``, else ``partial/rows.parquet``)
    as slices (see module doc), and what ``otherData`` says about them."""
    import json

    import pyarrow.parquet as pq

    root = Path(archive)
    attempt_file = root / "attempt.json"
    if not attempt_file.is_file():
        raise InputError("no attempt archive here", file=str(root), field="attempt.json")
    attempt = json.loads(attempt_file.read_text(encoding="utf-8"))
    rows_file = next(
        (p for p in (root / "rows.parquet", root / "partial" / "rows.parquet") if p.is_file()),
        None,
    )
    if rows_file is None:
        raise InputError("the attempt has no rows", file=str(root), field="rows.parquet")
    rows = pq.read_table(rows_file).to_pandas()
    if rows.empty:
        return [], {"status": attempt.get("status"), "rows": 0}
    start = rows["start_ns"].to_numpy(dtype=np.int64)
    start = start - int(start.min())
    pg = rows["pg_id"].to_numpy(dtype=np.int64)
    rank = rows["rank"].to_numpy(dtype=np.int64)
    tid = pg + 2  # -1 (the world group) -> 1
    events: list[dict] = []
    for r in sorted(set(rank.tolist())):
        events += _metadata(PHYSICAL_PID + r, None, f"physical · rank {r}", 300_000 + r)
        for g in sorted(set(pg[rank == r].tolist())):
            name = "world group" if g == -1 else f"pg {g}"
            events += _metadata(PHYSICAL_PID + r, g + 2, name, g + 2)
    names = [
        _label(str(op), int(size), str(dtype))
        for op, size, dtype in zip(rows["op"], rows["bytes"], rows["dtype"], strict=True)
    ]
    args = [
        {
            "occ": int(occ),
            "iteration": int(it),
            "weight": float(w),
            "latency_ns": int(lat),
            "correct": bool(ok),
        }
        for occ, it, w, lat, ok in zip(
            rows["occ"],
            rows["iteration"],
            rows["weight"],
            rows["latency_ns"],
            rows["correct"],
            strict=True,
        )
    ]
    latency = rows["latency_ns"].to_numpy(dtype=np.int64)
    events += _slices(
        PHYSICAL_PID + rank,
        tid,
        start,
        latency,
        np.ones(len(rows), dtype=bool),
        names,
        args,
        "physical",
    )
    config = attempt.get("physical_config") or {}
    other = {
        "status": attempt.get("status"),
        "backend": attempt.get("backend"),
        "physical_config": config.get("name") if isinstance(config, dict) else None,
        "rows": len(rows),
        "clock": "CLOCK_MONOTONIC of each host: comparable across ranks of one host only",
    }
    return events, other


def chrome_trace(
    source: str, canary_path: str, *, attempt: str | None = None, label: str | None = None
) -> dict:
    """The Chrome trace document of the source at ``source`` (a trace or normalized
    table), the canary at ``canary_path`` and, optionally, the attempt archive ``attempt``;
    validated against ``chrome-trace.schema.json``."""
    with located(source):
        program = load_program(source)
    with located(canary_path):
        events, program_info = program_events(program, load_canary(canary_path))
    other = {
        "source": label or str(source),
        "canary": str(canary_path),
        "program": program_info,
        "time_unit": "microseconds since the first collective of each view",
    }
    if attempt is not None:
        physical, other["attempt"] = attempt_events(attempt)
        other["attempt"]["path"] = str(attempt)
        events += physical
    doc = {
        "format": CHROME_TRACE_FORMAT,
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": other,
    }
    validate(representatives(doc), "chrome-trace", file=str(source))
    return doc


def representatives(doc: dict) -> dict:
    """``doc`` with ``traceEvents`` cut to representatives, for a schema check in bounded
    time: per kind of event (phase with its category, or metadata name) the first one and
    those with the smallest and largest ``ts`` and ``dur``. Events of one kind are built by
    one code path here, so their shape is the representatives' (the tests validate whole
    documents)."""
    kinds: dict[tuple, list[int]] = {}
    for i, event in enumerate(doc["traceEvents"]):
        key = (event["ph"], event.get("cat"), event["name"] if event["ph"] == "M" else None)
        kinds.setdefault(key, []).append(i)
    events = doc["traceEvents"]
    keep: set[int] = set()
    for idx in kinds.values():
        keep.add(idx[0])
        for field in ("ts", "dur"):
            with_field = [i for i in idx if field in events[i]]
            if with_field:
                keep.add(min(with_field, key=lambda i: events[i][field]))
                keep.add(max(with_field, key=lambda i: events[i][field]))
    return {**doc, "traceEvents": [events[i] for i in sorted(keep)]}


def write_chrome_trace(
    output: str,
    source: str,
    canary_path: str,
    *,
    attempt: str | None = None,
    label: str | None = None,
) -> str:
    """Write ``chrome_trace(...)`` to ``output`` (canonical JSON, atomic); its SHA-256."""
    return write_json(output, chrome_trace(source, canary_path, attempt=attempt, label=label))
