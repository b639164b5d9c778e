"""Isolated (nccl-tests style) replay: each distinct op signature alone, back to back.

Every signature of the program is replayed ``ISOLATED_REPEATS`` times with no gaps, no
skew, no overlap and no other traffic (each on its own channel, so signatures never
queue behind each other), through the same engine as the workload. The per-signature
time is (completion of the last repetition - issue) / repeats, a float in ns, which is
what nccl-tests reports as the average time per iteration. The isolated score of a
configuration is the occurrence-weighted sum of per-signature times: what the workload
would cost if each collective behaved as in its microbenchmark.
"""

from __future__ import annotations

import math

import numpy as np

from tracecanary.program import Program, make_program
from tracecanary.sim.backends import BackendConfig
from tracecanary.sim.engine import prepare, simulate

ISOLATED_REPEATS = 20


def signatures(program: Program) -> list[dict]:
    """Distinct signatures in first-seen order, with group_size, count and summed weight
    (through the Program's accessors: a canary's expansion needs no pandas)."""
    sig, table = program.signatures()
    weight = program.column("weight", np.float64)
    gsize = program.column("group_size", np.int64)
    order = np.argsort(sig, kind="stable")
    bounds = np.searchsorted(sig[order], np.arange(len(table) + 1))
    out = []
    for i, row in enumerate(table):
        idx = order[bounds[i] : bounds[i + 1]]
        out.append(
            {
                "id": i,
                "op": row["op"],
                "bytes": row["bytes"],
                "dtype": row["dtype"],
                "group": row["group"],
                "group_size": int(gsize[idx[0]]),
                "root": row["root"],
                "phase": row["phase"],
                "stream": row["stream"],
                "occurrences": int(idx.size),
                "weight": math.fsum(weight[idx].tolist()),
            }
        )
    return out


def isolated_program(sigs: list[dict], repeats: int = ISOLATED_REPEATS) -> Program:
    """The microbenchmark program: each signature ``repeats`` times, all issued at 0,
    each signature on its own channel; no skew, no overlap."""
    rows = [s for s in sigs for _ in range(repeats)]
    n = len(rows)
    return make_program(
        {
            "op": [r["op"] for r in rows],
            "bytes": [r["bytes"] for r in rows],
            "dtype": [r["dtype"] for r in rows],
            "group": [r["group"] for r in rows],
            "group_size": [r["group_size"] for r in rows],
            "root": [r["root"] for r in rows],
            "phase": [r["phase"] for r in rows],
            "stream": [f"isolated:{r['id']}" for r in rows],
            "gap_ns": np.zeros(n, dtype=np.int64),
        },
        {"occ": [], "rank": [], "skew_ns": []},
        world_size=max([r["group_size"] for r in rows], default=1),
        skew_known=True,
        notes=("isolated microbenchmark program: no skew, no overlap, no gaps by construction",),
        columns=True,  # column arrays: the simulator needs no DataFrame
    )


def isolated_times(
    sigs: list[dict], config: BackendConfig, repeats: int = ISOLATED_REPEATS
) -> dict:
    """{"time_ns": [per-signature time], "score_ns": weighted sum} under ``config``."""
    if not sigs:
        return {"time_ns": [], "score_ns": 0.0}
    prep = prepare(isolated_program(sigs, repeats))
    result = simulate(prep, config)
    last_end = result.end_ns.reshape(len(sigs), repeats).max(axis=1)
    issue = prep.issue_ns.reshape(len(sigs), repeats).min(axis=1)
    times = [float(e - t) / repeats for e, t in zip(last_end.tolist(), issue.tolist(), strict=True)]
    score = math.fsum(s["weight"] * t for s, t in zip(sigs, times, strict=True))
    return {"time_ns": times, "score_ns": score}
