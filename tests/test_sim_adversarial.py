"""The adversarial trace: its shape, and why a ranking-only oracle is too weak on it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tracecanary.canonical import canonical_json_bytes
from tracecanary.formats.schemas import validate
from tracecanary.program import make_program
from tracecanary.sim.backends import load_backends
from tracecanary.sim.ranking import decision_mismatches, decisions
from tracecanary.sim.report import workload_metrics
from tracecanary.synth.adversarial import build_adversarial

try:
    from test_sim_support import adversarial_program
except ImportError:  # tests/ as a package
    from tests.test_sim_support import adversarial_program

REPO = Path(__file__).resolve().parents[1]
BACKENDS = load_backends(REPO / "config" / "backends.yaml")
EVENT_FIELDS = {
    "rank",
    "seq",
    "op",
    "bytes",
    "dtype",
    "group",
    "phase",
    "stream",
    "ts_ns",
    "overlap_ns",
}


def test_adversarial_trace_is_deterministic_valid_and_has_400_events_of_100_collectives():
    doc = build_adversarial()
    assert canonical_json_bytes(doc) == canonical_json_bytes(build_adversarial())
    validate(doc, "trace", file="adversarial")
    events = doc["events"]
    assert len(events) == 400 and all(set(e) == EVENT_FIELDS for e in events)
    assert sorted({e["rank"] for e in events}) == [0, 1, 2, 3]
    assert all(
        sorted(e["seq"] for e in events if e["rank"] == r) == list(range(100)) for r in range(4)
    )
    assert len(doc["meta"]["clock_domains"]) == 1 and doc["meta"]["clock_domains"][0]["ranks"] == [
        0,
        1,
        2,
        3,
    ]


def test_adversarial_trace_has_queue_reset_gaps_and_rare_high_overlap_tail_windows():
    program = adversarial_program()
    occ = program.occurrences
    gaps = occ["gap_ns"].to_numpy()
    assert (gaps >= 4_000_000).sum() >= 5  # idle gaps between bursts
    assert (gaps[1:] <= 2_000).sum() >= 60  # bursts faster than any service time
    tail = occ["tail"].to_numpy()
    overlap = occ["overlap_ns"].to_numpy()
    positive = overlap[overlap > 0]
    assert tail.sum() == 8 and (overlap[tail] > 3 * np.median(positive)).all()


def _single(program, i):
    cols = {c: program.occurrences[c].to_numpy()[[i]] for c in program.occurrences.columns}
    cols["gap_ns"] = np.zeros(1, dtype=np.int64)
    cols["occ"] = np.zeros(1, dtype=np.int64)
    m = program.members[program.members["occ"] == i]
    members = {
        "occ": np.zeros(len(m), dtype=np.int64),
        "rank": m["rank"].to_numpy(),
        "skew_ns": m["skew_ns"].to_numpy(),
    }
    return make_program(cols, members, world_size=program.world_size, skew_known=True)


def test_one_decode_occurrence_alone_preserves_all_forty_ranking_decisions():
    # the essay's point: a decision is too easy to preserve (the reducer's baseline)
    program = adversarial_program()
    full = decisions(workload_metrics(program, BACKENDS), 0.01)
    assert len(full) == 40 and all(d != 0 for d in full.values())
    decode = np.flatnonzero((program.occurrences["phase"] == "decode").to_numpy())
    for i in decode[[0, 17, 71]]:
        single = decisions(workload_metrics(_single(program, int(i)), BACKENDS), 0.01)
        assert decision_mismatches(full, single) == []
    # ... while a tail occurrence alone does not
    tail = int(np.flatnonzero(program.occurrences["tail"].to_numpy())[0])
    assert decision_mismatches(
        full, decisions(workload_metrics(_single(program, tail), BACKENDS), 0.01)
    )
