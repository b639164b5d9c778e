"""The compiler reads a program through its column accessors: a program held as column
arrays (``Program.from_columns``, ``make_program(columns=True)``) compiles to the same
canary bytes as the same program held as DataFrames, whichever implementation
(``factorize``: numpy below PANDAS_MIN_ROWS, pandas from it) does the work, and
compiling it imports neither pandas nor pyarrow (checked in a fresh process with both
imports forbidden). Signature ids and tables are the same in either form: empty, one
row, non-ASCII text, a text column whose literals repeat."""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from column_form import column_dicts, held_as_columns, pandas_from

from tracecanary.canonical import canonical_json_bytes
from tracecanary.compile.budget import parse_budget
from tracecanary.compile.canary import compile_program
from tracecanary.compile.execution import largest_member_skew, tail_occurrences
from tracecanary.compile.repetition import repetition_profile
from tracecanary.program import (
    SIGNATURE_COLUMNS,
    Program,
    make_program,
)
from tracecanary.synth.examples import decode_like_program, random_program

BUDGET = "skew=20ns,overlap=30ns,gap=40ns,latency=30ns"


def unicode_program(n: int = 120) -> Program:
    """Non-ASCII text in every text column, ties and negative roots."""
    rng = np.random.default_rng(n)
    pick = lambda options: np.array(options, dtype=object)[rng.integers(0, len(options), n)]  # noqa: E731
    steps = np.tile(np.arange(6), n // 6 + 1)[:n]
    members = {"occ": np.repeat(np.arange(n), 2), "rank": np.tile([0, 1], n)}
    members["skew_ns"] = np.where(members["rank"] == 1, rng.integers(0, 9, 2 * n), 0)
    return make_program(
        {
            "op": np.where(steps < 4, "all_reduce", "custom:réduire").astype(object),
            "bytes": np.where(steps % 2 == 0, 1 << 40, 8),
            "dtype": pick(["f32", "bf16"]),
            "group": np.where(steps == 5, "tp·0", "données").astype(object),
            "group_size": np.full(n, 2),
            "root": np.where(steps == 3, -1, 0),
            "phase": np.where(steps < 2, "", "前向").astype(object),
            "stream": pick(["", "s1", "流"]),
            "gap_ns": rng.integers(0, 50, n),
            "overlap_ns": rng.integers(0, 50, n),
            "has_overlap": rng.random(n) < 0.5,
            "latency_ns": rng.integers(1, 90, n),
            "has_latency": rng.random(n) < 0.8,
        },
        members,
        world_size=2,
        skew_known=True,
    )


PROGRAMS = {
    "random": lambda: random_program(11, 400),
    "random-unknown-skew": lambda: random_program(12, 300, skew_known=False),
    "decode": lambda: decode_like_program(40, layers=6, world_size=4, tail_every=7),
    "unicode": unicode_program,
}

SETTINGS = {
    "lossless": {},
    "bounded": {"budget": BUDGET},
    "reduced": {"budget": BUDGET, "policy": {"max_executed_repeats": 2}},
    "reduced-skew-quantile": {
        "policy": {"max_executed_repeats": 3, "steady_selection": "skew_quantile"}
    },
    "prefix": {"budget": BUDGET, "prefix": 57},
}


def canary_bytes(program: Program, settings: dict) -> bytes:
    budget = settings.get("budget")
    return canonical_json_bytes(
        compile_program(
            program,
            budget=None if budget is None else parse_budget(budget),
            prefix=settings.get("prefix"),
            execution_policy=settings.get("policy"),
        )
    )


@pytest.mark.parametrize("kind", sorted(PROGRAMS))
@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_a_program_held_as_columns_compiles_to_the_canary_of_its_dataframes(kind, setting):
    frames = PROGRAMS[kind]()
    want = canary_bytes(frames, SETTINGS[setting])
    for rows in (0, 1 << 62):  # pandas for every array, numpy for every array
        for repeat_literals in (True, False):
            with pandas_from(rows):
                got = canary_bytes(
                    held_as_columns(frames, "repeated" if repeat_literals else "objects"),
                    SETTINGS[setting],
                )
            assert got == want, (rows, repeat_literals)
    with pandas_from(1 << 62):
        assert canary_bytes(frames, SETTINGS[setting]) == want


def _signature_forms(program: Program):
    yield "frames", program
    yield "columns", held_as_columns(program, "repeated")
    yield "objects", held_as_columns(program, "objects")


@pytest.mark.parametrize("kind", sorted(PROGRAMS))
@pytest.mark.parametrize("n", [0, 1, 2, None])
def test_signature_ids_and_tables_are_the_same_in_either_form(kind, n):
    full = PROGRAMS[kind]()
    frames = full if n is None else _prefix(full, n)
    keys = frames.occurrences[list(SIGNATURE_COLUMNS)]
    first: dict = {}
    want_ids = [first.setdefault(r, len(first)) for r in keys.itertuples(index=False, name=None)]
    want_rows = list(first)
    for rows in (0, 1 << 62):
        for form, program in _signature_forms(frames):
            with pandas_from(rows):
                ids, first_rows = program.signature_rows()
                ids2, table = program.signatures()
            assert ids.dtype == np.int64 and ids.tolist() == want_ids, form
            assert ids2.tolist() == want_ids
            assert [want_ids[i] for i in first_rows.tolist()] == list(range(len(want_rows)))
            assert [tuple(sig.values()) for sig in table] == want_rows
            assert all(list(sig) == list(SIGNATURE_COLUMNS) for sig in table)
            assert all(
                type(sig[c]) is (int if c in ("bytes", "root") else str)
                for sig in table
                for c in SIGNATURE_COLUMNS
            )
            assert program.holds_columns == (form != "frames")  # no DataFrame was built
            ids3, frame = program.signature_ids()
            assert ids3.tolist() == want_ids
            pd.testing.assert_frame_equal(frame, keys.iloc[first_rows].reset_index(drop=True))


def _prefix(program: Program, n: int) -> Program:
    occ = program.occurrences.iloc[:n].reset_index(drop=True)
    mem = program.members[program.members["occ"].to_numpy() < n].reset_index(drop=True)
    return program.replace(occurrences=occ, members=mem)


@pytest.mark.parametrize("kind", sorted(PROGRAMS))
def test_tail_rules_and_repetition_profile_are_the_same_in_either_form(kind):
    frames = PROGRAMS[kind]()
    want_tail = tail_occurrences(frames, 1.5, 1.5)
    want_skew = largest_member_skew(frames)
    want_profile = repetition_profile(frames)
    assert want_tail.any()  # the rules flag something: a difference would show
    for rows in (0, 1 << 62):
        with pandas_from(rows):
            columns = held_as_columns(frames, "repeated")
            assert tail_occurrences(columns, 1.5, 1.5).tolist() == want_tail.tolist()
            assert largest_member_skew(columns).tolist() == want_skew.tolist()
            assert repetition_profile(columns) == want_profile
            assert columns.holds_columns


def test_make_program_holding_columns_builds_make_programs_dataframes():
    program = unicode_program(30)
    occ, mem = column_dicts(program, "repeated")
    occ = {k: v for k, v in occ.items() if k not in ("occ", "weight", "tail")}  # defaults
    held = make_program(dict(occ), dict(mem), world_size=2, skew_known=True, columns=True)
    plain = make_program(dict(occ), dict(mem), world_size=2, skew_known=True)
    assert held.holds_columns and not plain.holds_columns
    occ["gap_ns"][0] = 777  # the caller's arrays were copied
    mem["rank"][0] = 1
    pd.testing.assert_frame_equal(held.occurrences, plain.occurrences)
    pd.testing.assert_frame_equal(held.members, plain.members)
    assert held.column("gap_ns")[0] != 777


def test_make_program_holding_columns_builds_the_dataframe_at_once_for_text_that_is_not_str():
    occ = {
        "op": np.array(["all_reduce", None], dtype=object),
        "bytes": np.array([4, 4]),
        "dtype": np.array(["f32", "f32"], dtype=object),
        "group": np.array(["g", "g"], dtype=object),
        "group_size": np.array([1, 1]),
        "gap_ns": np.array([0, 5]),
    }
    mem = {"occ": np.array([0, 1]), "rank": np.array([0, 0]), "skew_ns": np.array([0, 0])}
    held = make_program(occ, mem, world_size=1, skew_known=True, columns=True)
    plain = make_program(occ, mem, world_size=1, skew_known=True)
    assert not held.holds_columns
    pd.testing.assert_frame_equal(held.occurrences, plain.occurrences)


BLOCKED_COMPILE = """
import importlib.abc, pickle, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("pandas", "pyarrow"):
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
from tracecanary.canonical import canonical_json_bytes
from tracecanary.compile.budget import parse_budget
from tracecanary.compile.canary import compile_program
from tracecanary.program import make_program
occ, mem, attributes, runs = pickle.load(sys.stdin.buffer)
out = []
for budget, policy in runs:
    program = make_program(dict(occ), dict(mem), columns=True, **attributes)
    doc = compile_program(
        program,
        budget=None if budget is None else parse_budget(budget),
        execution_policy=policy,
    )
    assert program.holds_columns
    out.append(canonical_json_bytes(doc))
assert "pandas" not in sys.modules and "pyarrow" not in sys.modules
sys.stdout.buffer.write(pickle.dumps(out))
"""


def test_a_program_held_as_columns_compiles_with_pandas_and_pyarrow_forbidden():
    frames = random_program(21, 200)
    occ, mem = column_dicts(frames, "repeated")
    attributes = {"world_size": frames.world_size, "skew_known": frames.skew_known}
    runs = [(None, None), (BUDGET, None), (BUDGET, {"max_executed_repeats": 2})]
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED_COMPILE],
        input=pickle.dumps((occ, mem, attributes, runs)),
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    got = pickle.loads(done.stdout)
    want = [canary_bytes(frames, {"budget": budget, "policy": policy}) for budget, policy in runs]
    assert got == want


@pytest.mark.parametrize(
    "module",
    [
        "tracecanary.program",
        "tracecanary.compile.canary",
        "tracecanary.compile.execution",
        "tracecanary.compile.repetition",
        "tracecanary.factorize",
    ],
)
def test_importing_the_compiler_imports_neither_pandas_nor_pyarrow(module):
    probe = f"import sys, {module}; print('pandas' in sys.modules, 'pyarrow' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["False", "False"]
