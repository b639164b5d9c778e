"""Which k steady repetitions a reduced instance executes (``steady_selection`` of the
execution policy, ``tracecanary.compile.execution``): ``time`` (the default, never
written) picks k evenly spaced in repetition order, ``skew_quantile`` the k at evenly
spaced quantiles of the repetitions' summed arrival skew; both keep the weights summing
to ``repeat``, canaries from before the key re-check as ``time``, unknown values are
refused naming the field, and the behavior search tries the skew-quantile selection
where the time one is rejected, logging which one each candidate used."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import REPO, small_trace

from tracecanary.canonical import canonical_json_bytes
from tracecanary.compile import compile_program, executed_selection, reduce_execution
from tracecanary.compile.document import validate_canary
from tracecanary.compile.execution import check_execution, select_steady
from tracecanary.compile.reductions import read_reductions
from tracecanary.compile.selection import STEADY_SELECTIONS
from tracecanary.errors import InputError
from tracecanary.formats.schemas import load_schema, validate
from tracecanary.program import make_program
from tracecanary.sim.backends import load_backends
from tracecanary.synth.examples import requests_program
from tracecanary.trace_io import write_trace
from tracecanary.verify.behavior import load_tolerances
from tracecanary.verify.commitments import verify_commitments
from tracecanary.verify.search import search, search_log_document

OLD_CANARY = REPO / "tests" / "data" / "reduced-canary-before-steady-selection.json"
"""Written by the tree before ``steady_selection`` existed (commit 4d1ca24):
``reduce_execution(compile_program(requests_program(2, 12, layers=2,
tail_steps=((1, 4),))), {"max_executed_repeats": 2})``."""
WORLD = 4


def _stepped_program(step_skew_ns: list[int], gap_ns: int = 20_000):
    """One step per entry of ``step_skew_ns``: an all_reduce whose slowest member arrives
    ``skew`` late, then an all_gather with 1/4 of that skew; a step's summed largest
    member skew is therefore 1.25 x its entry."""
    n = 2 * len(step_skew_ns)
    occurrences = {
        "op": ["all_reduce", "all_gather"] * len(step_skew_ns),
        "bytes": [1 << 16, 1 << 12] * len(step_skew_ns),
        "dtype": ["float32"] * n,
        "group": ["0"] * n,
        "group_size": [WORLD] * n,
        "gap_ns": [gap_ns] * n,
    }
    members = {"occ": [], "rank": [], "skew_ns": []}
    for step, skew in enumerate(step_skew_ns):
        for offset, share in ((0, skew), (1, skew // 4)):
            for rank in range(WORLD):
                members["occ"].append(2 * step + offset)
                members["rank"].append(rank)
                members["skew_ns"].append(share if rank == WORLD - 1 else 0)
    return make_program(occurrences, members, world_size=WORLD, skew_known=True)


def _steps_record(canary: dict) -> dict:
    (record,) = [r for r in canary["structure"]["records"] if r["repeat"] > 1]
    return record


def test_skew_quantile_picks_the_quantile_repetitions_and_weights_sum_to_repeat():
    # 10 steps: 0 and 9 run whole (edges); steady 1..8 have skew falling with time, so
    # in skew order they are 8, 7, ..., 1; k = 2 takes positions 2 and 6 of that order
    skews = [1_500] + [1_000 + (10 - r) * 100 for r in range(1, 9)] + [1_500]
    program = _stepped_program(skews)
    canary = compile_program(program)
    by_time = reduce_execution(canary, {"max_executed_repeats": 2})
    by_skew = reduce_execution(
        canary, {"max_executed_repeats": 2, "steady_selection": "skew_quantile"}
    )
    assert _steps_record(by_time)["executed_reps"] == [0, 3, 7, 9]
    steps = _steps_record(by_skew)
    assert steps["repeat"] == 10
    assert steps["executed_reps"] == [0, 2, 6, 9]
    assert steps["whole_reps"] == [0, 9]
    assert steps["steady_weight"] == 4.0
    assert by_skew["execution"]["policy"]["steady_selection"] == "skew_quantile"
    for red in read_reductions(by_skew["structure"]["records"]):
        steady = len(red.executed_reps) - len(red.whole_reps)
        assert len(red.whole_reps) + steady * red.steady_weight == red.repeat
    idx, weights = executed_selection(by_skew)
    assert math.isclose(float(weights.sum()), program.n, rel_tol=1e-12)
    assert (
        by_skew["stats"]["occurrences_executed"]
        == by_time["stats"]["occurrences_executed"]
        == len(idx)
    )
    validate_canary(by_skew)
    assert check_execution(by_skew) == []
    assert verify_commitments(program, by_skew) == []


def test_skew_quantile_breaks_ties_by_repetition_index():
    steady = np.array([2, 3, 5, 6, 7, 11], dtype=np.int64)
    flat = np.zeros(len(steady), dtype=np.int64)
    assert select_steady(steady, 3, flat).tolist() == select_steady(steady, 3, None).tolist()
    # two skew levels: the lows (3, 6, 11) come first, each level in repetition order
    skew = np.array([9, 1, 9, 1, 9, 1], dtype=np.int64)
    assert select_steady(steady, 2, skew).tolist() == [5, 6]  # positions 1 and 4: 6 and 5
    assert select_steady(steady, 2, skew).tolist() != select_steady(steady, 2, None).tolist()


def test_equal_skews_select_exactly_the_time_repetitions():
    program = _stepped_program([2_000] * 30)
    canary = compile_program(program)
    by_time = reduce_execution(canary, {"max_executed_repeats": 5})
    by_skew = reduce_execution(
        canary, {"max_executed_repeats": 5, "steady_selection": "skew_quantile"}
    )
    assert _steps_record(by_skew)["executed_reps"] == _steps_record(by_time)["executed_reps"]


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_skew_quantile_keeps_every_guarantee_on_nested_programs(k):
    program = requests_program(3, 25, layers=3, tail_steps=((0, 7),), straggler_steps=((2, 11),))
    reduced = reduce_execution(
        compile_program(program), {"max_executed_repeats": k, "steady_selection": "skew_quantile"}
    )
    idx, weights = executed_selection(reduced)
    assert math.isclose(float(weights.sum()), program.n, rel_tol=1e-12)
    for red in read_reductions(reduced["structure"]["records"]):
        steady = len(red.executed_reps) - len(red.whole_reps)
        assert steady == k
        assert math.isclose(len(red.whole_reps) + k * red.steady_weight, red.repeat)
    assert check_execution(reduced) == []
    assert verify_commitments(program, reduced) == []
    again = reduce_execution(reduced, reduced["execution"]["policy"])
    assert canonical_json_bytes(again) == canonical_json_bytes(reduced)


@pytest.mark.parametrize("value", ["bogus", "", None, 1, ["time"], "TIME"])
def test_an_unknown_steady_selection_is_refused_naming_the_field(value):
    canary = compile_program(requests_program(2, 10))
    with pytest.raises(InputError) as err:
        reduce_execution(canary, {"max_executed_repeats": 2, "steady_selection": value})
    assert err.value.field == "execution_policy.steady_selection"
    assert "steady_selection" in err.value.one_line() and repr(value) in err.value.one_line()


def test_a_recorded_unknown_selection_is_refused_by_the_schema_and_by_the_recheck():
    canary = reduce_execution(
        compile_program(requests_program(2, 10)),
        {"max_executed_repeats": 2, "steady_selection": "skew_quantile"},
    )
    canary["execution"]["policy"]["steady_selection"] = "random"
    with pytest.raises(InputError):
        validate_canary(canary)
    with pytest.raises(InputError, match="steady_selection"):
        check_execution(canary)


def test_the_schema_lists_every_selection_but_the_unwritten_default():
    schema = load_schema("canary")
    policy = schema["properties"]["execution"]["properties"]["policy"]["oneOf"][1]
    assert policy["properties"]["steady_selection"]["enum"] == list(STEADY_SELECTIONS[1:])
    assert "steady_selection" not in policy["required"]


def test_the_default_selection_writes_the_same_bytes_as_before_the_key_existed():
    program = requests_program(2, 12, layers=2, tail_steps=((1, 4),))
    old = OLD_CANARY.read_bytes()
    new = reduce_execution(compile_program(program), {"max_executed_repeats": 2})
    explicit = reduce_execution(
        compile_program(program), {"max_executed_repeats": 2, "steady_selection": "time"}
    )
    assert canonical_json_bytes(new) == canonical_json_bytes(explicit) == old
    assert "steady_selection" not in new["execution"]["policy"]


def test_a_canary_from_before_the_key_loads_and_rechecks_as_time():
    program = requests_program(2, 12, layers=2, tail_steps=((1, 4),))
    canary = json.loads(OLD_CANARY.read_text())
    assert "steady_selection" not in canary["execution"]["policy"]
    validate_canary(canary)
    assert check_execution(canary) == []
    assert verify_commitments(program, canary) == []
    skew = dict(canary["execution"]["policy"], steady_selection="skew_quantile")
    canary["execution"]["policy"] = skew  # claims a selection it did not make
    assert "structure: the reductions differ" in " ".join(check_execution(canary))


def test_compile_option_records_the_selection_and_refuses_it_without_k(tmp_path, run_cli, capsys):
    trace = tmp_path / "trace.json"
    write_trace(small_trace(12), trace)
    out = tmp_path / "c.json"
    code, _, err = run_cli(
        "compile", trace, "--lossless", "--steady-selection", "skew_quantile", "-o", out
    )
    assert code == 2 and "steady_selection" in err and not out.exists()
    assert len(err.strip().splitlines()) == 1
    code, _, err = run_cli(
        "compile", trace, "--lossless", "--max-executed-repeats", "2",
        "--steady-selection", "skew_quantile", "-o", out,
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert doc["execution"]["policy"]["steady_selection"] == "skew_quantile"
    bad = tmp_path / "bad.json"
    with pytest.raises(SystemExit) as refused:  # argparse's usage error
        run_cli(
            "compile", trace, "--lossless", "--max-executed-repeats", "2",
            "--steady-selection", "quantile", "-o", bad,
        )  # fmt: skip
    err = capsys.readouterr().err
    assert refused.value.code == 2 and not bad.exists()
    assert "--steady-selection: invalid choice: 'quantile'" in err


def _alternating_skew_program(steps: int = 66):
    """Odd steps arrive with a large skew, even steps with a small one: k evenly spaced
    steady steps at an even stride see only one kind, skew quantiles see both."""
    return _stepped_program([60_000 if s % 2 else 4_000 for s in range(steps)])


def test_search_tries_skew_quantiles_where_the_time_selection_is_rejected():
    program = _alternating_skew_program()
    result = search(
        program,
        [0],
        load_backends(REPO / "config" / "backends.yaml"),
        load_tolerances(None),
        source_digest="0" * 64,
        progress=lambda line: None,
    )
    # the ladder with the model-free tail rules (the named-tails one follows it)
    execution = [
        e for e in result.log if e["stage"] == "execution" and "tail_rules" not in e["settings"]
    ]
    by_key = {
        (e["settings"]["max_executed_repeats"], e["settings"].get("steady_selection", "time")): e
        for e in execution
    }
    chosen = next(
        e for e in execution if e.get("claim") == "verified" and e["reason"] != "not smaller"
    )
    assert chosen["stage"] == "execution", [(e["settings"], e["reason"]) for e in execution]
    assert chosen["settings"]["steady_selection"] == "skew_quantile"
    k = chosen["settings"]["max_executed_repeats"]
    assert by_key[(k, "time")]["claim"] != "verified"  # rejected at the same k ...
    assert by_key[(k, "time")]["occurrences_executed"] == chosen["occurrences_executed"]
    assert result.verification["claim"] == "verified"
    doc = search_log_document(result, source_digest="0" * 64, budgets_ns=[0])
    validate(doc, "search-log", file="search-log")
    only_time = search(
        program,
        [0],
        load_backends(REPO / "config" / "backends.yaml"),
        load_tolerances(None),
        source_digest="0" * 64,
        progress=lambda line: None,
        steady_selections=("time",),
    )
    assert all("steady_selection" not in e["settings"] for e in only_time.log)
    best = next(
        e
        for e in only_time.log
        if e["stage"] == "execution"
        and "tail_rules" not in e["settings"]
        and e.get("claim") == "verified"
    )
    assert best["occurrences_executed"] > chosen["occurrences_executed"]


def test_search_does_not_re_verify_a_skew_selection_equal_to_the_rejected_time_one():
    from test_search_diagnostics import _jittery_program  # no member skew: all skews 0

    result = search(
        _jittery_program(),
        [0],
        load_backends(REPO / "config" / "backends.yaml"),
        load_tolerances(None),
        source_digest="0" * 64,
        progress=lambda line: None,
    )
    execution = [
        e for e in result.log if e["stage"] == "execution" and "tail_rules" not in e["settings"]
    ]
    rejected_time = [
        e
        for e in execution
        if "steady_selection" not in e["settings"] and e.get("claim") not in (None, "verified")
    ]
    skipped = [e for e in execution if "steady_selection" in e["settings"]]
    assert rejected_time and len(skipped) == len(rejected_time)
    for entry in skipped:
        assert entry["reason"].startswith("not evaluated: the same repetitions")
        assert "claim" not in entry and not entry["accepted"]
    validate(
        search_log_document(result, source_digest="0" * 64, budgets_ns=[0]),
        "search-log",
        file="search-log",
    )
