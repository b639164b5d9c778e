"""verify_behavior never builds the canary's logical expansion as a program: the
commitments read the decoded arrays, and the replay takes its member skews from them
(``sim.engine.grouped_skews`` / ``selected_skews``). These pin that the pieces give what
the expanded programs give, refusals included."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest

from tracecanary.compile.budget import parse_budget
from tracecanary.compile.canary import compile_program
from tracecanary.compile.expand import (
    check_member_ranks,
    decode_canary,
    executed_program,
    expand_canary,
    logical_occurrences,
)
from tracecanary.errors import InputError
from tracecanary.sim.engine import grouped_skews, member_skews, selected_skews
from tracecanary.synth.examples import decode_like_program

POLICIES = [None, {"max_executed_repeats": 1}]


def _canary(policy):
    source = decode_like_program(40)
    assert source.skew_known
    return compile_program(source, budget=parse_budget("gap=2us"), execution_policy=policy)


def _from_decoded(canary, skew=None):
    d = decode_canary(canary, ranks=False)
    grouped = grouped_skews(d.member_offsets, d.values["skew"] if skew is None else skew)
    executed = executed_program(
        canary, logical_occurrences(canary, d), np.maximum(grouped.max_skew, 0)
    )
    return executed, grouped


@pytest.mark.parametrize("policy", POLICIES)
def test_executed_program_and_skews_from_decoded_arrays_equal_the_expanded_ones(policy):
    canary = _canary(policy)
    expanded = expand_canary(canary, executed=True)
    executed, grouped = _from_decoded(canary)
    pd.testing.assert_frame_equal(executed.occurrences, expanded.occurrences)
    assert len(executed.members) == 0
    ids = executed.occurrences["logical_occ"].to_numpy(np.int64)
    for got, want in zip(selected_skews(grouped, ids), member_skews(expanded), strict=True):
        np.testing.assert_array_equal(got, want)
    if policy is not None:  # a reduced execution: junctions, and skews of a selection
        assert executed.n < int(canary["structure"]["occurrences"])


@pytest.mark.parametrize("executed_member", [True, False])
def test_a_negative_member_skew_is_refused_with_the_executed_member_numbering(executed_member):
    canary = _canary(POLICIES[1])
    logical = expand_canary(canary)
    idx = executed_program(canary, logical).occurrences["logical_occ"].to_numpy(np.int64)
    skipped = np.setdiff1d(np.arange(logical.n), idx)
    assert skipped.size
    occ = int(idx[-1]) if executed_member else int(skipped[-1])
    members = logical.members["occ"].to_numpy()
    member = int(np.flatnonzero(members == occ)[-1])
    skew = logical.members["skew_ns"].to_numpy(np.int64).copy()
    skew[member] = -5
    logical.members["skew_ns"] = skew
    executed, grouped = _from_decoded(canary, skew)
    if not executed_member:  # a skipped occurrence's members are not replayed: no refusal
        selected = selected_skews(grouped, idx)
        np.testing.assert_array_equal(
            selected[0], member_skews(executed_program(canary, logical))[0]
        )
        return
    with pytest.raises(InputError) as old:
        member_skews(executed_program(canary, logical))
    with pytest.raises(InputError) as new:
        selected_skews(grouped, idx)
    assert str(new.value) == str(old.value) and "negative arrival skew" in str(old.value)


def test_a_rank_a_program_cannot_hold_is_refused_as_the_expansion_refuses_it():
    canary = copy.deepcopy(_canary(None))
    name = sorted(canary["groups"])[0]
    canary["groups"][name][0] = 2**31
    with pytest.raises(InputError) as old:
        expand_canary(canary)
    with pytest.raises(InputError) as new:
        check_member_ranks(decode_canary(canary, ranks=False))
    assert str(new.value) == str(old.value)


def test_a_replay_without_tail_events_has_every_other_metric_of_the_full_one():
    from tracecanary.sim.backends import load_backends
    from tracecanary.verify.behavior import prepare_replay, replay_prepared

    program = decode_like_program(40)
    backends = load_backends(None)
    full = replay_prepared(*prepare_replay(program), backends)
    lean = replay_prepared(*prepare_replay(program), backends, tail_events=False)
    assert set(lean.metrics) == set(full.metrics)
    for config, block in full.metrics.items():
        assert block["tail_events"]
        assert lean.metrics[config] == {k: v for k, v in block.items() if k != "tail_events"}


def test_verify_behavior_cli_refuses_a_canary_rank_past_int32_with_exit_2_and_no_output(
    tmp_path, run_cli, monkeypatch
):
    """A canary whose world reaches past 2**31 ranks: refused by max_ranks even at the
    highest value the limit may be raised to (a higher one is refused where it is set),
    exit 2, nothing written."""
    from conftest import small_trace, write_doc

    from tracecanary.canonical import write_json
    from tracecanary.compile.document import load_canary

    trace = write_doc(small_trace(), tmp_path / "trace.json")
    assert run_cli("compile", "--lossless", "-o", str(tmp_path / "canary.json"), str(trace))[0] == 0
    canary = load_canary(tmp_path / "canary.json")
    canary["groups"][sorted(canary["groups"])[0]][-1] = 2**31
    canary["source"]["world_size"] = 2**31 + 1
    write_json(tmp_path / "bad.json", canary)
    out = tmp_path / "verification.json"
    argv = ("verify-behavior", "-o", str(out), str(trace), str(tmp_path / "bad.json"))
    monkeypatch.setenv("TRACECANARY_LIMITS", "max_ranks=3e9")
    code, _, err = run_cli(*argv)
    assert code == 2 and "field TRACECANARY_LIMITS" in err and "at most 2147483648" in err
    monkeypatch.setenv("TRACECANARY_LIMITS", f"max_ranks={2**31}")
    code, _, err = run_cli(*argv)
    assert code == 2 and "2147483649" in err and "max_ranks=2147483648" in err
    assert not out.exists()


def test_a_member_rank_past_int32_in_a_decoded_canary_is_refused_naming_groups():
    """The expansion's own guard (unreachable through the CLI since max_ranks is capped
    at 2**31): a value its int32 column cannot hold is refused, never wrapped."""
    from tracecanary.compile.expand import _member_array

    with pytest.raises(InputError) as caught:
        _member_array("rank", np.array([0, 2**31]), "int32")
    assert caught.value.field == "groups"
    assert "member rank 2147483648 does not fit a program (int32)" in caught.value.one_line()
    assert _member_array("rank", np.array([0, 2**31 - 1]), "int32").dtype == np.int32
