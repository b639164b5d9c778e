"""The two ``compile.jsonvec`` builders (Arrow arrays, Python lists) write the same
canonical JSON texts, so the source serialization and the written trace of a program
have the same bytes whichever builder its size picks, and whether the program is held
as DataFrames or as column arrays; small inputs need neither pandas nor pyarrow."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from column_form import held_as_columns
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracecanary.canonical import canonical_json_bytes
from tracecanary.compile import jsonvec as jv
from tracecanary.compile import source as source_mod
from tracecanary.compile import tracefile
from tracecanary.compile.source import serialize_source
from tracecanary.compile.tracefile import trace_bytes, trace_meta
from tracecanary.factorize import PANDAS_MIN_ROWS
from tracecanary.program import Program
from tracecanary.synth.examples import random_program

BUILDERS = (jv.ARROW, jv.PYTHON)

INT64 = np.iinfo(np.int64)
INTS = [0, 1, -1, 7, -42, 10**15, -(10**15), int(INT64.max), int(INT64.min)]
FLOATS = [
    1.0, 0.0, -0.0, 1e-7, 1e16, 5e-324, 0.1, -2.5, 1e22, 123456.789, 1.7976931348623157e308,
    2.0**-1074 * 3, 100.0, 1e-300, -0.0,
]  # fmt: skip
STRINGS = [
    "", "plain", 'q"uote', "back\\slash", "ctl\x00\x01\x1f\x7f", "tab\tnl\n", "é", "日本語",
    "\u2028sep", "emoji \U0001f600", "all_reduce",
]  # fmt: skip


def as_text(builder, column) -> list[str]:
    """The rows of a fragment column as str (through the builder's own bytes)."""
    data, offsets = builder.buffer_and_offsets(column)
    raw = bytes(data)
    return [raw[a:b].decode("utf-8") for a, b in zip(offsets[:-1], offsets[1:], strict=True)]


def canonical(value) -> str:
    return canonical_json_bytes(value).decode("utf-8")[:-1]


@pytest.mark.parametrize("builder", BUILDERS, ids=["arrow", "python"])
def test_each_builder_writes_the_canonical_json_of_each_value(builder):
    assert as_text(builder, builder.int_text(np.array(INTS, dtype=np.int64))) == [
        canonical(v) for v in INTS
    ]
    assert as_text(builder, builder.float_text(np.array(FLOATS))) == [canonical(v) for v in FLOATS]
    assert as_text(builder, builder.bool_text(np.array([True, False, True]))) == [
        "true",
        "false",
        "true",
    ]
    values = np.array(STRINGS + STRINGS[::-1], dtype=object)
    assert as_text(builder, builder.str_text(values)) == [canonical(v) for v in values]


def test_signed_zeros_keep_their_sign_together_in_one_column():
    for builder in BUILDERS:
        for values in ([0.0, -0.0], [-0.0, 0.0], [-0.0, 1.0, 0.0, -0.0]):
            assert as_text(builder, builder.float_text(np.array(values))) == [
                json.dumps(v) for v in values
            ]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_both_builders_refuse_non_finite_floats(bad):
    for builder in BUILDERS:
        with pytest.raises(ValueError, match="non-finite"):
            builder.float_text(np.array([1.0, bad]))


def composed(builder, ints, floats, flags, strings, group_sizes) -> tuple[bytes, list[int]]:
    """Every builder operation in one line per row, then regrouped: the bytes and
    offsets ``buffer_and_offsets`` gives."""
    n = len(ints)
    table = builder.texts(["[a]", "[b]", "[ü]"])
    line = builder.concat(
        "{",
        builder.int_text(ints),
        ",",
        builder.optional(flags, builder.concat('"f":', builder.float_text(floats))),
        builder.take(table, np.arange(n) % 3),
        ":",
        builder.str_text(np.asarray(strings, dtype=object)),
        builder.bool_text(flags),
        "}\n",
    )
    offsets = np.concatenate(([0], np.cumsum(group_sizes))).astype(np.int64)
    data, starts = builder.buffer_and_offsets(builder.regroup(line, offsets))
    return bytes(data), starts.tolist()


rows = st.integers(0, 40).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(int(INT64.min), int(INT64.max)), min_size=n, max_size=n),
        st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=n, max_size=n),
        st.lists(st.booleans(), min_size=n, max_size=n),
        st.lists(
            st.text(st.characters(exclude_categories=("Cs",)), max_size=6), min_size=n, max_size=n
        ),
        st.lists(st.integers(0, 3), min_size=0, max_size=n + 1).map(
            lambda sizes, n=n: [*sizes, 0] if sum(sizes) > n else [*sizes, n - sum(sizes)]
        ),
    )
)


