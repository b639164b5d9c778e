"""Program.signature_ids: ids of distinct (op, bytes, dtype, group, root, phase,
stream) tuples in first-seen order and the table of those signatures, the same as a
factorization of the rows as tuples."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracecanary.program import SIGNATURE_COLUMNS, make_program
from tracecanary.synth.examples import decode_like_program, random_program


def _by_tuples(program):
    keys = program.occurrences[list(SIGNATURE_COLUMNS)]
    rows = list(keys.itertuples(index=False, name=None))
    first: dict = {}
    ids = np.array([first.setdefault(r, len(first)) for r in rows], dtype=np.int64)
    return ids, list(first)


def _check(program):
    ids, table = program.signature_ids()
    want_ids, want_rows = _by_tuples(program)
    assert ids.dtype == np.int64
    assert np.array_equal(ids, want_ids)
    assert list(table.itertuples(index=False, name=None)) == want_rows
    assert list(table.columns) == list(SIGNATURE_COLUMNS)
    assert list(table.dtypes) == list(program.occurrences[list(SIGNATURE_COLUMNS)].dtypes)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.integers(1, 400), st.integers(1, 6))
def test_signature_ids_number_distinct_tuples_in_first_seen_order(seed, n, world_size):
    _check(random_program(seed, n, world_size=world_size))


def test_signature_ids_of_a_decode_program():
    _check(decode_like_program(30, layers=4, world_size=4, jitter_ns=100, tail_every=9))


def test_columns_that_only_vary_together_do_not_merge_distinct_signatures():
    # every column has few values, but their combinations are many and interleaved
    rng = np.random.default_rng(7)
    n = 5_000
    ops = np.array(["all_reduce", "all_gather", "broadcast"], dtype=object)
    occ = {
        "op": ops[rng.integers(0, 3, n)],
        "bytes": rng.choice([4, 8, 1 << 40], n),
        "dtype": np.array(["f32", "bf16"], dtype=object)[rng.integers(0, 2, n)],
        "group": np.array(["a", "b", "c", "d"], dtype=object)[rng.integers(0, 4, n)],
        "group_size": np.ones(n, dtype=np.int64),
        "root": rng.integers(-1, 2, n),
        "phase": np.array(["", "x"], dtype=object)[rng.integers(0, 2, n)],
        "stream": np.array(["", "s1", "s2"], dtype=object)[rng.integers(0, 3, n)],
        "gap_ns": np.zeros(n, dtype=np.int64),
    }
    members = {"occ": np.arange(n), "rank": np.zeros(n, dtype=np.int64), "skew_ns": np.zeros(n)}
    program = make_program(occ, members, world_size=1, skew_known=True)
    _check(program)
    assert len(program.signature_ids()[1]) > 500


def test_no_occurrences_give_no_signatures():
    program = random_program(1, 5)
    empty = type(program)(program.occurrences.iloc[:0], program.members.iloc[:0], 4, True)
    ids, table = empty.signature_ids()
    assert len(ids) == 0 and len(table) == 0
    assert list(table.columns) == list(SIGNATURE_COLUMNS)
    assert isinstance(table, pd.DataFrame)
