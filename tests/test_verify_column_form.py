"""verify-behavior and verify-commitments read the source through the Program's accessors:
a source held as column arrays (``Program.from_columns``, text as ``TextColumn`` or as
object arrays of str, what the loader gives a small trace) is judged as the same source
held as DataFrames is, mismatch for mismatch and byte for byte, and the verifier's own
code calls neither pandas nor pyarrow on it (nor builds its DataFrames).

Text columns are compared in two ways (``verify.text_rows``): Arrow for a DataFrame-held
source, numpy codes for a column-form one; ``test_text_rows_*`` pins them to the same
rows, non-ASCII text, empty text, repeated literals, empty and one-row columns included."""

from __future__ import annotations

import sys
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from column_form import held_as_columns
from hypothesis import given, settings
from hypothesis import strategies as st
from test_commitments_chunked import CASES, _case, _fingerprint

from tracecanary.canonical import canonical_json_bytes
from tracecanary.compile.budget import parse_budget
from tracecanary.compile.canary import compile_program
from tracecanary.compile.source import serialize_source
from tracecanary.program import Program, TextColumn
from tracecanary.sim.backends import load_backends
from tracecanary.synth.examples import decode_like_program, random_program
from tracecanary.verify import commitments
from tracecanary.verify.behavior import load_tolerances, verify_behavior
from tracecanary.verify.commitments import verify_commitments
from tracecanary.verify.text_rows import TextRows, arrow_differs, text_rows

TEXT_FORMS = ("codes", "objects")


def _with_text(program: Program, col: str, rows: dict[int, str]) -> Program:
    """``program`` (DataFrame-held) with the text of ``col`` replaced in ``rows``."""
    occ = program.occurrences.copy()
    values = occ[col].to_numpy(dtype=object).copy()
    for i, text in rows.items():
        values[i] = text
    occ[col] = pd.array(values, dtype="str")
    return Program(
        occ, program.members, program.world_size, program.skew_known, program.skew_reason
    )


# --- commitments: the pinned cases, and text changed in the source ----------------------


