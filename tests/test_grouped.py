"""tracecanary.grouped equals, bit for bit, the pandas group operations it replaces."""

from __future__ import annotations

import subprocess
import sys
from contextlib import contextmanager
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracecanary import grouped
from tracecanary.grouped import Grouping, grouped_cummax, grouped_cumsum
from tracecanary.sim.engine import HASHED_FROM_CHANNELS, channel_cummax, channel_fifo

INT64 = np.iinfo(np.int64)

# values: nanosecond-like (+-1e15, negative slacks included), or anything in int64
value_ranges = st.sampled_from([(-(10**15), 10**15), (0, 10**6), (INT64.min, INT64.max)])
code_dtypes = st.sampled_from([np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32])


@st.composite
def grouped_arrays(draw, max_n: int = 3000):
    """(values int64, group codes) with 0, 1, a few or many distinct codes, in various
    integer dtypes and spans (including spans past 2**16 and 2**32)."""
    n = draw(st.integers(0, max_n))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    lo, hi = draw(value_ranges)
    values = rng.integers(lo, hi, size=n, dtype=np.int64, endpoint=True)
    dtype = draw(code_dtypes)
    info = np.iinfo(dtype)
    distinct = draw(st.sampled_from([1, 2, 16, 300, 5000]))
    spread = draw(st.sampled_from(["dense", "wide"]))
    if spread == "dense":
        pool = np.arange(min(distinct, int(info.max) - max(int(info.min), -5) + 1))
        pool = pool + max(int(info.min), -5)
    else:
        pool = rng.integers(int(info.min), int(info.max), size=distinct, endpoint=True)
    group = rng.choice(pool, size=n).astype(dtype)
    if draw(st.booleans()) and n:  # long runs of one code, as in a replayed segment
        group = np.sort(group, kind="stable")
    return values, group


# rows per chunk: the default (one chunk for these sizes) or small ones, so that groups
# are carried from chunk to chunk as in a 10M-row replay
chunk_sizes = st.sampled_from([None, 1, 7, 64, 1000])


@contextmanager
def chunk_rows(rows):
    if rows is None:
        yield
        return
    with (
        mock.patch.object(grouped, "_CHUNK_ROWS", rows),
        mock.patch.object(grouped, "_ROWS_PER_RUN", 1),
    ):
        yield


def pandas_cumsum(values, group):
    return pd.Series(values).groupby(group, sort=False).cumsum().to_numpy(np.int64)


def pandas_cummax(values, group):
    return pd.Series(values).groupby(group, sort=False).cummax().to_numpy(np.int64)


def pandas_channel_fifo(ready_ns, service_ns, channel):
    """sim.engine.channel_fifo as it was with pandas."""
    if ready_ns.size == 0:
        return ready_ns.copy()
    by_channel = pd.Series(service_ns, copy=False).groupby(channel, sort=False)
    prior = by_channel.cumsum().to_numpy(np.int64) - service_ns
    slack = pd.Series(ready_ns - prior, copy=False).groupby(channel, sort=False).cummax()
    return prior + slack.to_numpy(np.int64)


NONE = INT64.min


def pandas_previous_ready(ready, channel):
    """compile.junctions._previous_ready as it was with pandas."""
    running = pd.Series(ready).groupby(channel, sort=False).cummax().to_numpy(np.int64)
    order = np.argsort(channel, kind="stable")
    by_channel = running[order]
    before = np.r_[NONE, by_channel[:-1]]
    ch = channel[order]
    before[np.r_[True, ch[1:] != ch[:-1]]] = NONE
    previous = np.empty_like(before)
    previous[order] = before
    return previous


@pytest.mark.parametrize(
    "ours, pandas_op",
    [(grouped_cumsum, pandas_cumsum), (grouped_cummax, pandas_cummax)],
    ids=["cumsum", "cummax"],
)
@settings(max_examples=300, deadline=None)
@given(grouped_arrays(), chunk_sizes)
def test_grouped_running_sum_and_max_equal_pandas_groupby_bit_for_bit(ours, pandas_op, data, rows):
    values, group = data
    with chunk_rows(rows):
        got = ours(values, group)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, pandas_op(values, group))


