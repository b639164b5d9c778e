"""verify_commitments: a third party holding the source recomputes every receipt;
any tampering, in the canary or in the source, is named."""

from __future__ import annotations

import copy

from tracecanary.compile import compile_program, parse_budget
from tracecanary.program import Program
from tracecanary.synth.examples import decode_like_program, random_program
from tracecanary.verify.commitments import verify_commitments

BUDGET = parse_budget("skew=2us,overlap=5us,gap=5us,latency=5us")


def _program():
    return decode_like_program(120, layers=6, world_size=4, jitter_ns=4_000, tail_every=40)


def _tamper_source(program: Program, i: int, col: str, delta: int) -> Program:
    occ = program.occurrences.copy()
    occ.loc[i, col] = int(occ.loc[i, col]) + delta
    return Program(
        occ, program.members, program.world_size, program.skew_known, program.skew_reason
    )


def _first_bounded(canary):
    for name, stream in canary["timing"].items():
        if stream and stream["encoding"] == "bounded_intervals":
            return name, stream
    raise AssertionError("no bounded stream")


def test_untouched_source_and_canary_verify():
    program = _program()
    assert verify_commitments(program, compile_program(program, budget=BUDGET)) == []
    assert verify_commitments(program, compile_program(program)) == []


def test_tampered_interval_commitment_is_named():
    program = _program()
    canary = compile_program(program, budget=BUDGET)
    name, stream = _first_bounded(canary)
    k = len(stream["intervals"]) // 2
    stream["intervals"][k]["commitment"] = "0" * 64
    found = verify_commitments(program, canary)
    itv = stream["intervals"][k]
    segment = f"timing.{name}.intervals[{k}] [{itv['start']}, {itv['stop']})"
    assert [m["segment"] for m in found] == [segment]
    assert found[0]["expected"] == "0" * 64


def test_tampered_source_occurrence_breaks_the_covering_commitments():
    program = _program()
    canary = compile_program(program, budget=BUDGET)
    tampered = _tamper_source(program, 500, "bytes", 4)
    segments = [m["segment"] for m in verify_commitments(tampered, canary)]
    assert "source" in segments
    assert any(s.startswith("source_commitment") for s in segments)
    covering = []
    for name, stream in canary["timing"].items():
        if stream and stream["encoding"] == "bounded_intervals":
            for k, itv in enumerate(stream["intervals"]):
                if itv["start"] <= 500 < itv["stop"]:
                    covering.append(f"timing.{name}.intervals[{k}] [{itv['start']}, {itv['stop']})")
    assert covering and set(covering) <= set(segments)


def test_tampered_source_timing_in_a_lossless_canary_is_named_by_occurrence():
    program = _program()
    canary = compile_program(program)
    tampered = _tamper_source(program, 77, "gap_ns", 1)
    segments = [m["segment"] for m in verify_commitments(tampered, canary)]
    assert "timing.gap occurrence 77" in segments


def test_understated_error_bound_is_caught():
    program = _program()
    canary = compile_program(program, budget=BUDGET)
    name, stream = _first_bounded(canary)
    k, itv = next(
        (k, i) for k, i in enumerate(stream["intervals"]) if any(e for e in i["max_error_ns"] if e)
    )
    j = next(j for j, e in enumerate(itv["max_error_ns"]) if e)
    itv["max_error_ns"][j] -= 1
    found = verify_commitments(program, canary)
    assert [m["segment"] for m in found] == [
        f"timing.{name}.intervals[{k}] [{itv['start']}, {itv['stop']}) max_error_ns"
    ]


def test_moved_representative_beyond_budget_is_caught():
    program = _program()
    canary = compile_program(program, budget=BUDGET)
    name, stream = _first_bounded(canary)
    itv = stream["intervals"][0]
    if name == "skew":
        itv["rep"][0][0] += 50_000
    else:
        itv["rep"][0] += 50_000
    segments = [m["segment"] for m in verify_commitments(program, canary)]
    assert any("budget at occurrence" in s for s in segments)


def test_prefix_canary_verifies_against_the_full_source_and_detects_a_shorter_one():
    program = random_program(3, 200)
    canary = compile_program(
        program, budget=parse_budget("gap=30,overlap=30,latency=30,skew=30"), prefix=120
    )
    assert verify_commitments(program, canary) == []
    from tracecanary.compile.canary import prefix_program

    short = prefix_program(program, 100)
    segments = [m["segment"] for m in verify_commitments(short, copy.deepcopy(canary))]
    assert "source" in segments and "source_commitment [0, 120)" in segments


def test_tampered_signature_string_is_named_with_both_values():
    program = _program()
    canary = compile_program(program, budget=BUDGET)
    op = program.occurrences["op"].iloc[3]
    sig = next(i for i, s in enumerate(canary["signatures"]) if s["op"] == op)
    canary["signatures"][sig]["op"] = "custom:tampered"
    found = verify_commitments(program, canary)
    first = next(m for m in found if m["segment"].endswith("field op"))
    i = int(first["segment"].split()[1])
    assert program.occurrences["op"].iloc[:i].ne(op).all()
    assert (first["expected"], first["found"]) == ("custom:tampered", op)


def test_a_serialization_is_used_only_for_the_program_it_was_made_from():
    from tracecanary.compile import serialize_source
    from tracecanary.compile.expand import decode_canary

    program = _program()
    canary = compile_program(program, budget=BUDGET)
    tampered = _tamper_source(program, 500, "bytes", 4)
    fresh = verify_commitments(tampered, canary)
    assert fresh
    # a serialization of another program (the untampered one) must not hide the tampering
    ser = serialize_source(program)
    assert verify_commitments(tampered, canary, serialization=ser) == fresh
    # the right serialization and decoding give the same result as recomputing them
    assert verify_commitments(program, canary, serialization=ser) == []
    own = serialize_source(tampered)
    decoded = decode_canary(canary, ranks=False)
    assert verify_commitments(tampered, canary, serialization=own, decoded=decoded) == fresh