@settings(max_examples=80, deadline=None)
@given(rows)
def test_both_builders_give_the_same_bytes_and_offsets(case):
    ints, floats, flags, strings, sizes = case
    if sum(sizes) != len(ints):  # groups must cover the rows exactly
        sizes = [len(ints)]
    args = (
        np.array(ints, dtype=np.int64),
        np.array(floats, dtype=np.float64),
        np.array(flags, dtype=bool),
        strings,
        sizes,
    )
    arrow, python = composed(jv.ARROW, *args), composed(jv.PYTHON, *args)
    assert arrow == python
    assert python[1][0] == 0 and python[1][-1] == len(python[0])


def test_empty_and_one_row_columns_are_alike():
    for n in (0, 1):
        args = (
            np.full(n, -3, dtype=np.int64),
            np.full(n, 0.5),
            np.ones(n, dtype=bool),
            ["é"] * n,
            [n],
        )
        assert composed(jv.ARROW, *args) == composed(jv.PYTHON, *args)
    for builder in BUILDERS:
        data, offsets = builder.buffer_and_offsets(builder.int_text(np.zeros(0, np.int64)))
        assert bytes(data) == b"" and offsets.tolist() == [0]


@contextlib.contextmanager
def every_column_by(builder):
    """Within: ``jsonvec.builder`` picks ``builder`` whatever the size."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jv, "builder", lambda rows: builder)
        yield


def test_the_builder_is_picked_by_size_where_the_compiler_picks_pandas():
    assert jv.builder(0) is jv.PYTHON
    assert jv.builder(PANDAS_MIN_ROWS - 1) is jv.PYTHON
    assert jv.builder(PANDAS_MIN_ROWS) is jv.ARROW


def unusual(program: Program, seed: int) -> Program:
    """``program`` with non-ASCII / escaped texts, extreme integers and odd weights (the
    cases where two text builders could part)."""
    rng = np.random.default_rng(seed)
    n = program.n
    names = np.array(STRINGS, dtype=object)
    group = program.column("group", object)  # a matched pair's group name is kept
    renamed = np.array([g if g.startswith("p2p:") else f"{g}é\\" for g in group], dtype=object)
    p = program.with_column("phase", names[rng.integers(0, len(names), n)])
    p = p.with_column("group", renamed)
    p = p.with_column("weight", np.array(FLOATS)[rng.integers(0, len(FLOATS), n)])
    p = p.with_column("latency_ns", rng.integers(INT64.min, INT64.max, n, dtype=np.int64))
    return p.with_column("has_latency", rng.random(n) < 0.5)


def outputs(program: Program) -> tuple:
    """Every byte the serialization and the trace writer give for ``program``."""
    ser = serialize_source(program)
    lines = b"".join(ser.line(i) for i in range(ser.n))
    meta = trace_meta(program, source="test", notes=["é"])
    return (
        lines,
        ser.offsets.tolist(),
        ser.digest(),
        ser.segment(ser.n // 3, ser.n),
        trace_bytes(program, meta),
        trace_bytes(program, meta, lines=True),
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 40),
    skew_known=st.booleans(),
    odd=st.booleans(),
)
def test_a_program_has_the_same_bytes_by_either_builder_and_in_either_form(
    seed, n, skew_known, odd
):
    program = random_program(seed, n, world_size=5, skew_known=skew_known)
    if odd:
        program = unusual(program, seed)
    assert not program.holds_columns
    with every_column_by(jv.ARROW):
        want = outputs(program)
    with every_column_by(jv.PYTHON):
        assert outputs(program) == want
        for text in ("codes", "objects"):
            assert outputs(held_as_columns(program, text)) == want
    assert outputs(held_as_columns(program, "codes")) == want  # the size's own pick


def test_ranks_too_spread_for_a_table_have_the_same_bytes_by_either_builder():
    program = random_program(7, 12, world_size=3)
    members = program.members.copy()
    members["rank"] = (members["rank"] * (source_mod.MAX_RANK_HEADS + 3)).astype(np.int32)
    for skew_known in (True, False):
        wide = program.replace(members=members, skew_known=skew_known, skew_reason="test")
        with every_column_by(jv.ARROW):
            want = outputs(wide)
        with every_column_by(jv.PYTHON):
            assert outputs(wide) == want


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.sampled_from(["b", "a", "é", "Z", "日本", "\U0001f600", ""]), min_size=1, max_size=9
    ),
    st.data(),
)
def test_the_trace_group_list_is_the_pandas_one(groups, data):
    """Each group with members, by id, its distinct member ranks ascending, as
    pandas' drop_duplicates + groupby(sort=True) gives it (ties: repeated ranks)."""
    n = len(groups)
    sizes = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    ranks = np.array(
        data.draw(st.lists(st.integers(0, 4), min_size=sum(sizes), max_size=sum(sizes))),
        dtype=np.int64,
    )
    m_occ = np.repeat(np.arange(n), sizes).astype(np.int64)
    program = random_program(0, n).with_column("group", np.array(groups, dtype=object))
    frame = pd.DataFrame({"group": np.array(groups, dtype=object)[m_occ], "rank": ranks})
    want = [
        {"id": str(g), "ranks": [int(r) for r in sorted(rs)]}
        for g, rs in frame.drop_duplicates(["group", "rank"]).groupby("group", sort=True)["rank"]
    ]
    assert tracefile._group_list(program, m_occ, ranks) == want
    assert tracefile._group_list(held_as_columns(program, "codes"), m_occ, ranks) == want


