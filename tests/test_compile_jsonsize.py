"""Canonical sizes computed from arrays (compile.jsonsize, ExactPlan, BoundedPlan) equal
the length of the canonical JSON of the streams they describe, byte for byte: the
compiler chooses between encodings and writes ``bytes_canary`` from these numbers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracecanary.canonical import canonical_json_bytes
from tracecanary.compile import (
    compile_program,
    jsonsize,
    parse_budget,
    sequence,
    timing,
    timing_streams,
)
from tracecanary.compile.budget import Budget
from tracecanary.compile.execution import finalize, reduce_execution
from tracecanary.compile.source import serialize_source
from tracecanary.compile.structure import encode_structure, signature_table, top_level_spans
from tracecanary.program import Program
from tracecanary.synth.examples import decode_like_program, random_program

INT64 = np.iinfo(np.int64)


def test_int_len_is_the_decimal_length_at_every_power_of_ten_and_the_int64_limits():
    edges = [0, 1, 9, 10, 11, 99, 100, 999_999, 10**18 - 1, 10**18, INT64.max, INT64.min]
    edges += [-x for x in edges if x not in (INT64.min,)]
    edges += [10**k + d for k in range(19) for d in (-1, 0, 1) if 10**k + d <= INT64.max]
    values = np.array(edges, dtype=np.int64)
    assert jsonsize.int_len(values).tolist() == [len(str(int(v))) for v in values]


@given(st.lists(st.integers(INT64.min, INT64.max), max_size=50))
def test_int_len_matches_str_for_any_int64(values):
    arr = np.array(values, dtype=np.int64)
    assert jsonsize.int_len(arr).tolist() == [len(str(v)) for v in values]


def _sequences():
    """Sequences with runs, literal stretches and nested motifs."""
    piece = st.one_of(
        st.lists(st.integers(-3, 12), min_size=1, max_size=6),  # literals
        st.tuples(st.integers(-3, 12), st.integers(2, 9)).map(lambda t: [t[0]] * t[1]),  # run
        st.tuples(st.lists(st.integers(0, 5), min_size=1, max_size=4), st.integers(2, 6)).map(
            lambda t: t[0] * t[1]
        ),  # motif
    )
    return st.lists(piece, max_size=12).map(lambda ps: [v for p in ps for v in p])


@settings(max_examples=300, deadline=None)
@given(_sequences(), st.integers(1, 4))
def test_grammar_records_length_and_count_match_the_records(seq, outer):
    values = np.array(seq * outer, dtype=np.int64)
    grammar = sequence.encode_sequence(values)
    records = sequence.grammar_records(grammar, run_key="v", block_key="values")
    size, count = jsonsize.grammar_records_len(
        grammar, jsonsize.int_len(grammar.run_values), run_key="v", block_key="values"
    )
    assert size == len(canonical_json_bytes(records)) - 1
    assert count == sequence.count_records(records, "values")


def _arrays_and_spans(program: Program):
    sig_ids, sigs = signature_table(program)
    spans = top_level_spans(encode_structure(sig_ids))
    return timing.timing_arrays(program), spans, sig_ids, len(sigs)


def _check_exact(program: Program) -> None:
    arrays, _, _, _ = _arrays_and_spans(program)
    for name in timing_streams.FIELDS:
        if name == "skew" and not program.skew_known:
            continue
        plan = timing.plan_exact(name, arrays)
        stream = plan.encode()
        assert plan.stream_bytes() == len(canonical_json_bytes(stream)), name
        assert plan.records() == timing_streams.count_stream_records(stream), name


def _check_bounded(program: Program, budget: Budget) -> None:
    arrays, spans, sig_ids, n_sigs = _arrays_and_spans(program)
    ser = serialize_source(program)
    for name in timing_streams.FIELDS:
        if name == "skew" and not program.skew_known:
            continue
        b_occ = budget.per_signature(name, n_sigs)[sig_ids]
        if not b_occ.any():
            continue
        plan = timing.plan_bounded(name, arrays, spans, b_occ)
        stream = timing.encode_bounded(name, arrays, spans, b_occ, ser, plan=plan)
        mask = arrays.values(name)[1] if name in timing_streams.MASKED else None
        measured_len = None
        if mask is not None:
            measured_len, records = timing.bool_records_len(mask)
            assert measured_len == len(canonical_json_bytes(stream["measured"])) - 1
            assert records == sequence.count_records(stream["measured"], "values")
        assert plan.stream_bytes(measured_len) == len(canonical_json_bytes(stream)), name


@st.composite
def _programs(draw):
    return random_program(
        draw(st.integers(0, 10_000)),
        draw(st.integers(1, 300)),
        world_size=draw(st.integers(1, 6)),
        skew_known=draw(st.booleans()),
        p_overlap=draw(st.sampled_from([0.0, 0.3, 1.0])),
        p_latency=draw(st.sampled_from([0.0, 0.7, 1.0])),
        jitter_ns=draw(st.sampled_from([0, 3, 40, 5000, 10**9])),
        value_choices=draw(st.integers(1, 4)),
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_programs())
def test_exact_stream_size_and_record_count_match_the_built_stream(program):
    _check_exact(program)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_programs(), st.sampled_from([1, 7, 60, 900, 20_000, 10**10]))
def test_bounded_stream_size_matches_the_built_stream(program, budget_ns):
    _check_bounded(program, Budget({f: budget_ns for f in timing_streams.FIELDS}))


@pytest.mark.parametrize("jitter_ns", [0, 2_000, 20_000])
def test_stream_sizes_match_on_decode_steps_with_periodic_intervals(jitter_ns):
    program = decode_like_program(40, layers=6, world_size=4, jitter_ns=jitter_ns, tail_every=7)
    _check_exact(program)
    for budget_ns in (500, 5_000, 50_000):
        _check_bounded(program, Budget({f: budget_ns for f in timing_streams.FIELDS}))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_programs(), st.sampled_from([None, "gap=40,skew=3", "gap=1us,overlap=1us,latency=1us"]))
def test_bytes_canary_is_the_length_of_the_written_canary(program, spec):
    canary = compile_program(program, budget=None if spec is None else parse_budget(spec))
    assert canary["stats"]["bytes_canary"] == len(canonical_json_bytes(canary))
    # the sizes the compiler computed give the same stats as serializing everything
    again = finalize({**canary, "stats": dict(canary["stats"])})
    assert canonical_json_bytes(again) == canonical_json_bytes(canary)
    reduced = reduce_execution(canary, {"max_executed_repeats": 1})
    assert reduced["stats"]["bytes_canary"] == len(canonical_json_bytes(reduced))
