"""The search log says what blocks each reduction step: a bounded candidate that is not
smaller names the timing fields its intervals did not shrink, and an execution step that
executes no fewer names its tail occurrences and what keeps the signature order from
repeating (``tracecanary.compile.repetition``): a stream that alternates inside a
repeated step, or concurrent groups interleaving differently from step to step."""

from __future__ import annotations

import numpy as np
import pandas as pd
from conftest import REPO

from tracecanary.compile.repetition import repeated_occurrences, repetition_profile
from tracecanary.compile.structure import encode_structure
from tracecanary.formats.schemas import validate
from tracecanary.program import make_program
from tracecanary.sim.backends import load_backends
from tracecanary.verify.behavior import Replay, load_tolerances, replay_program
from tracecanary.verify.blocking import BlockingExplainer
from tracecanary.verify.search import search, search_log_document

GROUP_RANKS = {"a": [0, 1], "b": [2, 3], "c": [0, 2]}
GROUP_BYTES = {"a": 4096, "b": 65536, "c": 1 << 20}


def _program(steps: list[list[tuple[str, str]]]):
    """One occurrence per (group, stream) in step order; constant timing, no skew."""
    cells = [cell for step in steps for cell in step]
    n = len(cells)
    occurrences = {
        "op": ["all_reduce"] * n,
        "bytes": [GROUP_BYTES[g] for g, _ in cells],
        "dtype": ["float32"] * n,
        "group": [g for g, _ in cells],
        "group_size": [2] * n,
        "stream": [s for _, s in cells],
        "gap_ns": [10_000] * n,
    }
    members = {"occ": [], "rank": [], "skew_ns": []}
    for i, (g, _) in enumerate(cells):
        for r in GROUP_RANKS[g]:
            members["occ"].append(i)
            members["rank"].append(r)
            members["skew_ns"].append(0)
    return make_program(occurrences, members, world_size=4, skew_known=True)


def _interleaved_steps(count: int, seed: int = 7) -> list[list[tuple[str, str]]]:
    """Every step holds one collective of each group, in an order drawn per step."""
    rng = np.random.default_rng(seed)
    return [[(g, "") for g in rng.permutation(list(GROUP_RANKS))] for _ in range(count)]


def test_repeated_occurrences_counts_every_depth():
    records = encode_structure(np.array([0, 1, 0, 1, 0, 1, 2, 3, 3, 3], dtype=np.int64))
    assert repeated_occurrences(records) == 9  # the (0, 1) motif and the run of 3s


def test_profile_of_a_repeating_order_names_no_obstacle():
    program = _program([[("a", ""), ("b", ""), ("c", "")] for _ in range(40)])
    profile = repetition_profile(program)
    assert profile.repeated == program.n == 120
    assert profile.records == 1
    text = profile.obstacle()
    assert "stream" not in text and "interleave" not in text


def test_profile_names_concurrent_groups_interleaving_differently_per_step():
    program = _program(_interleaved_steps(60))
    profile = repetition_profile(program)
    assert profile.records_within_groups == 3  # each group alone: one run
    assert profile.repeated_within_groups == program.n
    assert profile.records > 3 * profile.records_within_groups
    assert "concurrent groups interleave differently" in profile.obstacle()


def test_profile_names_a_stream_alternating_inside_the_step():
    rng = np.random.default_rng(3)
    steps = [
        [("a", f"thread{int(rng.integers(2))}"), ("b", f"thread{int(rng.integers(2))}")]
        for _ in range(60)
    ]
    profile = repetition_profile(_program(steps))
    assert profile.records_without_stream == 1
    assert profile.records > 3
    assert "without the stream" in profile.obstacle()