@settings(max_examples=300, deadline=None)
@given(grouped_arrays(), st.integers(0, 2**32 - 1), chunk_sizes)
def test_queue_starts_equal_the_pandas_channel_fifo(data, seed, rows):
    ready, channel = data
    service = np.random.default_rng(seed).integers(0, 10**9, size=ready.size)
    with chunk_rows(rows):
        got = Grouping.by(channel).queue_starts(ready, service)
    np.testing.assert_array_equal(got, pandas_channel_fifo(ready, service, channel))


@settings(max_examples=300, deadline=None)
@given(grouped_arrays(), chunk_sizes)
def test_previous_max_equals_the_pandas_previous_ready(data, rows):
    ready, channel = data
    with chunk_rows(rows):
        got = Grouping.by(channel).previous_max(ready, NONE)
    if ready.size == 0:  # the pandas version gave one stray row here (never called so)
        assert got.size == 0
        return
    np.testing.assert_array_equal(got, pandas_previous_ready(ready, channel))


@settings(max_examples=200, deadline=None)
@given(grouped_arrays(), st.integers(0, 2**32 - 1), chunk_sizes)
def test_pair_grouping_equals_pandas_duplicated_and_sorted_groupby_max(data, seed, rows):
    ready, channel = data
    rng = np.random.default_rng(seed)
    segment = np.sort(rng.integers(0, rng.integers(1, 50), size=ready.size))
    pairs = pd.DataFrame({"segment": segment, "channel": channel, "ready": ready})
    first = ~pairs.duplicated(["segment", "channel"]).to_numpy()
    latest = pairs.groupby(["segment", "channel"], sort=True)["ready"].max()

    with chunk_rows(rows):
        grouping = Grouping.by(segment, channel)
    np.testing.assert_array_equal(grouping.first_mask(), first)
    firsts = grouping.first_positions()
    np.testing.assert_array_equal(np.sort(firsts), np.flatnonzero(first))
    np.testing.assert_array_equal(segment[firsts], latest.index.get_level_values(0))
    np.testing.assert_array_equal(channel[firsts], latest.index.get_level_values(1))
    np.testing.assert_array_equal(grouping.max(ready), latest.to_numpy(np.int64))
    assert grouping.groups == len(latest)


def test_cumsum_wraps_modulo_2_64_exactly_like_pandas():
    values = np.array([2**62, 2**62, 2**62, -5, INT64.max, INT64.max], dtype=np.int64)
    for group in ([0, 0, 0, 1, 1, 1], [0, 1, 0, 1, 0, 1], [0] * 6):
        group = np.array(group)
        np.testing.assert_array_equal(grouped_cumsum(values, group), pandas_cumsum(values, group))


def test_many_groups_take_the_vectorized_paths_and_stay_exact():
    rng = np.random.default_rng(3)
    n = 200_000
    for distinct in (2_000, 150_000):
        group = rng.integers(0, distinct, size=n)
        values = rng.integers(-(10**15), 10**15, size=n)
        np.testing.assert_array_equal(grouped_cummax(values, group), pandas_cummax(values, group))
        np.testing.assert_array_equal(grouped_cumsum(values, group), pandas_cumsum(values, group))
    # a value range too wide for offsets between 5000 groups: the per-group loop
    group = rng.integers(0, 5_000, size=n)
    values = rng.integers(INT64.min, INT64.max, size=n, endpoint=True)
    np.testing.assert_array_equal(grouped_cummax(values, group), pandas_cummax(values, group))