# a fresh process with pandas and pyarrow imports forbidden serializes a column-form
# program and writes its trace; it prints the digests of what it made
NO_ARROW_RUN = """
import hashlib, importlib.abc, pickle, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("pandas", "pyarrow"):
            raise ImportError("blocked " + name)

sys.meta_path.insert(0, Block())
from tracecanary.compile.source import serialize_source
from tracecanary.compile.tracefile import trace_bytes, trace_meta

program = pickle.loads(sys.stdin.buffer.read())
ser = serialize_source(program)
meta = trace_meta(program, source="test", notes=[])
print(ser.digest(), hashlib.sha256(trace_bytes(program, meta)).hexdigest())
print("pandas" in sys.modules, "pyarrow" in sys.modules)
"""


def test_a_small_column_form_program_is_written_without_pandas_or_pyarrow():
    import hashlib
    import pickle

    program = unusual(random_program(11, 30, world_size=4), 11)
    held = held_as_columns(program, "codes")
    run = subprocess.run(
        [sys.executable, "-c", NO_ARROW_RUN],
        input=pickle.dumps(held),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    digests, imported = run.stdout.decode().splitlines()
    meta = trace_meta(program, source="test", notes=[])
    written = hashlib.sha256(trace_bytes(program, meta)).hexdigest()
    assert digests == f"{serialize_source(program).digest()} {written}"
    assert imported == "False False"


def test_importing_the_text_writers_imports_neither_pandas_nor_pyarrow():
    code = (
        "import sys\n"
        "import tracecanary.compile.jsonvec, tracecanary.compile.source, "
        "tracecanary.compile.tracefile\n"
        "print('pandas' in sys.modules, 'pyarrow' in sys.modules)"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert run.stdout.strip() == "False False"
