"""Structure encoding: the program as a sequence over op signatures.

An op signature is (op, bytes, dtype, group, root, phase, stream): everything about an
occurrence except its timing (``Program.signature_rows``). The signature sequence is
encoded exactly by ``tracecanary.compile.sequence`` (runs, then nested periodic motifs)
into records that each carry ``repeat`` (logical repetitions) and ``execute`` (executed
repetitions: equal to ``repeat`` unless reduced execution lowered it):

    {"sig": s, "repeat": r, "execute": r}             one signature r >= 2 times
    {"sigs": [s1, s2, ...], "repeat": 1, "execute": 1} literal signatures, once each
    {"body": [records], "repeat": r, "execute": k}    a motif repeated r times

Reduced execution (``tracecanary.compile.execution``) adds ``executed_reps``,
``whole_reps`` and ``steady_weight`` to a reduced top-level record, and a
``reductions`` list (one entry per reduced instance) to a nested record.

Groups map a group id to its member ranks in rank order; every occurrence of a group
has exactly those members (the compiler refuses a program where they differ).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracecanary.compile import sequence
from tracecanary.errors import InputError
from tracecanary.factorize import first_rows
from tracecanary.program import Program

RUN_KEY = "sig"
BLOCK_KEY = "sigs"


def signature_table(program: Program) -> tuple[np.ndarray, list[dict]]:
    """(signature id per occurrence, signature definitions in first-seen order):
    ``Program.signatures``."""
    return program.signatures()


def group_table(program: Program) -> dict[str, list[int]]:
    """Member ranks of every group; refuses groups whose occurrences differ in members."""
    n = program.n
    group_codes, group_names = program.factorized("group", sort=False)
    sizes = program.column("group_size", np.int64)
    member_occ = program.member_column("occ")  # int32: only counted and indexed
    counts = np.bincount(member_occ, minlength=n) if len(member_occ) else np.zeros(n, np.int64)
    bad = np.flatnonzero(counts != sizes)
    if len(bad):
        i = int(bad[0])
        raise InputError(
            f"occurrence has {int(counts[i])} members but group_size {int(sizes[i])}",
            record=i,
            field="group_size",
        )
    if (sizes < 1).any():
        i = int(np.flatnonzero(sizes < 1)[0])
        raise InputError("occurrence has no members", record=i, field="group_size")
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    ranks = program.member_column("rank")  # int32: only compared
    first_occ = first_rows(group_codes)  # codes number the groups in first-seen order
    groups: dict[str, list[int]] = {}
    canon_offsets = []
    canon_ranks = []
    pos = 0
    for code, o in enumerate(first_occ):
        rk = ranks[offsets[o] : offsets[o + 1]]
        if (np.diff(rk) <= 0).any():
            raise InputError(
                "members are not in strictly increasing rank order", record=int(o), field="members"
            )
        groups[str(group_names[code])] = [int(r) for r in rk]
        canon_offsets.append(pos)
        canon_ranks.append(rk)
        pos += len(rk)
    canon_offsets = np.asarray(canon_offsets, dtype=np.int64)
    canon_flat = np.concatenate(canon_ranks) if canon_ranks else np.zeros(0, np.int64)
    sizes_by_group = np.diff(np.append(canon_offsets, pos))
    if (sizes_by_group[group_codes] != sizes).any():
        i = int(np.flatnonzero(sizes_by_group[group_codes] != sizes)[0])
        raise InputError(
            f"group {group_names[group_codes[i]]!r} appears with different member counts",
            record=i,
            field="group_size",
        )
    expected = canon_flat[member_positions(canon_offsets[group_codes], sizes)]
    if not np.array_equal(expected, ranks):
        j = int(np.flatnonzero(expected != ranks)[0])
        i = int(member_occ[j])
        raise InputError(
            f"group {group_names[group_codes[i]]!r} appears with different member ranks",
            record=i,
            field="members",
        )
    return groups


def member_positions(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Flat indices ``starts[i] + 0..sizes[i]-1`` for every i, concatenated."""
    sizes = np.asarray(sizes, dtype=np.int64)
    total = int(sizes.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    out_offsets = np.cumsum(sizes) - sizes
    # in place: two arrays of the result's length at a time (the result and one repeat)
    out = np.arange(total, dtype=np.int64)
    out -= np.repeat(out_offsets, sizes)
    out += np.repeat(np.asarray(starts, dtype=np.int64), sizes)
    return out


def encode_structure(sig_ids: np.ndarray) -> list[dict]:
    """Exact structure records of a signature-id sequence."""
    grammar = sequence.encode_sequence(sig_ids)
    return sequence.grammar_records(grammar, run_key=RUN_KEY, block_key=BLOCK_KEY, execute=True)


def expand_structure(records: list[dict]) -> np.ndarray:
    """Signature id of every logical occurrence."""
    return sequence.expand_records(records, run_key=RUN_KEY, block_key=BLOCK_KEY)


def structure_length(records: list[dict]) -> int:
    return sequence.records_length(records, BLOCK_KEY)


def record_length(rec: dict) -> int:
    return sequence.record_length(rec, BLOCK_KEY)


def count_structure_records(records: list[dict]) -> int:
    return sequence.count_records(records, BLOCK_KEY)


@dataclass(frozen=True)
class Span:
    """A record's occurrence range: ``reps`` repetitions of ``period`` occurrences
    starting at ``start`` (flat records: period 1); ``body`` holds a motif's records."""

    index: int
    start: int
    period: int
    reps: int
    motif: bool
    body: tuple = ()

    @property
    def stop(self) -> int:
        return self.start + self.period * self.reps


def top_level_spans(records: list[dict], start: int = 0) -> list[Span]:
    """Spans of the records of one level, the first starting at occurrence ``start``."""
    spans = []
    pos = start
    for i, rec in enumerate(records):
        if "body" in rec:
            period = structure_length(rec["body"])
            spans.append(Span(i, pos, period, int(rec["repeat"]), True, tuple(rec["body"])))
        else:
            spans.append(Span(i, pos, 1, record_length(rec), False))
        pos = spans[-1].stop
    return spans
