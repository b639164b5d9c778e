"""How much of a program's signature order repeats, and what hides the repetition.

Reduced execution (``tracecanary.compile.execution``) can only skip repetitions of
repeated records; occurrences outside them always execute. ``repetition_profile``
measures the share of occurrences that lie in repeated records three ways, so a search
log can say why a reduction executes no fewer:

* ``repeated``: in the program's own signature order (what the compiler encodes);
* ``repeated_without_stream``: the same order with ``stream`` left out of the
  signature (a stream that alternates from step to step while everything else repeats,
  as per-thread streams do where a pool of threads takes turns; the Kineto importer
  names a gloo event's stream by its process group for that reason);
* ``repeated_within_groups``: each group's own order encoded separately (concurrent
  groups whose collectives interleave differently from step to step hide a motif that
  every group repeats).

Guarantees: every figure counts occurrences (0..n) exactly as ``encode_structure``
would encode that order; nothing here changes a canary. Cost: three encodings of the
signature order (each O(n log n)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracecanary.compile.structure import encode_structure, record_length
from tracecanary.factorize import factorize
from tracecanary.program import OCCURRENCE_COLUMNS, SIGNATURE_COLUMNS, Program

HIDDEN_FACTOR = 1.5  # another order repeats this much more: it names what hides the motif


def repeated_occurrences(records: list[dict]) -> int:
    """Occurrences that lie inside a record of ``repeat`` >= 2, at any depth."""
    total = 0
    for rec in records:
        if int(rec["repeat"]) >= 2:
            total += record_length(rec)
        elif "body" in rec:
            total += repeated_occurrences(rec["body"])
    return total


def _encoded(ids: np.ndarray) -> tuple[int, int]:
    """(top-level records, occurrences in repeated records) of one signature order."""
    if len(ids) == 0:
        return 0, 0
    codes, _ = factorize(ids)
    records = encode_structure(codes)
    return len(records), repeated_occurrences(records)


@dataclass(frozen=True)
class RepetitionProfile:
    occurrences: int
    records: int  # top-level records of each order (within groups: summed)
    records_without_stream: int
    records_within_groups: int
    repeated: int
    repeated_without_stream: int
    repeated_within_groups: int
    order: str = "time"  # the program's occurrence order

    def obstacle(self) -> str:
        """One sentence: how the order encodes and, where another order encodes in
        markedly fewer records or repeats markedly more, what hides the motif."""
        n = max(self.occurrences, 1)
        text = (
            f"the signature order encodes as {self.records} top-level records, "
            f"{self.repeated} of {self.occurrences} occurrences ({self.repeated / n:.0%}) "
            "in repeated records"
        )
        hidden = []
        if (
            self.records_without_stream * HIDDEN_FACTOR < self.records
            or self.repeated_without_stream > HIDDEN_FACTOR * self.repeated
        ):
            hidden.append(
                f"without the stream in the signature: "
                f"{self.records_without_stream} records, "
                f"{self.repeated_without_stream / n:.0%} repeated"
            )
        if (
            self.records_within_groups * HIDDEN_FACTOR < self.records
            or self.repeated_within_groups > HIDDEN_FACTOR * self.repeated
        ):
            hidden.append(
                f"each group's own order: {self.records_within_groups} records, "
                f"{self.repeated_within_groups / n:.0%} repeated (concurrent groups "
                "interleave differently from step to step"
                + (
                    "; --order canonical orders them by structure, not timing)"
                    if self.order == "time"
                    else ")"
                )
            )
        return text + ("; " + "; ".join(hidden) if hidden else "")


def repetition_profile(program: Program) -> RepetitionProfile:
    """The program's ``RepetitionProfile`` (see the module docstring)."""
    ids, _ = program.signature_rows()
    without_stream = np.zeros(program.n, dtype=np.int64)
    for name in (c for c in SIGNATURE_COLUMNS if c != "stream"):
        if OCCURRENCE_COLUMNS[name] == "str":
            codes, uniques = program.factorized(name, sort=False)
        else:
            codes, uniques = factorize(program.column(name))
        # a bijection of the tuples so far: the key stays below n^2
        without_stream = factorize(without_stream * len(uniques) + codes)[0]
    group_codes, _ = program.factorized("group", sort=True)
    by_group = np.argsort(group_codes, kind="stable")  # each group's rows in order
    bounds = np.searchsorted(group_codes[by_group], np.arange(int(group_codes.max(initial=-1)) + 2))
    per_group = [_encoded(ids[by_group[a:b]]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    own, no_stream = _encoded(ids), _encoded(without_stream)
    return RepetitionProfile(
        occurrences=int(program.n),
        records=own[0],
        records_without_stream=no_stream[0],
        records_within_groups=sum(r for r, _ in per_group),
        repeated=own[1],
        repeated_without_stream=no_stream[1],
        repeated_within_groups=sum(x for _, x in per_group),
        order=program.occurrence_order,
    )
