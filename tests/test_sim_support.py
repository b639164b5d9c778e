"""Test helpers for the simulator: a private trace -> Program converter for the
adversarial trace and a plain per-event reference implementation of the model in
docs/simulator.md (Python loops, written from the equations, not from the engine).

The tests at the bottom pin the converter against the lead's ``load_program`` when it
is importable (same occurrences, skews, overlaps; tail windows = phase ``tail``).
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest

from tracecanary.program import SIGNATURE_COLUMNS, Program, make_program
from tracecanary.sim.backends import BackendConfig
from tracecanary.synth.adversarial import build_adversarial


def program_from_trace(doc: dict) -> Program:
    """Occurrences of a one-clock native trace: the k-th event of each member rank in a
    group is instance k; T = min ts; skew = ts - T; overlap = max over members; tail
    windows are the occurrences whose phase is ``tail``."""
    by_key: dict[tuple[str, int], list[dict]] = defaultdict(list)
    counters: dict[tuple[int, str], int] = defaultdict(int)
    for ev in sorted(doc["events"], key=lambda e: (e["rank"], e["seq"])):
        k = counters[(ev["rank"], ev["group"])]
        counters[(ev["rank"], ev["group"])] += 1
        by_key[(ev["group"], k)].append(ev)
    rows = []
    for (group, k), evs in by_key.items():
        t = min(e["ts_ns"] for e in evs)
        rows.append((t, group, k, evs))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    occ_cols: dict[str, list] = defaultdict(list)
    mem: dict[str, list] = defaultdict(list)
    prev = None
    for i, (t, group, _k, evs) in enumerate(rows):
        first = evs[0]
        occ_cols["op"].append(first["op"])
        occ_cols["bytes"].append(first["bytes"])
        occ_cols["dtype"].append(first["dtype"])
        occ_cols["group"].append(group)
        occ_cols["group_size"].append(len(evs))
        occ_cols["phase"].append(first.get("phase", ""))
        occ_cols["stream"].append(first.get("stream", ""))
        occ_cols["gap_ns"].append(0 if prev is None else t - prev)
        occ_cols["overlap_ns"].append(max(e["overlap_ns"] for e in evs))
        occ_cols["has_overlap"].append(True)
        occ_cols["tail"].append(first.get("phase") == "tail")
        prev = t
        for e in sorted(evs, key=lambda e: e["rank"]):
            mem["occ"].append(i)
            mem["rank"].append(e["rank"])
            mem["skew_ns"].append(e["ts_ns"] - t)
    return make_program(occ_cols, mem, world_size=doc["meta"]["world_size"], skew_known=True)


def adversarial_program() -> Program:
    return program_from_trace(build_adversarial())


# ----------------------------------------------------------------------------------
# Plain reference implementation of the model (docs/simulator.md), one event at a time.

_N_MINUS_1_OPS = {"all_gather", "reduce_scatter", "all_to_all"}
_ROOTED_OPS = {"broadcast", "reduce"}


def _steps(algorithm: str, op: str, n: int) -> int | None:
    log2n = 0
    while (1 << log2n) < n:
        log2n += 1
    if algorithm == "ring":
        if op in ("all_reduce", "barrier"):
            return 2 * (n - 1)
        if op in _N_MINUS_1_OPS or op in _ROOTED_OPS:
            return n - 1
        return 1  # send / recv / custom
    if op in ("all_reduce", "barrier"):
        return 2 * log2n
    if op in _ROOTED_OPS:
        return log2n
    return None


def _busfactor(op: str, n: int) -> float:
    if op == "all_reduce":
        return (2.0 * (n - 1)) / n
    if op in _N_MINUS_1_OPS:
        return (1.0 * (n - 1)) / n
    if op == "barrier":
        return 0.0
    return 1.0


def reference_simulate(program: Program, config: BackendConfig, ablations=()) -> dict[str, list]:
    """Per-occurrence outcome lists in simulated order (keys like SimResult + occ)."""
    ablations = set(ablations)
    rows = program.occurrences.to_dict("records")
    skews: dict[int, list[int]] = defaultdict(list)
    if program.skew_known and "skew" not in ablations:
        for m in program.members.to_dict("records"):
            skews[int(m["occ"])].append(int(m["skew_ns"]))
    issue_all = []
    t = 0
    for r in rows:
        t += int(r["gap_ns"])
        issue_all.append(t)
    positions = [i for i, r in enumerate(rows) if not ("tail" in ablations and r["tail"])]
    order = list(positions)
    if "order" in ablations:
        sig_of: dict[tuple, int] = {}
        sig = []
        for r in rows:
            key = tuple(r[c] for c in SIGNATURE_COLUMNS)
            sig_of.setdefault(key, len(sig_of))
            sig.append(sig_of[key])
        order = sorted(positions, key=lambda i: sig[i])  # stable
    last_end: dict[tuple[str, str], int] = {}
    out: dict[str, list] = defaultdict(list)
    for pos, i in enumerate(order):
        r = rows[i]
        issue = issue_all[positions[pos]]
        arrivals = [issue + s for s in skews.get(i, [])] or [issue]
        ready = max(arrivals)
        op, n, nbytes = r["op"], int(r["group_size"]), int(r["bytes"])
        best, choice = math.inf, -1
        for cand in config.candidates:
            steps = _steps(cand.algorithm, op, n)
            if steps is None:
                continue
            cost = cand.latency_us * float(steps) + (float(nbytes) * _busfactor(op, n)) / (
                1000.0 * cand.effective_busbw_gbps
            )
            if cost < best:
                best, choice = cost, cand.index
        base = best * 1000.0
        has_overlap = bool(r["has_overlap"]) and "overlap" not in ablations
        overlap = int(r["overlap_ns"]) if has_overlap else 0
        if has_overlap and base > 0:
            service_f = base * (1.0 + config.contention * min(1.0, overlap / base))
        else:
            service_f = base
        service = round(service_f)
        hidden = min(service, math.floor(config.overlap_efficiency * overlap)) if has_overlap else 0
        channel = (r["group"], r["stream"])
        start = max(ready, last_end.get(channel, ready))
        end = start + service
        last_end[channel] = end
        out["occ"].append(int(r["occ"]))
        out["issue_ns"].append(issue)
        out["rendezvous_wait_ns"].append(ready - issue)
        out["candidate"].append(choice)
        out["service_ns"].append(service)
        out["start_ns"].append(start)
        out["end_ns"].append(end)
        out["queue_wait_ns"].append(start - ready)
        out["hidden_ns"].append(hidden)
        out["latency_ns"].append(end - issue - hidden)
    return out


# ----------------------------------------------------------------------------------


def test_adversarial_converter_has_100_occurrences_with_known_skew_and_tail_windows():
    program = adversarial_program()
    occ = program.occurrences
    assert program.n == 100 and len(program.members) == 400
    assert program.skew_known
    assert int(occ["tail"].sum()) == 8
    assert (program.members["skew_ns"] >= 0).all() and (program.members["skew_ns"] > 0).any()
    assert set(occ["phase"]) == {"decode", "prefill", "tail"}


def test_adversarial_converter_agrees_with_load_program(tmp_path):
    load = pytest.importorskip(
        "tracecanary.load", reason="the lead's load_program is not available yet"
    )
    from tracecanary.canonical import write_json

    path = tmp_path / "adversarial.json"
    write_json(path, build_adversarial())
    loaded = load.load_program(path)
    mine = adversarial_program()
    for col in (
        "op",
        "bytes",
        "group",
        "group_size",
        "phase",
        "stream",
        "gap_ns",
        "overlap_ns",
        "has_overlap",
        "tail",
    ):
        np.testing.assert_array_equal(
            loaded.occurrences[col].to_numpy(), mine.occurrences[col].to_numpy(), err_msg=col
        )
    assert loaded.skew_known
    np.testing.assert_array_equal(
        loaded.members["skew_ns"].to_numpy(), mine.members["skew_ns"].to_numpy()
    )
