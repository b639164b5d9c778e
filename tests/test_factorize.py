"""factorize: its numpy implementations (arrays shorter than PANDAS_MIN_ROWS)
give exactly what pandas gives (longer arrays): codes and uniques of ``pd.factorize``,
``pd.unique``, a groupby median; on empty arrays, one element, ties, negative and large
values. And the skew-vector ids fall back to exact vectors where the row hash collides."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from column_form import pandas_from
from hypothesis import given, settings
from hypothesis import strategies as st

from tracecanary import factorize as fz
from tracecanary.compile import sequence, timing

ints = st.lists(
    st.one_of(
        st.integers(-3, 3),
        st.sampled_from([-(1 << 62), -1, 0, 1 << 40, (1 << 62) + 5, np.iinfo(np.int64).max]),
    ),
    max_size=60,
)


@pytest.fixture(params=["numpy", "pandas"])
def side(request, monkeypatch):
    """Run a test once with every array below the threshold, once with every one above."""
    monkeypatch.setattr(fz, "PANDAS_MIN_ROWS", 1 << 62 if request.param == "numpy" else 0)
    return request.param


@settings(max_examples=300, deadline=None)
@given(values=ints)
def test_numpy_factorize_is_pandas_factorize(values):
    array = np.asarray(values, dtype=np.int64)
    codes, uniques = fz._factorize_sorted(array)
    want_codes, want_uniques = pd.factorize(array, sort=False)
    assert codes.dtype == np.int64 and uniques.dtype == np.int64
    assert codes.tolist() == want_codes.tolist()
    assert uniques.tolist() == want_uniques.tolist()
    assert fz.first_rows(codes).tolist() == [values.index(v) for v in uniques.tolist()]


@settings(max_examples=100, deadline=None)
@given(values=ints)
def test_distinct_and_factorize_are_pandas_on_either_side_of_the_threshold(values):
    array = np.asarray(values, dtype=np.int64)
    for rows in (0, 1 << 62):
        with pandas_from(rows):
            assert fz.distinct(array).tolist() == pd.unique(array).tolist()
            codes, uniques = fz.factorize(array)
        assert codes.dtype == np.int64
        assert codes.tolist() == pd.factorize(array)[0].tolist()
        assert uniques.tolist() == pd.factorize(array)[1].tolist()


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.integers(0, 5), st.sampled_from([0, 1, 2, 7, 7, 1e3, 2**53 + 1, 2**59])),
        max_size=60,
    )
)
def test_numpy_group_medians_are_a_pandas_groupby_median(rows):
    groups = np.asarray([g for g, _ in rows], dtype=np.int64)
    values = np.asarray([float(v) for _, v in rows], dtype=np.float64)
    want = pd.Series(values).groupby(groups).median()
    for threshold in (0, 1 << 62):
        with pandas_from(threshold):
            keys, medians = fz.group_medians(groups, values)
        assert keys.tolist() == want.index.tolist()
        assert medians.dtype == np.float64
        assert medians.tobytes() == want.to_numpy(dtype=np.float64).tobytes()  # bit for bit


def test_an_even_group_takes_the_middle_pair_halved_and_an_odd_one_its_middle(side):
    groups = np.array([3, 1, 3, 1, 1, 3, 3], dtype=np.int64)
    values = np.array([4.0, 9.0, 1.0, 5.0, 7.0, 3.0, 10.0])
    keys, medians = fz.group_medians(groups, values)
    assert keys.tolist() == [1, 3] and medians.tolist() == [7.0, 3.5]


def test_the_sequence_grammar_is_the_same_on_either_side_of_the_threshold():
    rng = np.random.default_rng(3)
    x = np.tile(rng.integers(0, 4, 7), 9)
    x[::11] = 99
    grammars = []
    for rows in (0, 1 << 62):
        with pandas_from(rows):
            g = sequence.encode_sequence(x)
        assert np.array_equal(sequence.expand_tokens(g, g.top), x)
        grammars.append((g.run_values.tolist(), g.run_lengths.tolist(), g.motifs, g.top.tolist()))
    assert grammars[0] == grammars[1]
    assert len(grammars[0][3]) < len(x)  # it did find motifs


def _arrays(skew: list[list[int]]) -> timing.TimingArrays:
    sizes = [len(v) for v in skew]
    n = len(skew)
    zeros = np.zeros(n, dtype=np.int64)
    return timing.TimingArrays(
        gap=zeros,
        overlap=zeros,
        has_overlap=zeros.astype(bool),
        latency=zeros,
        has_latency=zeros.astype(bool),
        skew=np.asarray([s for v in skew for s in v], dtype=np.int64),
        member_offsets=np.concatenate(([0], np.cumsum(sizes))).astype(np.int64),
    )


SKEWS = [[0, 5], [0, 5], [3], [0, 5, 1], [3], [], [0, 6], [0, 5], []]


def _exact_ids(vectors):
    first: dict = {}
    return [first.setdefault(tuple(v), len(first)) for v in vectors]


def test_skew_vector_ids_number_the_exact_vectors_in_order_of_first_appearance(side):
    ids, first = timing._skew_vector_ids(_arrays(SKEWS))
    assert ids.tolist() == _exact_ids(SKEWS)
    assert first.tolist() == [0, 2, 3, 5, 6]


def test_a_row_hash_collision_falls_back_to_the_exact_vectors(monkeypatch, side):
    # every vector hashes alike: the ids must still be those of the exact vectors
    monkeypatch.setattr(sequence, "_mix", lambda x: np.zeros(np.shape(x), dtype=np.uint64))
    ids, first = timing._skew_vector_ids(_arrays(SKEWS))
    assert ids.tolist() == _exact_ids(SKEWS)
    assert first.tolist() == [0, 2, 3, 5, 6]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-3, 3) | st.integers(-(2**62), 2**62), max_size=30))
def test_the_distinct_values_are_np_uniques(values):
    """Without np.unique (it imports numpy.ma): empty, one value, ties."""
    array = np.array(values, dtype=np.int64)
    expected = np.unique(array, return_index=True)
    for got, want in zip(fz.sorted_distinct(array, return_index=True), expected, strict=True):
        assert got.dtype == want.dtype and got.tolist() == want.tolist()
    assert fz.sorted_distinct(array).tolist() == expected[0].tolist()
