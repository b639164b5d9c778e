"""Lossless mode: round trip to the same source digest, determinism, unknown skew,
prefix coverage, schema validity, records and bytes reported separately."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracecanary.canonical import canonical_json_bytes
from tracecanary.compile import compile_program, expand_canary, source_digest
from tracecanary.compile.canary import prefix_program
from tracecanary.compile.document import validate_canary
from tracecanary.errors import InputError, SchemaError
from tracecanary.program import make_program
from tracecanary.synth.examples import decode_like_program, random_program

programs = st.builds(
    random_program,
    seed=st.integers(0, 10_000),
    n=st.integers(1, 150),
    world_size=st.integers(1, 6),
    skew_known=st.booleans(),
    p_overlap=st.sampled_from([0.0, 0.6, 1.0]),
    p_latency=st.sampled_from([0.0, 0.6, 1.0]),
    jitter_ns=st.sampled_from([0, 3, 1000]),
    value_choices=st.integers(1, 4),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs)
def test_lossless_expand_of_compile_has_the_source_digest(program):
    canary = compile_program(program)
    assert canary["timing_mode"] == "lossless"
    assert canary["coverage"] == "full"
    assert (
        source_digest(expand_canary(canary)) == source_digest(program) == canary["source"]["digest"]
    )
    validate_canary(canary)


def test_compiling_twice_gives_the_same_bytes():
    program = decode_like_program(40, layers=6, world_size=4, tail_every=10)
    a = canonical_json_bytes(compile_program(program))
    b = canonical_json_bytes(
        compile_program(decode_like_program(40, layers=6, world_size=4, tail_every=10))
    )
    assert a == b


def test_unknown_skew_compiles_to_behaviorally_unverified_without_skew():
    program = random_program(11, 80, skew_known=False)
    canary = compile_program(program)
    assert canary["claim"] == "behaviorally_unverified"
    assert canary["timing"]["skew"] is None
    assert canary["source"]["skew_known"] is False
    expanded = expand_canary(canary)
    assert expanded.skew_known is False
    assert source_digest(expanded) == source_digest(program)
    validate_canary(canary)


def test_unmeasured_values_stay_unmeasured():
    program = random_program(12, 90, p_overlap=0.5, p_latency=0.0)
    canary = compile_program(program)
    assert canary["timing"]["latency"]["values"] == []
    assert canary["timing"]["latency"]["measured"] == [{"v": False, "repeat": 90}]
    expanded = expand_canary(canary)
    assert not expanded.occurrences["has_latency"].any()
    assert np.array_equal(
        expanded.occurrences["has_overlap"].to_numpy(),
        program.occurrences["has_overlap"].to_numpy(),
    )


def test_prefix_canary_is_partial_and_stands_for_the_prefix_only():
    program = random_program(13, 120)
    canary = compile_program(program, prefix=50)
    assert canary["coverage"] == "partial"
    assert canary["claim"] == "partial"
    assert canary["source"]["digest"] == source_digest(program)
    assert canary["source"]["covered_occurrences"] == 50
    assert canary["source_commitment"]["stop"] == 50
    assert source_digest(expand_canary(canary)) == source_digest(prefix_program(program, 50))
    validate_canary(canary)
    # a partial canary can never claim verified: the schema refuses it
    canary["claim"] = "verified"
    with pytest.raises(SchemaError):
        validate_canary(canary)


def test_prefix_covering_everything_is_full():
    program = random_program(14, 30)
    assert compile_program(program, prefix=30)["coverage"] == "full"
    with pytest.raises(InputError):
        compile_program(program, prefix=0)


def test_records_and_bytes_are_reported_separately_and_never_called_compressed_when_larger():
    # 3 occurrences of an 8-rank group: fewer records than member events, more bytes
    program = make_program(
        {
            "op": ["all_reduce"] * 3,
            "bytes": [1024] * 3,
            "dtype": ["f32"] * 3,
            "group": ["g"] * 3,
            "group_size": [8] * 3,
            "gap_ns": [0, 10, 10],
        },
        {
            "occ": np.repeat(np.arange(3), 8),
            "rank": np.tile(np.arange(8), 3),
            "skew_ns": np.zeros(24),
        },
        world_size=8,
        skew_known=True,
    )
    stats = compile_program(program)["stats"]
    assert stats["events_source"] == 24
    assert stats["records_canary"] < stats["events_source"]
    assert stats["event_compression"] > 1
    assert stats["bytes_canary"] > stats["bytes_source"]
    assert stats["compressed"] is False
    assert stats["byte_compression"] < 1


def test_bytes_canary_is_the_size_of_the_document_itself():
    canary = compile_program(decode_like_program(30, layers=4, world_size=4))
    assert canary["stats"]["bytes_canary"] == len(canonical_json_bytes(canary))
    assert canary["stats"]["compressed"] is (
        canary["stats"]["bytes_canary"] < canary["stats"]["bytes_source"]
    )


def test_decode_program_compresses_records_by_structure():
    program = decode_like_program(300, layers=32, world_size=8, jitter_ns=0, skew_known=True)
    canary = compile_program(program)
    stats = canary["stats"]
    assert stats["records_structure"] <= 6
    assert stats["event_compression"] >= 10
    assert stats["compressed"] is True


def test_compile_refuses_reduced_programs_and_empty_programs():
    program = random_program(15, 20)
    occ = program.occurrences.copy()
    occ.loc[3, "weight"] = 2.0
    reduced = type(program)(occ, program.members, program.world_size, program.skew_known)
    with pytest.raises(InputError, match="weight"):
        compile_program(reduced)
    empty = prefix_program(program, 0)
    with pytest.raises(InputError, match="no occurrences"):
        compile_program(empty)


def test_compile_refuses_groups_whose_members_change():
    changed = make_program(
        {
            "op": ["all_reduce"] * 2,
            "bytes": [4, 4],
            "dtype": ["f32"] * 2,
            "group": ["g", "g"],
            "group_size": [2, 2],
            "gap_ns": [0, 5],
        },
        {"occ": [0, 0, 1, 1], "rank": [0, 1, 0, 2], "skew_ns": [0, 0, 0, 0]},
        world_size=3,
        skew_known=True,
    )
    with pytest.raises(InputError, match="different member ranks"):
        compile_program(changed)
