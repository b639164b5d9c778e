"""Canonical JSON sizes computed from arrays, without building or serializing documents.

The compiler compares candidate timing streams by the length of their canonical JSON
(``tracecanary.canonical.canonical_json_bytes``, without its trailing newline). Building
a stream of a million Python objects only to measure it costs seconds; these helpers
give the same byte counts from the arrays the streams are made of.

Guarantee: every function returns exactly ``len(canonical_json_bytes(x)) - 1`` for the
``x`` its docstring names (ASCII keys, integers, booleans and null only; canonical JSON
has no whitespace, so key order does not change a length). Pinned down by
tests/test_compile_jsonsize.py on many generated streams.
"""

from __future__ import annotations

import json

import numpy as np

from tracecanary.compile.sequence import Grammar

NULL_LEN = len("null")


def int_len(values: np.ndarray) -> np.ndarray:
    """Length of the decimal text of each int64 value (a minus sign counts)."""
    v = np.asarray(values, dtype=np.int64)
    out = np.ones(v.shape, dtype=np.int64)
    if v.size == 0:
        return out
    if int(v.min()) >= 0:
        mag = v
    else:
        neg = v < 0
        out += neg
        # |v| without overflow at the int64 minimum: -(v + 1) + 1
        mag = np.where(neg, -(v + 1), v).astype(np.uint64) + neg.astype(np.uint64)
    top = int(mag.max())
    power = 10
    while power <= top:  # one pass per digit the largest value has
        out += mag >= power
        power *= 10
    return out


def bool_len(values: np.ndarray) -> np.ndarray:
    """Length of ``true`` / ``false`` per value."""
    return np.where(np.asarray(values, dtype=bool), 4, 5).astype(np.int64)


def member_len(key: str) -> int:
    """Bytes of ``"key":`` (the value and the separating comma not included)."""
    return len(json.dumps(key)) + 1


def object_len(keys_and_values: list[tuple[str, int]]) -> int:
    """Length of an object given each key and the length of its value."""
    if not keys_and_values:
        return 2
    return 2 + sum(member_len(k) + v for k, v in keys_and_values) + (len(keys_and_values) - 1)


def list_len(item_lengths_sum: int, count: int) -> int:
    """Length of a list of ``count`` items whose texts add up to ``item_lengths_sum``."""
    return 2 + int(item_lengths_sum) + max(int(count) - 1, 0)


def grammar_records_len(
    grammar: Grammar, leaf_len: np.ndarray, *, run_key: str, block_key: str
) -> tuple[int, int]:
    """(canonical length, ``sequence.count_records``) of
    ``sequence.grammar_records(grammar, run_key=run_key, block_key=block_key, ...)``
    (top level, ``execute=False``), where ``leaf_len[t]`` is the text length of run
    token t's value as the records write it (an integer, a boolean, a vector...).

    Mirrors ``grammar_records``: maximal stretches of single-value runs become one
    literal block ``{block_key: [...]}``, other runs ``{run_key: v, "repeat": r}``,
    motifs ``{"body": [...], "repeat": r}`` whose body follows the same rules."""
    n_runs = grammar.n_runs
    n_tokens = grammar.n_tokens
    leaf = np.zeros(n_tokens, dtype=np.int64)
    leaf[:n_runs] = np.asarray(leaf_len, dtype=np.int64)
    is_single = np.zeros(n_tokens, dtype=bool)
    is_single[:n_runs] = grammar.run_lengths == 1
    size = np.zeros(n_tokens, dtype=np.int64)
    count = np.ones(n_tokens, dtype=np.int64)
    run_const = 2 + member_len(run_key) + 1 + member_len("repeat")
    size[:n_runs] = run_const + leaf[:n_runs] + int_len(grammar.run_lengths)
    block_const = 2 + member_len(block_key) + 2

    def seq_len(seq: np.ndarray) -> tuple[int, int]:
        if len(seq) == 0:
            return 2, 0
        single = is_single[seq]
        n_single = int(np.count_nonzero(single))
        if n_single:
            starts = np.count_nonzero(single[1:] & ~single[:-1]) + int(single[0])
        else:
            starts = 0
        others = seq[~single]
        items = (
            starts * block_const
            + int(leaf[seq[single]].sum())
            + (n_single - starts)
            + int(size[others].sum())
        )
        records = starts + len(others)
        return list_len(items, records), n_single + int(count[others].sum())

    motif_const = 2 + member_len("body") + 1 + member_len("repeat")
    for m, (children, repeat) in enumerate(grammar.motifs):
        t = n_runs + m
        body_len, body_count = seq_len(np.asarray(children, dtype=np.int64))
        size[t] = motif_const + body_len + len(str(int(repeat)))
        count[t] = 1 + body_count
    return seq_len(np.asarray(grammar.top, dtype=np.int64))