def test_search_log_says_why_execution_and_bounded_steps_do_not_reduce():
    program = _program(_interleaved_steps(60))
    result = search(
        program,
        [0, 1_000],
        load_backends(REPO / "config" / "backends.yaml"),
        load_tolerances(None),
        source_digest="0" * 64,
        progress=lambda line: None,
    )
    assert result.canary is not None
    bounded = [e for e in result.log if e["stage"] == "budget" and e["settings"]["budget_ns"]]
    assert bounded and all(
        "kept exact" in e["reason"] for e in bounded if e["reason"].startswith("verified but")
    )
    no_fewer = [e for e in result.log if e["reason"].startswith("executes no fewer")]
    assert no_fewer, [e["reason"] for e in result.log]
    for entry in no_fewer:
        assert "tail occurrences run whole" in entry["reason"]
        assert "concurrent groups interleave differently" in entry["reason"]


def _jittery_program(n: int = 120, seed: int = 5):
    """Two alternating signatures with lognormal issue gaps: occurrences queue behind
    each other by chance, so a canary executing few steps misses the source's mean."""
    rng = np.random.default_rng(seed)
    occurrences = {
        "op": ["all_reduce", "all_gather"] * (n // 2),
        "bytes": [4096, 1 << 16] * (n // 2),
        "dtype": ["float32"] * n,
        "group": ["0"] * n,
        "group_size": [4] * n,
        "gap_ns": (rng.lognormal(0, 1.5, n) * 20_000).astype(int),
    }
    members = {
        "occ": [i for i in range(n) for _ in range(4)],
        "rank": [r for _ in range(n) for r in range(4)],
        "skew_ns": [0] * (4 * n),
    }
    return make_program(occurrences, members, world_size=4, skew_known=True)


def test_search_log_names_check_configuration_and_signature_blocking_each_rejected_step():
    program = _jittery_program()
    backends = load_backends(REPO / "config" / "backends.yaml")
    result = search(
        program,
        [0],
        backends,
        load_tolerances(None),
        source_digest="0" * 64,
        progress=lambda line: None,
    )
    rejected = [e for e in result.log if e.get("claim") not in (None, "verified")]
    assert rejected, [e["reason"] for e in result.log]
    _, signatures = program.signature_ids()
    for entry in rejected:
        first = entry["blocking"][0]
        assert first["config"] in backends.configs
        assert first["check"] in {f"{c.split(':', 1)[1]}" for c in entry["failed_checks"]}
        sig = first["signature"]
        assert (sig["op"], sig["bytes"]) == tuple(signatures.iloc[sig["id"]][["op", "bytes"]])
        assert first["excess"] > 1  # outside its allowance
        assert (
            f"blocked by {first['check']} on config {first['config']}" in entry["reason"]
            and f"signature {sig['id']} ({sig['op']} {sig['bytes']} B" in entry["reason"]
        )
    doc = search_log_document(result, source_digest="0" * 64, budgets_ns=[0])
    validate(doc, "search-log", file="search-log")


def test_tail_recall_failure_is_attributed_to_the_signature_whose_tail_events_are_not_run():
    program = _jittery_program()
    backends = load_backends(REPO / "config" / "backends.yaml")
    source = replay_program(program, backends)
    config = next(iter(source.metrics))
    tail = [int(e["occ"]) for e in source.metrics[config]["tail_events"]]
    sig_ids, signatures = program.signature_ids()
    dropped = int(pd.Series(sig_ids[tail]).value_counts().index[0])  # most tail events
    ids, latency, weights = source.latencies[config]
    kept = sig_ids[ids] != dropped  # a canary that never runs that signature
    canary = Replay(source.metrics, {config: (ids[kept], latency[kept], weights[kept])})
    verification = {
        "statuses": {"commitments": "verified", "coverage": "full"},
        "source": {},
        "checks": [
            {
                "config": config,
                "metric": "tail_event_recall",
                "source": 1.0,
                "canary": 0.2,
                "tolerance": {"minimum": 0.9},
                "pass": False,
            }
        ],
        "ranking": {"changed": []},
    }
    (entry,) = BlockingExplainer(program).explain(
        verification, {"source": source, "canary": canary}
    )
    assert entry["attributed_by"] == "tail_events_not_executed"
    assert entry["signature"]["id"] == dropped
    assert entry["signature"]["op"] == signatures.iloc[dropped]["op"]
    assert entry["excess"] == 8.0  # 80% missing against 10% allowed