def test_pair_keys_too_wide_for_one_int64_code_fall_back_to_a_lexicographic_sort():
    rng = np.random.default_rng(5)
    a = rng.choice(np.array([INT64.min, 0, INT64.max]), size=500)
    b = rng.choice(np.array([INT64.min, -1, INT64.max]), size=500)
    values = rng.integers(-(10**15), 10**15, size=500)
    frame = pd.DataFrame({"a": a, "b": b, "v": values})
    latest = frame.groupby(["a", "b"], sort=True)["v"].max()
    grouping = Grouping.by(a, b)
    np.testing.assert_array_equal(grouping.first_mask(), ~frame.duplicated(["a", "b"]))
    np.testing.assert_array_equal(a[grouping.first_positions()], latest.index.get_level_values(0))
    np.testing.assert_array_equal(grouping.max(values), latest.to_numpy(np.int64))


def test_inputs_are_left_unchanged():
    values = np.array([5, -3, 9, 1], dtype=np.int64)
    group = np.array([1, 0, 1, 0], dtype=np.int32)
    keep_values, keep_group = values.copy(), group.copy()
    grouped_cumsum(values, group)
    grouped_cummax(values, group)
    grouped_cummax(values, np.zeros(4, dtype=np.int64))  # one group: no sort, still a copy
    np.testing.assert_array_equal(values, keep_values)
    np.testing.assert_array_equal(group, keep_group)


def test_empty_input_gives_empty_int64():
    for fn in (grouped_cumsum, grouped_cummax):
        out = fn(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32))
        assert out.dtype == np.int64 and out.size == 0
    grouping = Grouping.by(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    assert grouping.groups == 0 and grouping.max(np.zeros(0, dtype=np.int64)).size == 0
    assert grouping.first_mask().size == 0


def test_uint64_and_float_group_keys_are_refused():
    with pytest.raises(TypeError):
        Grouping.by(np.zeros(3, dtype=np.uint64))
    with pytest.raises(TypeError):
        Grouping.by(np.zeros(3))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.uint64, object])
def test_non_integer_values_are_refused_not_truncated(dtype):
    group = np.array([0, 1, 0], dtype=np.int32)
    values = np.array([1.5, 2.7, 3.9]).astype(dtype)
    grouping = Grouping.by(group)
    pairs = Grouping.by(group, group)
    for call in (
        lambda: grouped_cumsum(values, group),
        lambda: grouped_cummax(values, group),
        lambda: grouping.previous_max(values, 0),
        lambda: grouping.queue_starts(values, np.ones(3, dtype=np.int64)),
        lambda: grouping.queue_starts(np.ones(3, dtype=np.int64), values),
        lambda: pairs.max(values),
    ):
        with pytest.raises(TypeError, match="must be integers"):
            call()
    with pytest.raises(TypeError):
        grouping.previous_max(np.ones(3, dtype=np.int64), 0.5)


def test_integer_values_of_any_width_and_booleans_are_accepted():
    group = np.array([0, 1, 0], dtype=np.int32)
    for values in (np.array([1, 2, 3], dtype=np.int8), np.array([1, 2, 3], dtype=np.uint32)):
        np.testing.assert_array_equal(grouped_cumsum(values, group), [1, 2, 4])
    np.testing.assert_array_equal(grouped_cumsum(np.array([True, True, True]), group), [1, 1, 2])


def test_importing_grouped_does_not_import_pandas():
    code = "import sys, tracecanary.grouped; print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("channels", [3, HASHED_FROM_CHANNELS - 1, HASHED_FROM_CHANNELS, 2000])
def test_channel_fifo_gives_the_same_starts_whether_it_sorts_or_hashes_the_channels(channels):
    rng = np.random.default_rng(channels)
    n = 20_000
    channel = rng.integers(0, channels, n).astype(np.int32)
    channel[:channels] = np.arange(channels)  # every code occurs
    ready = np.cumsum(rng.integers(0, 3_000, n)) + rng.integers(0, 500, n)
    service = rng.integers(1, 10_000, n)
    starts = channel_fifo(ready, service, channel)
    sorted_starts = Grouping.by(channel).queue_starts(ready, service)
    np.testing.assert_array_equal(starts, sorted_starts)
    np.testing.assert_array_equal(
        channel_cummax(starts - ready, channel), grouped_cummax(starts - ready, channel)
    )
