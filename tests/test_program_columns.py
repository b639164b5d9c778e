"""A program held as numpy column arrays (``Program.from_columns``, what a canary's
expansion gives) is the same program as one held as pandas tables: the DataFrames it
builds on first use are ``make_program``'s, its codes are ``pd.factorize``'s, and a
replay of it gives the same report bytes. The held form is what lets a canary's replay
run without importing pandas (tests/test_lazy_imports.py)."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracecanary.canonical import canonical_json_bytes
from tracecanary.compile.budget import parse_budget
from tracecanary.compile.canary import compile_program
from tracecanary.compile.expand import expand_canary
from tracecanary.defaults import default_file
from tracecanary.program import (
    MEMBER_COLUMNS,
    OCCURRENCE_COLUMNS,
    Program,
    TextColumn,
    make_program,
)
from tracecanary.sim.backends import load_backends
from tracecanary.sim.report import build_report
from tracecanary.synth.examples import random_program


@pytest.fixture(scope="module")
def backends():
    return load_backends(str(default_file("backends.yaml")))


def held_as_frames(program: Program) -> Program:
    """The same program held as pandas tables (built before anything reads it)."""
    return Program(
        occurrences=program.occurrences.copy(),
        members=program.members.copy(),
        world_size=program.world_size,
        skew_known=program.skew_known,
        skew_reason=program.skew_reason,
        notes=program.notes,
        skew_uncertainty_ns=program.skew_uncertainty_ns,
    )


def canaries(seed: int):
    """A lossless canary and a reduced one (executing part of its source) of a random
    program."""
    program = random_program(seed, 300)
    return [
        compile_program(program),
        compile_program(
            program, budget=parse_budget("gap=2us"), execution_policy={"max_executed_repeats": 1}
        ),
    ]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("executed", [False, True])
def test_an_expanded_canary_is_held_as_columns_and_builds_make_programs_tables(seed, executed):
    for canary in canaries(seed):
        program = expand_canary(canary, executed=executed)
        assert program.holds_columns
        rebuilt = make_program(
            {name: program.column(name) for name in OCCURRENCE_COLUMNS},
            {name: program.member_column(name) for name in MEMBER_COLUMNS},
            world_size=program.world_size,
            skew_known=program.skew_known,
        )
        frame = program.occurrences
        assert not program.holds_columns  # built once; the DataFrame is now the table
        pd.testing.assert_frame_equal(frame[list(OCCURRENCE_COLUMNS)], rebuilt.occurrences)
        pd.testing.assert_frame_equal(program.members, rebuilt.members)
        assert list(frame.columns)[: len(OCCURRENCE_COLUMNS)] == list(OCCURRENCE_COLUMNS)


@pytest.mark.parametrize("seed", [4, 5])
@pytest.mark.parametrize(
    "ablations", [(), ("order",), ("tail", "skew"), ("no_queue_reset", "observed_latency")]
)
def test_a_replay_of_a_program_held_as_columns_gives_the_report_of_its_dataframes(
    seed, ablations, backends
):
    for canary in canaries(seed):
        columns = expand_canary(canary, executed=True)
        frames = held_as_frames(expand_canary(canary, executed=True))
        assert columns.holds_columns and not frames.holds_columns

        def report(program):
            return canonical_json_bytes(
                build_report(
                    program, backends, input_sha256="0" * 64, ablations=ablations, isolated=True
                )
            )

        assert report(columns) == report(frames)


texts = st.lists(st.sampled_from(["", "a", "b", "tp0", "dp1", "é", "Z", "a b"]), max_size=40)


@settings(max_examples=200, deadline=None)
@given(
    literals=st.lists(st.sampled_from(["", "a", "b", "tp0", "é", "Z"]), min_size=1, max_size=6),
    data=st.data(),
    sort=st.booleans(),
)
def test_codes_of_a_text_column_are_pandas_factorize_codes(literals, data, sort):
    codes = np.asarray(
        data.draw(st.lists(st.integers(0, len(literals) - 1), max_size=40)), dtype=np.int64
    )
    column = TextColumn(codes, tuple(literals))
    values = column.values()
    want_codes, want_uniques = pd.factorize(
        pd.array(values, dtype="str"), sort=sort, use_na_sentinel=False
    )
    got_codes, got_uniques = column.factorized(sort=sort)
    assert got_codes.tolist() == want_codes.tolist()
    assert list(got_uniques) == [str(u) for u in want_uniques]


@settings(max_examples=100, deadline=None)
@given(values=texts, sort=st.booleans())
def test_codes_of_an_object_text_column_are_pandas_factorize_codes(values, sort):
    n = len(values)
    ints = {
        name: np.zeros(n, dtype=dtype)
        for name, dtype in OCCURRENCE_COLUMNS.items()
        if dtype not in ("str",)
    }
    text = {
        name: np.asarray(values, dtype=object)
        for name, dtype in OCCURRENCE_COLUMNS.items()
        if dtype == "str"
    }
    members = {name: np.zeros(0, dtype=dtype) for name, dtype in MEMBER_COLUMNS.items()}
    program = Program.from_columns({**ints, **text}, members, world_size=1, skew_known=True)
    want_codes, want_uniques = pd.factorize(
        pd.array(np.asarray(values, dtype=object), dtype="str"), sort=sort, use_na_sentinel=False
    )
    got_codes, got_uniques = program.factorized("group", sort=sort)
    assert got_codes.tolist() == want_codes.tolist()
    assert list(got_uniques) == [str(u) for u in want_uniques]


def test_a_program_is_read_only_its_columns_too_and_pickles_in_its_held_form():
    program = expand_canary(canaries(6)[0])
    with pytest.raises(AttributeError, match="read-only"):
        program.world_size = 3
    with pytest.raises(ValueError, match="read-only"):
        program.column("gap_ns")[0] = 1
    copy = pickle.loads(pickle.dumps(program))
    assert copy.holds_columns
    assert copy.column("gap_ns").tolist() == program.column("gap_ns").tolist()
    (codes, names), (want_codes, want_names) = (
        copy.factorized("op", sort=True),
        program.factorized("op", sort=True),
    )
    assert codes.tolist() == want_codes.tolist() and names == want_names


def test_a_program_refuses_a_column_of_the_wrong_dtype_in_either_form():
    program = expand_canary(canaries(7)[0])
    columns = {name: program.raw_column(name) for name in program.column_names}
    members = program.raw_members()
    bad = {**columns, "bytes": columns["bytes"].astype(np.float64)}
    with pytest.raises(ValueError, match="'bytes'"):
        Program.from_columns(bad, members, world_size=1, skew_known=True)
    with pytest.raises(ValueError, match="'bytes'"):
        program.replace(occurrences=program.occurrences.astype({"bytes": "float64"}))
