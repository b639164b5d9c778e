"""The search log says what blocks each reduction step: a bounded candidate that is not
smaller names the timing fields its intervals did not shrink, and an execution step that
executes no fewer names its tail occurrences and what keeps the signature order from
repeating (``tracecanary.compile.repetition``): a stream that alternates inside a
repeated step, or concurrent groups interleaving differently from step to step."""

from __future__ import annotations

import numpy as np
from conftest import REPO

from tracecanary.compile.repetition import repeated_occurrences, repetition_profile
from tracecanary.compile.structure import encode_structure
from tracecanary.program import make_program
from tracecanary.sim.backends import load_backends
from tracecanary.verify.behavior import load_tolerances
from tracecanary.verify.search import search

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
