"""Exact structure encoding: run-length and nested periodic motifs, near-linear."""

from __future__ import annotations

import time

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tracecanary.compile.sequence import encode_sequence, expand_tokens
from tracecanary.compile.structure import (
    count_structure_records,
    encode_structure,
    expand_structure,
    structure_length,
)


@st.composite
def patterned(draw):
    """Literal noise, runs and repeated (possibly nested) motifs, concatenated."""
    parts = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["noise", "run", "motif", "nested"]))
        if kind == "noise":
            parts.append(draw(st.lists(st.integers(0, 5), min_size=1, max_size=8)))
        elif kind == "run":
            parts.append([draw(st.integers(0, 5))] * draw(st.integers(1, 40)))
        elif kind == "motif":
            body = draw(st.lists(st.integers(0, 5), min_size=1, max_size=6))
            parts.append(body * draw(st.integers(1, 12)))
        else:
            inner = draw(st.lists(st.integers(0, 5), min_size=1, max_size=3)) * draw(
                st.integers(2, 5)
            )
            outer = (
                [draw(st.integers(0, 5))] + inner + draw(st.lists(st.integers(0, 5), max_size=3))
            )
            parts.append(outer * draw(st.integers(2, 6)))
    return np.asarray([x for p in parts for x in p], dtype=np.int64)


@settings(max_examples=300, deadline=None)
@given(patterned())
def test_sequence_encoding_expands_back_exactly(x):
    grammar = encode_sequence(x)
    assert np.array_equal(expand_tokens(grammar, grammar.top), x)


@settings(max_examples=200, deadline=None)
@given(patterned())
def test_structure_records_expand_back_and_never_cost_more_records_than_occurrences(x):
    records = encode_structure(x)
    assert np.array_equal(expand_structure(records), x)
    assert structure_length(records) == len(x)
    assert count_structure_records(records) <= len(x) + 1


def test_decode_step_with_inner_repetition_is_one_nested_motif():
    layer_block = [1] * 32 + [2, 3]
    step = [0] * 32 + layer_block * 16 + [4, 5]
    x = np.asarray([7, 8] + step * 100, dtype=np.int64)
    records = encode_structure(x)
    assert records[0] == {"sigs": [7, 8], "repeat": 1, "execute": 1}
    motif = records[1]
    assert motif["repeat"] == 100 and motif["execute"] == 100
    inner = [r for r in motif["body"] if "body" in r]
    assert inner and inner[0]["repeat"] == 16
    assert inner[0]["body"][0] == {"sig": 1, "repeat": 32, "execute": 32}
    assert count_structure_records(records) < 15


def test_motif_encoding_is_near_linear_on_a_million_occurrences():
    rng = np.random.default_rng(0)
    step = np.concatenate([np.repeat(0, 32), [1, 2], np.repeat(3, 4)])
    periodic = np.tile(step, 26_000)
    noisy = periodic.copy()
    noisy[rng.integers(0, len(noisy), 200)] = 9  # a few irregular occurrences
    random = rng.integers(0, 1000, 1_000_000)
    for x in (periodic, noisy, random):
        t0 = time.perf_counter()
        grammar = encode_sequence(x)
        elapsed = time.perf_counter() - t0
        assert elapsed < 15.0, f"{len(x)} tokens took {elapsed:.1f} s"
        assert np.array_equal(expand_tokens(grammar, grammar.top), x)
    assert len(encode_sequence(periodic).top) == 1
