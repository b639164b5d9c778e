"""Reduced execution at any depth of the structure: weights stand for every logical
occurrence, tail windows run whole in every outer repetition where they occur,
executed occurrences keep their logical timing (a junction's gap: plus its delay),
and the document states exactly what executes (checked on read, recomputable from the
recorded policy)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from conftest import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_compile_junctions import reference_junction_delays

from tracecanary.canonical import canonical_json_bytes
from tracecanary.compile import (
    compile_program,
    executed_selection,
    expand_canary,
    parse_budget,
    reduce_execution,
    source_digest,
)
from tracecanary.compile.document import validate_canary
from tracecanary.compile.execution import check_execution, policy_tail_occurrences
from tracecanary.compile.reductions import read_reductions
from tracecanary.compile.selection import STEADY_SELECTIONS
from tracecanary.compile.structure import top_level_spans
from tracecanary.errors import InputError
from tracecanary.synth.examples import decode_like_program, random_program, requests_program
from tracecanary.verify.commitments import verify_commitments

BUDGET = "gap=50,overlap=50,latency=50,skew=50"


def _check_guarantees(program, canary, *, lossless: bool) -> None:
    """Every guarantee of tracecanary.compile.execution, checked on one reduced canary."""
    validate_canary(canary)
    idx, weights = executed_selection(canary)
    n = program.n
    assert len(np.unique(idx)) == len(idx) and (np.diff(idx) > 0).all()
    assert math.isclose(float(weights.sum()), n, rel_tol=1e-12)
    assert canary["stats"]["occurrences_executed"] == len(idx)
    assert canary["stats"]["occurrences_logical"] == n
    # each reduced instance: weights sum to its repeat; reductions never nest or overlap
    stops = []
    for red in read_reductions(canary["structure"]["records"]):
        whole = np.isin(red.executed_reps, red.whole_reps)
        assert math.isclose(
            whole.sum() + (~whole).sum() * red.steady_weight, red.repeat, rel_tol=1e-12
        )
        inside = (idx >= red.start) & (idx < red.stop)
        assert inside.sum() == len(red.executed_reps) * red.period
        stops.append((red.start, red.stop))
    assert all(a[1] <= b[0] for a, b in zip(stops, stops[1:], strict=False))
    # every tail occurrence (flag, latency rule, outlier rule) runs with weight 1, and the
    # whole repetition holding it runs too, in every outer repetition where it occurs
    logical = expand_canary(canary)
    policy = canary["execution"]["policy"]
    tail = policy_tail_occurrences(logical, policy)
    weight_of = np.zeros(n)
    weight_of[idx] = weights
    assert (weight_of[tail] == 1.0).all()
    for red in read_reductions(canary["structure"]["records"]):
        reps = tail[red.start : red.stop].reshape(red.repeat, red.period).any(axis=1)
        for r in np.flatnonzero(reps):
            assert r in red.whole_reps
            occ = red.start + r * red.period + np.arange(red.period)
            assert (weight_of[occ] == 1.0).all()
    # executed occurrences keep their logical timing and members, except the gap of a
    # junction, which is the logical gap plus its junction delay (compile.junctions)
    executed = expand_canary(canary, executed=True)
    assert executed.n == len(idx)
    assert np.array_equal(executed.occurrences["logical_occ"].to_numpy(), idx)
    eo, lo = executed.occurrences, logical.occurrences.iloc[idx]
    for col in ("overlap_ns", "latency_ns", "op", "bytes", "tail"):
        assert np.array_equal(eo[col].to_numpy(), lo[col].to_numpy())
    delays = np.array(reference_junction_delays(logical, idx), dtype=np.int64)
    assert np.array_equal(eo["gap_ns"].to_numpy(), lo["gap_ns"].to_numpy() + delays)
    lm = logical.members.set_index("occ").loc[idx]
    assert np.array_equal(executed.members["skew_ns"].to_numpy(), lm["skew_ns"].to_numpy())
    assert math.isclose(float(eo["weight"].sum()), n, rel_tol=1e-12)
    # reduction never touches what the canary stands for
    if lossless:
        assert source_digest(logical) == source_digest(program)
    # the selection is what the recorded policy gives, byte for byte
    assert check_execution(canary) == []
    again = reduce_execution(canary, policy)
    assert canonical_json_bytes(again) == canonical_json_bytes(canary)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 5000),
    n=st.integers(1, 200),
    k=st.integers(1, 5),
    context=st.one_of(st.integers(0, 2), st.tuples(st.integers(0, 2), st.integers(0, 2))),
    lossless=st.booleans(),
    selection=st.sampled_from(STEADY_SELECTIONS),
)
def test_flat_programs_keep_every_execution_guarantee(seed, n, k, context, lossless, selection):
    program = random_program(seed, n, p_tail=0.05)
    canary = compile_program(program, budget=None if lossless else parse_budget(BUDGET))
    reduced = reduce_execution(
        canary,
        {
            "max_executed_repeats": k,
            "tail_context": context,
            "edge_context": context,
            "steady_selection": selection,
        },
    )
    _check_guarantees(program, reduced, lossless=lossless)


@st.composite
def nested_programs(draw):
    requests = draw(st.integers(1, 4))
    steps = draw(st.integers(2, 30))
    pairs = st.tuples(st.integers(0, requests - 1), st.integers(0, steps - 1))
    program = requests_program(
        requests,
        steps,
        layers=draw(st.integers(1, 4)),
        prefill=draw(st.integers(0, 3)),
        world_size=draw(st.sampled_from([2, 4])),
        seed=draw(st.integers(0, 1000)),
        tail_steps=tuple(draw(st.lists(pairs, max_size=4))),
        straggler_steps=tuple(draw(st.lists(pairs, max_size=2))),
    )
    return program


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    program=nested_programs(),
    k=st.integers(1, 6),
    tail_context=st.tuples(st.integers(0, 2), st.integers(0, 2)),
    edge_context=st.tuples(st.integers(0, 2), st.integers(0, 2)),
    lossless=st.booleans(),
    selection=st.sampled_from(STEADY_SELECTIONS),
)
def test_nested_programs_keep_every_execution_guarantee(
    program, k, tail_context, edge_context, lossless, selection
):
    canary = compile_program(program, budget=None if lossless else parse_budget("gap=2us"))
    reduced = reduce_execution(
        canary,
        {
            "max_executed_repeats": k,
            "tail_context": tail_context,
            "edge_context": edge_context,
            "steady_selection": selection,
        },
    )
    _check_guarantees(program, reduced, lossless=lossless)


def test_decode_steps_inside_requests_are_reduced_per_request():
    program = requests_program(3, 40, tail_steps=((0, 10), (2, 25)), straggler_steps=((1, 20),))
    canary = compile_program(program)
    request = canary["structure"]["records"][0]
    assert request["repeat"] == 3 and request["body"][1]["repeat"] == 40
    reduced = reduce_execution(canary, {"max_executed_repeats": 3})
    steps = reduced["structure"]["records"][0]["body"][1]
    assert steps["execute"] == steps["repeat"] == 40
    assert [r["instance"] for r in steps["reductions"]] == [0, 1, 2]
    # edges 0 and 39; the tail window and the one step after it, in its own request only
    assert [r["whole_reps"] for r in steps["reductions"]] == [
        [0, 10, 11, 39],
        [0, 20, 21, 39],
        [0, 25, 26, 39],
    ]
    for r in steps["reductions"]:
        assert r["execute"] == 3 + 4
        assert r["steady_weight"] == (40 - 4) / 3
    assert "reductions" not in request and "executed_reps" not in request
    stats = reduced["stats"]
    assert stats["occurrences_executed"] == 3 * (2 + 7 * 5)
    assert stats["execution_reduction"] < 0.2
    _check_guarantees(program, reduced, lossless=True)


def test_tail_window_executes_whole_in_every_outer_repetition_where_it_occurs():
    program = requests_program(4, 20, tail_steps=((1, 5), (3, 5), (3, 12)))
    reduced = reduce_execution(compile_program(program), {"max_executed_repeats": 1})
    executed = expand_canary(reduced, executed=True)
    logical = executed.occurrences["logical_occ"].to_numpy()
    weight = executed.occurrences["weight"].to_numpy()
    request_len, step_len = 2 + 20 * 5, 5
    for r, s in ((1, 5), (3, 5), (3, 12)):
        occ = r * request_len + 2 + s * step_len + np.arange(step_len)
        at = np.searchsorted(logical, occ)
        assert np.array_equal(logical[at], occ) and (weight[at] == 1.0).all()
    # request 0 and 2 have no tail window at step 5: that step is steady there
    steps = reduced["structure"]["records"][0]["body"][1]["reductions"]
    assert 5 not in steps[0]["whole_reps"] and 5 not in steps[2]["whole_reps"]


def test_decode_steps_execute_k_times_and_tail_windows_whole():
    program = decode_like_program(1000, layers=8, world_size=4, tail_every=250)
    canary = compile_program(
        program, budget=parse_budget("gap=5us,overlap=5us,latency=5us,skew=5us")
    )
    reduced = reduce_execution(canary, {"max_executed_repeats": 10})
    motif = reduced["structure"]["records"][1]
    assert motif["repeat"] == 1000
    tail_steps = [125, 375, 625, 875]
    windows = sorted({0, 999} | {s + d for s in tail_steps for d in (0, 1)})
    assert motif["whole_reps"] == windows
    assert set(windows) <= set(motif["executed_reps"])
    assert motif["execute"] == 10 + len(windows)
    assert motif["steady_weight"] == (1000 - len(windows)) / 10
    stats = reduced["stats"]
    assert stats["occurrences_logical"] == program.n
    assert stats["occurrences_executed"] == 3 + 9 * (10 + len(windows))
    assert stats["execution_reduction"] < 0.05
    executed = expand_canary(reduced, executed=True)
    logical = executed.occurrences["logical_occ"].to_numpy()
    for step in tail_steps:
        occ = 3 + step * 9 + np.arange(9)
        at = np.searchsorted(logical, occ)
        assert np.array_equal(logical[at], occ)
        assert (executed.occurrences["weight"].to_numpy()[at] == 1.0).all()
        assert executed.occurrences["tail"].to_numpy()[at].all()


def test_context_and_edges_follow_the_policy():
    program = decode_like_program(100, layers=3, world_size=2, tail_every=100)  # tail at 50
    canary = compile_program(program)
    wide = reduce_execution(
        canary, {"max_executed_repeats": 2, "tail_context": [2, 3], "edge_context": [3, 0]}
    )
    assert wide["structure"]["records"][1]["whole_reps"] == [0, 1, 2, 48, 49, 50, 51, 52, 53]
    bare = reduce_execution(
        canary, {"max_executed_repeats": 2, "tail_context": 0, "edge_context": 0}
    )
    assert bare["structure"]["records"][1]["whole_reps"] == [50]
    assert bare["execution"]["policy"]["tail_context"] == [0, 0]


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


def test_timing_outlier_rule_keeps_a_straggler_step_whole():
    program = requests_program(2, 30, straggler_steps=((1, 17),))
    canary = compile_program(program)
    reduced = reduce_execution(canary, {"max_executed_repeats": 2})
    steps = reduced["structure"]["records"][0]["body"][1]["reductions"]
    assert 17 in steps[1]["whole_reps"] and 18 in steps[1]["whole_reps"]
    assert 17 not in steps[0]["whole_reps"]
    assert reduced["execution"]["tail_occurrences"] == 1
    off = reduce_execution(canary, {"max_executed_repeats": 2, "timing_outlier_factor": None})
    assert 17 not in off["structure"]["records"][0]["body"][1]["reductions"][1]["whole_reps"]
    assert off["execution"]["tail_occurrences"] == 0


def test_per_record_policy_reaches_nested_records_and_replacing_a_reduction():
    program = requests_program(3, 30, layers=8)
    canary = compile_program(program)
    only_runs = reduce_execution(canary, {"records": {"0.1.0": 2}})
    layers = only_runs["structure"]["records"][0]["body"][1]["body"][0]
    assert len(layers["reductions"]) == 90  # every decode step of every request
    assert layers["reductions"][-1]["instance"] == 89
    assert all(r["execute"] == 4 for r in layers["reductions"])  # 2 steady + 2 edges
    _check_guarantees(program, only_runs, lossless=True)
    steps = reduce_execution(only_runs, {"records": {"0.1": 5}})
    assert "reductions" not in steps["structure"]["records"][0]["body"][1]["body"][0]
    assert len(steps["structure"]["records"][0]["body"][1]["reductions"]) == 3
    undone = reduce_execution(steps, {})
    assert undone["stats"]["occurrences_executed"] == program.n
    assert canonical_json_bytes(undone["structure"]) == canonical_json_bytes(canary["structure"])


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
        {"tail_context": [1, 2, 3]},
        {"edge_context": "1"},
        {"bogus": 1},
        {"tail_latency_factor": 0.5},
        {"timing_outlier_factor": 1},
        {"records": {"01": 2}},
        {"records": {"0.x": 2}},
        {"records": {"7.3": 2}},
        {"steady_selection": "bogus"},
        {"tail_ids": [3, 3]},
        {"tail_ids": [5, 2]},
        {"tail_ids": [-1]},
        {"tail_ids": [True]},
        {"tail_ids": "7"},
        {"tail_ids": [10**6]},
        {"steady_fraction": 0},
        {"steady_fraction": 1.5},
        {"steady_fraction": True},
        {"steady_fraction": "0.5"},
        {"steady_fraction": 0.5, "max_executed_repeats": 2},
    ],
)
def test_bad_policies_are_refused(policy):
    canary = compile_program(requests_program(2, 10))
    with pytest.raises(InputError):
        reduce_execution(canary, policy)


def _reduced_nested():
    program = requests_program(3, 20, tail_steps=((1, 8),))
    return program, reduce_execution(compile_program(program), {"max_executed_repeats": 2})


def _steps(canary):
    return canary["structure"]["records"][0]["body"][1]


def test_reading_refuses_a_reduction_that_drops_a_tail_window():
    _, canary = _reduced_nested()
    entry = _steps(canary)["reductions"][1]
    free = next(r for r in range(20) if r not in entry["executed_reps"])
    entry["executed_reps"] = sorted(set(entry["executed_reps"]) - {8} | {free})
    entry["whole_reps"] = sorted(set(entry["whole_reps"]) - {8} | {free})
    with pytest.raises(InputError, match="tail-flagged"):
        expand_canary(canary, executed=True)


@pytest.mark.parametrize(
    "tamper, message",
    [
        (lambda c: _steps(c)["reductions"][0].update(instance=3), "instance"),
        (lambda c: _steps(c)["reductions"].reverse(), "instance"),
        (lambda c: _steps(c)["reductions"][0].update(steady_weight=1.0), "steady_weight"),
        (lambda c: _steps(c)["reductions"][0].update(execute=1), "execute"),
        (lambda c: _steps(c).update(execute=5), "execute = repeat"),
        (lambda c: _steps(c).update(steady_weight=2.0), "reductions"),
        (
            lambda c: c["structure"]["records"][0].update(reductions=[]),
            "inline",
        ),
        (
            lambda c: c["structure"]["records"][0].update(
                execute=2, executed_reps=[0, 1], whole_reps=[0], steady_weight=2.0
            ),
            "inside a reduced instance",
        ),
    ],
)
def test_reading_refuses_reductions_that_do_not_add_up(tamper, message):
    _, canary = _reduced_nested()
    tamper(canary)
    with pytest.raises(InputError, match=message):
        expand_canary(canary, executed=True)


def test_verify_commitments_recomputes_the_selection_from_the_policy():
    program, canary = _reduced_nested()
    assert verify_commitments(program, canary) == []
    entry = _steps(canary)["reductions"][0]
    steady = [r for r in entry["executed_reps"] if r not in entry["whole_reps"]]
    moved = next(r for r in range(20) if r not in entry["executed_reps"])
    entry["executed_reps"] = sorted(set(entry["executed_reps"]) - {steady[0]} | {moved})
    expand_canary(canary, executed=True)  # still adds up ...
    found = verify_commitments(program, canary)  # ... but is not what the policy selects
    assert [m["segment"] for m in found] == ["execution"]
    canary["execution"]["policy"] = None
    assert "policy is null" in verify_commitments(program, canary)[0]["found"]


def test_the_shipped_decode_capture_set_executes_under_ten_percent(decode_capture_program):
    """The merged shipped decode captures nest the decode-step motif inside 4 requests;
    each request's decode steps are reduced, tail windows, stragglers and the steps
    after them run whole."""
    program = decode_capture_program
    canary = compile_program(program)
    assert canary["structure"]["records"][0]["repeat"] == 4
    reduced = reduce_execution(canary, {"max_executed_repeats": 1})
    assert reduced["stats"]["execution_reduction"] <= 0.10
    assert reduced["stats"]["byte_compression"] >= 20
    assert len(_steps(reduced)["reductions"]) == 4
    _check_guarantees(program, reduced, lossless=True)


def test_reduced_decode_canary_matches_the_source_on_every_distribution_and_ranking(
    decode_capture_program,
):
    """The weighted replay of the reduced decode canary (k = 1 per request) stays within
    the default tolerances on every latency and queue-wait quantile, hidden share and
    per-phase / per-op breakdown under all five configurations, and keeps all 40
    ranking decisions. (Whether it earns ``verified`` also depends on the tail-event
    recall, which is the verifier's to define for weighted replays.)"""
    from tracecanary.sim.backends import load_backends
    from tracecanary.verify.behavior import load_tolerances, verify_behavior

    program = decode_capture_program
    reduced = reduce_execution(compile_program(program), {"max_executed_repeats": 1})
    assert reduced["stats"]["execution_reduction"] <= 0.10
    doc = verify_behavior(
        program,
        reduced,
        load_backends(REPO / "config" / "backends.yaml"),
        load_tolerances(None),
        source_digest="0" * 64,
        canary_digest="0" * 64,
    )
    assert doc["statuses"]["commitments"] == "verified"
    assert doc["statuses"]["ranking"] == "preserved"
    assert doc["ranking"]["decisions_checked"] == 40
    others = [c for c in doc["checks"] if c["metric"] != "tail_event_recall"]
    assert len(others) > 100
    assert [c for c in others if not c["pass"]] == []


@pytest.fixture(scope="module")
def decode_capture_program(tmp_path_factory):
    from tracecanary.cli import main
    from tracecanary.load import load_program

    captures = sorted((REPO / "resources" / "decode").glob("rank*.jsonl.gz"))
    if not captures:
        pytest.skip("resources/decode capture set not present")
    merged = tmp_path_factory.mktemp("decode") / "merged.jsonl.gz"
    calibration = REPO / "resources" / "decode" / "calibration.json"
    argv = ["merge", *map(str, captures), "--calibration", str(calibration), "-o", str(merged)]
    assert main(argv) == 0
    return load_program(merged, executed=False)


def test_named_tail_occurrences_run_whole_with_their_rules_off():
    program = requests_program(2, 30)
    canary = compile_program(program)
    rules_off = {
        "max_executed_repeats": 2,
        "tail_latency_factor": None,
        "timing_outlier_factor": None,
    }
    plain = reduce_execution(canary, rules_off)
    idx, _ = executed_selection(plain)
    named = sorted({int(i) for i in np.setdiff1d(np.arange(program.n), idx)[[0, 7, 40]]})
    reduced = reduce_execution(canary, {**rules_off, "tail_ids": named})
    assert reduced["execution"]["policy"]["tail_ids"] == named
    assert reduced["execution"]["tail_occurrences"] == len(named)
    idx, weights = executed_selection(reduced)
    weight_of = dict(zip(idx.tolist(), weights.tolist(), strict=True))
    assert all(weight_of.get(i) == 1.0 for i in named)
    _check_guarantees(program, reduced, lossless=True)


def test_an_empty_tail_list_is_not_written_so_the_default_bytes_stand():
    canary = compile_program(requests_program(2, 30))
    policy = {"max_executed_repeats": 2}
    assert canonical_json_bytes(reduce_execution(canary, {**policy, "tail_ids": []})) == (
        canonical_json_bytes(reduce_execution(canary, policy))
    )


def test_verify_commitments_refuses_named_tails_the_reduction_does_not_follow():
    program = requests_program(2, 30)
    canary = compile_program(program)
    rules_off = {
        "max_executed_repeats": 2,
        "tail_latency_factor": None,
        "timing_outlier_factor": None,
    }
    plain = reduce_execution(canary, rules_off)
    idx, _ = executed_selection(plain)
    skipped = int(np.setdiff1d(np.arange(program.n), idx)[10])
    reduced = reduce_execution(canary, {**rules_off, "tail_ids": [skipped]})
    assert verify_commitments(program, reduced) == []
    reduced["execution"]["policy"]["tail_ids"] = [int(np.setdiff1d(np.arange(program.n), idx)[30])]
    assert [m["segment"] for m in verify_commitments(program, reduced)] == ["execution"]


@pytest.mark.parametrize("fraction", [1 / 64, 0.1, 0.25, 0.5, 1.0])
def test_steady_fraction_runs_that_share_of_every_instance_and_keeps_every_guarantee(fraction):
    program = requests_program(3, 40, layers=4, straggler_steps=((1, 9),))
    reduced = reduce_execution(compile_program(program), {"steady_fraction": fraction})
    _check_guarantees(program, reduced, lossless=True)
    for red in read_reductions(reduced["structure"]["records"]):
        steady = red.repeat - len(red.whole_reps)
        assert len(red.executed_reps) - len(red.whole_reps) == max(1, math.ceil(fraction * steady))
    if fraction == 1.0:
        assert reduced["stats"]["occurrences_executed"] == program.n


def test_steady_fraction_samples_motifs_of_different_lengths_in_proportion():
    # two step motifs, 120 and 30 steps long (the second one's op is wider): one k for
    # each would run as many steps of the short one as of the long one
    long_part = requests_program(1, 120, layers=4, world_size=2, seed=1)
    short_part = requests_program(1, 30, layers=5, world_size=2, seed=2)
    occ = pd.concat([long_part.occurrences, short_part.occurrences], ignore_index=True)
    occ["occ"] = np.arange(len(occ))
    mem = short_part.members.copy()
    mem["occ"] += long_part.n
    members = pd.concat([long_part.members, mem], ignore_index=True)
    program = type(long_part)(occ, members, 2, True)
    canary = compile_program(program)
    reduced = reduce_execution(canary, {"steady_fraction": 0.125})
    runs = sorted(
        (red.repeat - len(red.whole_reps), len(red.executed_reps) - len(red.whole_reps))
        for red in read_reductions(reduced["structure"]["records"])
    )
    assert len(runs) == 2 and all(k == max(1, math.ceil(0.125 * m)) for m, k in runs)
    assert runs[0][1] < runs[1][1]  # the short motif runs fewer steps than the long one
    _check_guarantees(program, reduced, lossless=True)
