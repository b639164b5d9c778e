"""Bounded mode: every timing value within its field budget (signature overrides
applied), every interval's stated error the error actually incurred, receipts that
recompute, and fail-closed refusal when a field cannot fit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracecanary.compile import (
    compile_program,
    expand_canary,
    parse_budget,
    segment_commitment,
)
from tracecanary.compile.budget import Budget, parse_duration_ns
from tracecanary.compile.document import validate_canary
from tracecanary.errors import ClaimFailed, InputError
from tracecanary.synth.examples import decode_like_program, random_program
from tracecanary.verify.commitments import verify_commitments

FIELD_COLUMNS = {
    "gap": ("gap_ns", None),
    "overlap": ("overlap_ns", "has_overlap"),
    "latency": ("latency_ns", "has_latency"),
}
budgets = st.sampled_from([0, 1, 4, 30, 200, 5000])


@st.composite
def programs_and_budgets(draw):
    program = random_program(
        draw(st.integers(0, 10_000)),
        draw(st.integers(1, 200)),
        world_size=draw(st.integers(1, 5)),
        skew_known=draw(st.booleans()),
        p_overlap=draw(st.sampled_from([0.0, 0.7, 1.0])),
        p_latency=draw(st.sampled_from([0.0, 0.7, 1.0])),
        jitter_ns=draw(st.sampled_from([2, 40, 400])),
        value_choices=draw(st.integers(1, 4)),
    )
    fields = {f: draw(budgets) for f in ("gap", "overlap", "latency", "skew")}
    n_sigs = int(program.signature_ids()[0].max()) + 1
    overrides = {}
    if draw(st.booleans()):
        sig = draw(st.integers(0, n_sigs - 1))
        overrides[sig] = {draw(st.sampled_from(list(fields))): draw(budgets)}
    return program, Budget(fields, overrides)


def _budget_per_occurrence(program, budget: Budget, name: str) -> np.ndarray:
    sig, _ = program.signature_ids()
    return budget.per_signature(name, int(sig.max()) + 1)[sig]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs_and_budgets(), st.booleans())
def test_bounded_errors_hold_field_by_field_for_every_occurrence(case, intervals_always):
    program, budget = case
    canary = compile_program(program, budget=budget, intervals_always=intervals_always)
    if intervals_always:
        for name in ("gap", "overlap", "latency", "skew"):
            stream = canary["timing"][name]
            if stream is not None and budget.per_signature(name, len(canary["signatures"])).any():
                assert stream["encoding"] == "bounded_intervals"
    validate_canary(canary)
    assert canary["timing_mode"] == "bounded_approximate"
    out = expand_canary(canary)
    so, eo = program.occurrences, out.occurrences
    for col in (
        "op",
        "bytes",
        "dtype",
        "group",
        "root",
        "phase",
        "stream",
        "tail",
        "has_overlap",
        "has_latency",
    ):
        assert np.array_equal(so[col].to_numpy(), eo[col].to_numpy()), col
    for name, (col, mask_col) in FIELD_COLUMNS.items():
        b = _budget_per_occurrence(program, budget, name)
        err = np.abs(so[col].to_numpy() - eo[col].to_numpy())
        if mask_col is not None:
            measured = so[mask_col].to_numpy()
            err = err[measured]
            b = b[measured]
            assert (eo[col].to_numpy()[~measured] == 0).all()  # no invented values
        assert (err <= b).all(), name
    if program.skew_known:
        b = _budget_per_occurrence(program, budget, "skew")[program.members["occ"].to_numpy()]
        err = np.abs(program.members["skew_ns"].to_numpy() - out.members["skew_ns"].to_numpy())
        assert (err <= b).all()
    else:
        assert canary["timing"]["skew"] is None
        assert canary["claim"] == "behaviorally_unverified"
    for stream in canary["timing"].values():
        if stream and stream["encoding"] == "bounded_intervals":
            for itv in stream["intervals"]:
                assert itv["commitment"] == segment_commitment(program, itv["start"], itv["stop"])
    # stated max errors equal the errors the source really has, all within budget
    assert verify_commitments(program, canary) == []


def test_intervals_follow_the_decode_step_and_stay_within_budget():
    program = decode_like_program(400, layers=8, world_size=4, jitter_ns=1_000)
    canary = compile_program(
        program, budget=parse_budget("skew=2us,overlap=5us,gap=5us,latency=5us")
    )
    gap = canary["timing"]["gap"]
    assert gap["encoding"] == "bounded_intervals"
    periodic = [i for i in gap["intervals"] if i["period"] == 9]
    assert periodic and sum(i["stop"] - i["start"] for i in periodic) == 400 * 9
    assert gap["max_error_ns"] <= 5_000
    assert all(e is None or e <= 5_000 for i in gap["intervals"] for e in i["max_error_ns"])
    assert canary["stats"]["byte_compression"] > 20
    assert canary["stats"]["compressed"] is True


def tight_sig_is_decode_all_reduce(canary) -> bool:
    sig = canary["signatures"][3]
    return sig["op"] == "all_reduce" and sig["phase"] == "decode"


def test_signature_override_tightens_one_group_only():
    program = decode_like_program(200, layers=4, world_size=2, jitter_ns=3_000)
    loose = compile_program(
        program, budget=parse_budget("gap=10us,overlap=10us,latency=10us,skew=10us")
    )
    # signature ids, first seen: 0-2 the prefill warm-up, 3 the decode all_reduce, 4 all_gather
    assert tight_sig_is_decode_all_reduce(loose)
    tight = compile_program(
        program,
        budget=parse_budget("gap=10us,overlap=10us,latency=10us,skew=10us", {"3": {"gap": "0ns"}}),
    )
    assert tight["budget"]["overrides"] == {"3": {"gap_ns": 0}}
    out = expand_canary(tight)
    sig, _ = program.signature_ids()
    exact = sig == 3
    assert exact.sum() == 800
    assert np.array_equal(
        out.occurrences["gap_ns"].to_numpy()[exact], program.occurrences["gap_ns"].to_numpy()[exact]
    )
    assert verify_commitments(program, tight) == []
    other = ~exact
    loose_err = np.abs(
        expand_canary(loose).occurrences["gap_ns"].to_numpy()
        - program.occurrences["gap_ns"].to_numpy()
    )
    assert loose_err[exact].max() > 0  # the override really changed something
    assert (
        np.abs(out.occurrences["gap_ns"].to_numpy() - program.occurrences["gap_ns"].to_numpy())[
            other
        ]
        <= 10_000
    ).all()
    assert tight["stats"]["bytes_canary"] > loose["stats"]["bytes_canary"]


def test_budget_too_tight_for_the_record_limit_fails_closed_naming_field_and_range():
    program = decode_like_program(100, layers=4, world_size=2, jitter_ns=5_000)
    budget = parse_budget("gap=1us,overlap=1ms,latency=1ms,skew=1ms")
    with pytest.raises(ClaimFailed) as err:
        compile_program(program, budget=budget, max_records=20)
    assert err.value.field == "gap"
    assert err.value.exit_code == 1
    assert str(err.value.record).startswith("[") and str(err.value.record).endswith(
        f", {program.n})"
    )
    # a looser gap budget fits the same limit
    ok = compile_program(
        program, budget=parse_budget("gap=20us,overlap=1ms,latency=1ms,skew=1ms"), max_records=20
    )
    assert ok["timing"]["gap"]["encoding"] == "bounded_intervals"


def test_exact_encoding_is_kept_where_it_is_smaller_than_intervals():
    program = decode_like_program(100, layers=4, world_size=2, jitter_ns=0)
    canary = compile_program(
        program, budget=parse_budget("gap=5us,overlap=5us,latency=5us,skew=5us")
    )
    assert {s["encoding"] for s in canary["timing"].values()} == {"exact"}
    assert canary["timing_mode"] == "bounded_approximate"
    assert verify_commitments(program, canary) == []


@pytest.mark.parametrize(
    "text,ns",
    [
        ("2us", 2_000),
        ("500ns", 500),
        ("1ms", 1_000_000),
        ("0", 0),
        ("1.5us", 1_500),
        ("3", 3),
        ("2s", 2 * 10**9),
    ],
)
def test_budget_amounts_parse_to_whole_nanoseconds(text, ns):
    assert parse_duration_ns(text) == ns


@pytest.mark.parametrize(
    "spec", ["skew=-1us", "skew=0.5ns", "jitter=2us", "skew", "skew=2xs", "gap=1us,gap=2us"]
)
def test_bad_budget_specs_are_refused(spec):
    with pytest.raises(InputError):
        parse_budget(spec)


def test_fields_left_out_of_the_budget_are_exact():
    budget = parse_budget("gap=2us")
    assert budget.fields == {"gap": 2_000, "overlap": 0, "latency": 0, "skew": 0}


def test_long_motif_body_repeated_few_times_gets_intervals_on_its_inner_motif():
    from tracecanary.program import make_program

    inner = [1] * 8 + [2]  # 9 occurrences, repeated 20 times inside each outer repetition
    outer = [0] * 3 + inner * 20
    sig = np.asarray(outer * 3)
    n = len(sig)
    rng = np.random.default_rng(0)
    position_gap = np.tile([100] * 8 + [5_000], 20)
    gap = np.concatenate(
        [np.concatenate([[7_000, 7_000, 7_000], position_gap + r * 50_000]) for r in range(3)]
    ) + rng.integers(0, 50, n)
    program = make_program(
        {
            "op": np.where(sig == 2, "all_gather", "all_reduce").astype(object),
            "bytes": np.where(sig == 0, 4, 1024),
            "dtype": np.full(n, "f32", dtype=object),
            "group": np.full(n, "g", dtype=object),
            "group_size": np.full(n, 2),
            "gap_ns": gap,
        },
        {
            "occ": np.repeat(np.arange(n), 2),
            "rank": np.tile([0, 1], n),
            "skew_ns": np.zeros(2 * n, np.int64),
        },
        world_size=2,
        skew_known=True,
    )
    canary = compile_program(program, budget=parse_budget("gap=100ns"))
    top = canary["structure"]["records"]
    assert len(top) == 1 and top[0]["repeat"] == 3
    gap_stream = canary["timing"]["gap"]
    assert gap_stream["encoding"] == "bounded_intervals"
    periods = [i["period"] for i in gap_stream["intervals"]]
    assert periods.count(9) == 3  # one interval per outer repetition covers its 20 inner steps
    assert verify_commitments(program, canary) == []
