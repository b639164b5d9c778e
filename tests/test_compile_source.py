"""Canonical source serialization, digests and segment commitments."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracecanary.canonical import canonical_json_bytes, sha256_bytes
from tracecanary.compile.source import (
    occurrence_record,
    segment_commitment,
    serialize_source,
    source_digest,
    source_header,
)
from tracecanary.program import Program
from tracecanary.synth.examples import random_program

programs = st.builds(
    random_program,
    seed=st.integers(0, 10_000),
    n=st.integers(1, 60),
    world_size=st.integers(1, 6),
    skew_known=st.booleans(),
    p_overlap=st.sampled_from([0.0, 0.5, 1.0]),
    p_latency=st.sampled_from([0.0, 0.5, 1.0]),
)


def _with_occurrence(program: Program, i: int, **changes) -> Program:
    occ = program.occurrences.copy()
    for col, value in changes.items():
        occ.loc[i, col] = value
    return Program(
        occ, program.members, program.world_size, program.skew_known, program.skew_reason
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs)
def test_source_lines_are_the_canonical_json_of_each_occurrence(program):
    ser = serialize_source(program)
    for i in range(program.n):
        assert ser.line(i) == canonical_json_bytes(occurrence_record(program, i))
    whole = source_header(program) + b"".join(ser.line(i) for i in range(program.n))
    assert ser.size_bytes() == len(whole)
    assert source_digest(program) == sha256_bytes(whole)


def test_unknown_skew_is_omitted_never_written_as_zero():
    program = random_program(1, 20, skew_known=False)
    line = serialize_source(program).line(0)
    assert b'"members":[[' in line
    rec = occurrence_record(program, 0)
    assert all(len(m) == 1 for m in rec["members"])
    assert b",0]" not in line.split(b'"members":')[1].split(b"]]")[0] + b"]"


def test_unmeasured_overlap_and_latency_are_omitted():
    program = random_program(2, 40, p_overlap=0.5, p_latency=0.5)
    ser = serialize_source(program)
    occ = program.occurrences
    for i in range(program.n):
        line = ser.line(i)
        assert (b'"overlap_ns"' in line) == bool(occ["has_overlap"][i])
        assert (b'"latency_ns"' in line) == bool(occ["has_latency"][i])


def test_digest_changes_when_any_occurrence_changes():
    program = random_program(3, 30)
    base = source_digest(program)
    changed = _with_occurrence(program, 17, gap_ns=int(program.occurrences["gap_ns"][17]) + 1)
    assert source_digest(changed) != base
    assert source_digest(random_program(3, 30)) == base


def test_segment_commitment_covers_exactly_its_range():
    program = random_program(4, 30)
    changed = _with_occurrence(program, 20, bytes=999_999)
    assert segment_commitment(program, 0, 20) == segment_commitment(changed, 0, 20)
    assert segment_commitment(program, 20, 21) != segment_commitment(changed, 20, 21)
    assert segment_commitment(program, 0, 20) != segment_commitment(program, 0, 19)
    # the range is committed too: the same lines at another position differ
    assert segment_commitment(program, 0, 0) != segment_commitment(program, 1, 1)


def test_prefix_digest_equals_digest_of_the_prefix_program():
    from tracecanary.compile.canary import prefix_program

    program = random_program(5, 50)
    ser = serialize_source(program)
    assert ser.digest(20) == source_digest(prefix_program(program, 20))
    assert ser.size_bytes(20) == serialize_source(prefix_program(program, 20)).size_bytes()


def test_serialization_of_a_large_program_is_vectorized():
    import time

    from tracecanary.synth.examples import decode_like_program

    program = decode_like_program(3_000)  # ~99k occurrences, 8 ranks
    t0 = time.perf_counter()
    ser = serialize_source(program)
    elapsed = time.perf_counter() - t0
    assert ser.n == program.n
    assert elapsed < 10.0, f"serializing {program.n} occurrences took {elapsed:.1f} s"
    i = int(np.random.default_rng(0).integers(0, program.n))
    assert ser.line(i) == canonical_json_bytes(occurrence_record(program, i))


def test_member_text_is_the_same_for_ranks_too_spread_for_a_literal_table():
    from tracecanary.compile import source as source_mod
    from tracecanary.program import make_program

    n = 4
    spread = source_mod.MAX_RANK_HEADS + 5
    members = {
        "occ": np.repeat(np.arange(n), 2),
        "rank": np.array([0, spread] * n, dtype=np.int64),
        "skew_ns": np.array([0, 7, 3, 0, 12, 1, 0, 0], dtype=np.int64),
    }
    for skew_known in (True, False):
        program = make_program(
            {
                "op": ["all_reduce"] * n,
                "bytes": [4] * n,
                "dtype": ["f32"] * n,
                "group": ["g"] * n,
                "group_size": [2] * n,
                "gap_ns": [0, 5, 5, 5],
            },
            members,
            world_size=spread + 1,
            skew_known=skew_known,
        )
        assert source_mod._rank_heads(members["rank"], skew_known)[0] is None
        ser = serialize_source(program)
        for i in range(n):
            assert ser.line(i) == canonical_json_bytes(occurrence_record(program, i))