@pytest.mark.parametrize("chunk", [None, 1])
@pytest.mark.parametrize("text", TEXT_FORMS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_each_pinned_case_gives_its_mismatches_on_a_column_form_source(
    name, text, chunk, monkeypatch
):
    source, canary = _case(name)
    if chunk is not None:
        monkeypatch.setattr(commitments, "CHUNK_MEMBERS", chunk)
    assert _fingerprint(verify_commitments(held_as_columns(source, text), canary)) == CASES[name][1]


def _source_text_changes() -> list[tuple[str, str, dict[int, str]]]:
    return [
        ("group", "the last row", {839: "tp:0-1"}),
        ("op", "non-ASCII text", {17: "custom:ünï☃"}),
        ("phase", "empty text", {5: ""}),
        ("stream", "two rows, the first named", {400: "s:x", 3: "s:y"}),
        ("dtype", "the first row", {0: "float64"}),
    ]


@pytest.mark.parametrize("text", TEXT_FORMS)
@pytest.mark.parametrize(("col", "what", "rows"), _source_text_changes())
def test_text_changed_in_the_source_is_named_alike_in_both_forms(col, what, rows, text):
    original = decode_like_program(120, layers=6, world_size=4, jitter_ns=4_000, tail_every=40)
    canary = compile_program(original, budget=parse_budget("gap=5us,latency=5us"))
    frames = _with_text(original, col, rows)
    expected = verify_commitments(frames, canary)
    first = min(
        i for i in rows if frames.occurrences[col].iloc[i] != original.occurrences[col].iloc[i]
    )
    named = [m for m in expected if m["segment"].startswith("occurrence ")]
    assert named == [
        {
            "segment": f"occurrence {first} field {col}",
            "expected": original.occurrences[col].iloc[first],
            "found": rows[first],
        }
    ]
    for chunk in (commitments.CHUNK_MEMBERS, 1, 7):
        try:
            saved, commitments.CHUNK_MEMBERS = commitments.CHUNK_MEMBERS, chunk
            assert verify_commitments(held_as_columns(frames, text), canary) == expected
        finally:
            commitments.CHUNK_MEMBERS = saved


def test_repeated_literals_in_a_source_text_column_are_one_text():
    """A ``TextColumn`` may name one text by two literals: rows stay equal to the canary's."""
    program = random_program(5, 60)
    canary = compile_program(program)
    held = held_as_columns(program)
    op = held.raw_column("op")
    doubled = TextColumn(
        np.where(np.arange(len(op)) % 2 == 1, op.codes + len(op.literals), op.codes),
        op.literals + op.literals,
    )
    twin = held.with_column("op", doubled)
    assert verify_commitments(twin, canary) == verify_commitments(program, canary) == []


# --- text rows: numpy codes against Arrow ----------------------------------------------

_TEXTS = st.sampled_from(["", "a", "all_reduce", "ünï", "☃", "a\x00b", "A", "a "])


@settings(max_examples=150, deadline=None)
@given(
    canary_literals=st.lists(_TEXTS, min_size=1, max_size=6),
    source_literals=st.lists(_TEXTS, min_size=1, max_size=6),
    n=st.integers(0, 40),
    data=st.data(),
)
def test_text_rows_give_the_rows_arrow_gives(canary_literals, source_literals, n, data):
    codes = np.array(
        data.draw(st.lists(st.integers(0, len(canary_literals) - 1), min_size=n, max_size=n)),
        dtype=np.int64,
    )
    source_codes = np.array(
        data.draw(st.lists(st.integers(0, len(source_literals) - 1), min_size=n, max_size=n)),
        dtype=np.int64,
    )
    lo = data.draw(st.integers(0, n))
    hi = data.draw(st.integers(lo, n))
    source = TextColumn(source_codes, tuple(source_literals))
    canary_text = np.array(canary_literals, dtype=object)[codes]
    arrow = arrow_differs(
        pd.Series(pd.array(canary_text[lo:hi], dtype="str")),
        pd.Series(pd.array(source.values()[lo:hi], dtype="str")),
    )
    for held in (source, source.values()):
        rows = TextRows(held, canary_literals)
        got = rows.differs(lo, hi, codes[lo:hi])
        assert got.dtype == bool and got.shape == (hi - lo,)
        assert got.tolist() == arrow.tolist()
        assert [rows.source_value(i) for i in range(n)] == source.values().tolist()


def test_text_rows_are_arrows_only_where_the_source_holds_columns_of_str():
    program = random_program(1, 10)
    literals = [s["op"] for s in compile_program(program)["signatures"]]
    assert text_rows(program, "op", literals, 4) is None  # DataFrames: Arrow
    for text in TEXT_FORMS:
        held = held_as_columns(program, text)
        assert isinstance(text_rows(held, "op", literals, 4), TextRows)
        assert text_rows(held, "op", [*literals, 7], 4) is None  # not text: pandas decides
    values = held_as_columns(program, "objects").column("op").copy()
    values[9] = None
    odd = held_as_columns(program, "objects").with_column("op", values)
    assert text_rows(odd, "op", literals, 4) is None
    assert held.holds_columns and odd.holds_columns


# --- verify_behavior: the document, and no pandas from the verifier ---------------------


def _requester(frame) -> str:
    """The module of the nearest tracecanary frame at or above ``frame`` that is not the
    Program's own (whose code asked the Program for what it read)."""
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith("tracecanary.") and name != "tracecanary.program":
            return name
        frame = frame.f_back
    return ""


def _calls_into_pandas(run) -> Counter:
    """``run()``, and the lines of tracecanary that called into pandas or pyarrow
    meanwhile for the verifier or the simulator (directly, or through the Program); the
    compiler's code (other stages', tested there) is not counted."""
    sites: Counter = Counter()
    watched = ("tracecanary.verify", "tracecanary.sim")

    def profile(frame, event, arg):
        if event == "call":
            module, caller = frame.f_globals.get("__name__", ""), frame.f_back
        elif event == "c_call":
            owner = getattr(arg, "__self__", None)
            module = getattr(arg, "__module__", None) or (
                type(owner).__module__ if owner is not None else ""
            )
            caller = frame
        else:
            return
        if caller is not None and module.startswith(("pandas", "pyarrow")):
            name = caller.f_globals.get("__name__", "")
            if name.startswith("tracecanary.") and _requester(caller).startswith(watched):
                sites[f"{name}:{caller.f_lineno}"] += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return sites


@pytest.mark.parametrize("text", TEXT_FORMS)
@pytest.mark.parametrize(
    "compile_args",
    [
        {},
        {"budget": parse_budget("skew=2us,overlap=5us,gap=5us,latency=5us")},
        {"budget": parse_budget("gap=2us"), "execution_policy": {"max_executed_repeats": 1}},
        {"budget": parse_budget("gap=30,latency=30"), "prefix": 150},
    ],
    ids=["lossless", "bounded", "reduced", "prefix"],
)
def test_verify_behavior_of_a_column_form_source_is_the_document_of_its_frames(compile_args, text):
    frames = decode_like_program(60, layers=4, world_size=4, jitter_ns=3_000, tail_every=30)
    canary = compile_program(frames, **compile_args)
    backends, tolerances = load_backends(None), load_tolerances(None)
    kwargs = {"source_digest": "s", "canary_digest": "c"}
    expected = verify_behavior(frames, canary, backends, tolerances, **kwargs)
    held = held_as_columns(frames, text)
    # the source's serialization is compile.source's (the same bytes from either form,
    # tests/test_compile_source.py): made here from the frames, so that what is watched
    # is the verifier's own reading of the Program
    serialization = serialize_source(frames)
    serialization.program = held
    found: dict = {}

    def run():
        found["doc"] = verify_behavior(
            held, canary, backends, tolerances, serialization=serialization, **kwargs
        )

    assert _calls_into_pandas(run) == Counter()
    assert held.holds_columns  # no DataFrame was built of the source
    assert canonical_json_bytes(found["doc"]) == canonical_json_bytes(expected)
    assert expected["statuses"]["commitments"] == "verified"
