"""Reduced execution: weights stand for every logical occurrence, tail windows run
whole, the logical expansion is untouched."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracecanary.compile import (
    compile_program,
    executed_selection,
    expand_canary,
    parse_budget,
    reduce_execution,
    source_digest,
)
from tracecanary.compile.document import validate_canary
from tracecanary.compile.examples import decode_like_program, random_program
from tracecanary.compile.structure import top_level_spans
from tracecanary.errors import InputError


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 5000),
    n=st.integers(1, 200),
    k=st.integers(1, 5),
    context=st.integers(0, 2),
    lossless=st.booleans(),
)
def test_executed_weights_sum_to_the_logical_occurrences(seed, n, k, context, lossless):
    program = random_program(seed, n, p_tail=0.05)
    budget = None if lossless else parse_budget("gap=50,overlap=50,latency=50,skew=50")
    canary = reduce_execution(
        compile_program(program, budget=budget),
        {"max_executed_repeats": k, "tail_context": context},
    )
    validate_canary(canary)
    idx, weights = executed_selection(canary)
    assert math.isclose(float(weights.sum()), program.n, rel_tol=1e-12)
    assert len(np.unique(idx)) == len(idx) and (np.diff(idx) > 0).all()
    executed = expand_canary(canary, executed=True)
    assert executed.n == canary["stats"]["occurrences_executed"] == len(idx)
    assert math.isclose(float(executed.occurrences["weight"].sum()), program.n, rel_tol=1e-12)
    # every tail-flagged occurrence is executed, with weight 1
    tail_idx = np.flatnonzero(program.occurrences["tail"].to_numpy())
    pos = np.searchsorted(idx, tail_idx)
    assert (pos < len(idx)).all() and np.array_equal(idx[pos], tail_idx)
    assert (weights[pos] == 1.0).all()
    # reduction never touches what the canary stands for
    if lossless:
        assert source_digest(expand_canary(canary)) == source_digest(program)


def test_decode_steps_execute_k_times_and_tail_windows_whole():
    program = decode_like_program(1000, layers=8, world_size=4, tail_every=250)
    canary = compile_program(
        program, budget=parse_budget("gap=5us,overlap=5us,latency=5us,skew=5us")
    )
    reduced = reduce_execution(canary, {"max_executed_repeats": 10})
    motif = reduced["structure"]["records"][1]
    assert motif["repeat"] == 1000
    tail_steps = [125, 375, 625, 875]
    windows = sorted({s + d for s in tail_steps for d in (-1, 0, 1)})
    assert motif["whole_reps"] == windows
    assert set(windows) <= set(motif["executed_reps"])
    assert motif["execute"] == 10 + len(windows)
    assert motif["steady_weight"] == (1000 - len(windows)) / 10
    stats = reduced["stats"]
    assert stats["occurrences_logical"] == program.n
    assert stats["occurrences_executed"] == 3 + 9 * (10 + len(windows))
    assert stats["execution_reduction"] < 0.05
    executed = expand_canary(reduced, executed=True)
    # each tail window runs whole: all 9 occurrences of the step, weight 1
    logical = executed.occurrences["logical_occ"].to_numpy()
    for step in tail_steps:
        occ = 3 + step * 9 + np.arange(9)
        at = np.searchsorted(logical, occ)
        assert np.array_equal(logical[at], occ)
        assert (executed.occurrences["weight"].to_numpy()[at] == 1.0).all()
        assert executed.occurrences["tail"].to_numpy()[at].all()


def test_latency_rule_marks_unflagged_slow_windows_as_tail():
    program = decode_like_program(200, layers=4, world_size=2)
    occ = program.occurrences.copy()
    slow = 3 + 77 * 5 + 2
    occ.loc[slow, "latency_ns"] = 25_000 * 10
    program = type(program)(occ, program.members, program.world_size, program.skew_known)
    reduced = reduce_execution(compile_program(program), {"max_executed_repeats": 4})
    motif = reduced["structure"]["records"][1]
    assert 77 in motif["whole_reps"]
    off = reduce_execution(
        compile_program(program), {"max_executed_repeats": 4, "tail_latency_factor": None}
    )
    assert 77 not in off["structure"]["records"][1]["whole_reps"]


def test_per_record_policy_and_replacing_a_reduction():
    program = decode_like_program(300, layers=4, world_size=2)
    canary = compile_program(program, execution_policy={"max_executed_repeats": 5})
    assert canary["structure"]["records"][1]["execute"] < 300
    redone = reduce_execution(canary, {"records": {"1": 50}})
    assert redone["structure"]["records"][1]["execute"] >= 50
    undone = reduce_execution(canary, {})
    assert undone["stats"]["occurrences_executed"] == program.n
    assert all("executed_reps" not in r for r in undone["structure"]["records"])


def test_spans_cover_the_program_in_order():
    canary = compile_program(decode_like_program(50, layers=3, world_size=2))
    spans = top_level_spans(canary["structure"]["records"])
    assert spans[0].start == 0 and spans[-1].stop == canary["structure"]["occurrences"]
    assert all(a.stop == b.start for a, b in zip(spans, spans[1:], strict=False))


@pytest.mark.parametrize(
    "policy",
    [
        {"max_executed_repeats": 0},
        {"max_executed_repeats": True},
        {"tail_context": -1},
        {"bogus": 1},
        {"tail_latency_factor": 0.5},
    ],
)
def test_bad_policies_are_refused(policy):
    canary = compile_program(random_program(1, 30))
    with pytest.raises(InputError):
        reduce_execution(canary, policy)
