"""Reading and validating canary documents (``tracecanary.canary/v1``).

``validate_canary`` checks a document against schemas/canary.schema.json. A lossless
canary of a large trace holds lists of millions of numbers, which a JSON Schema
validator walks element by element far too slowly, so validation runs on a
*skeleton* (``tracecanary.formats.skeleton``): every list longer than ``SKELETON_MIN``
whose items are all scalars (or all lists of scalars) is replaced by more than
``SKELETON_MIN`` of its items chosen so that every keyword the schemas put on such lists
(item type, string patterns and enums, number bounds, ``minItems``/``maxItems``,
``uniqueItems``) decides the skeleton exactly as the full list: every distinct string,
the extreme numbers, a float with a fraction, a repeated value. Everything else (every
dict, every short list) is validated in full.
Semantic checks that a schema cannot express (lengths add up, ranges partition the
program) happen in ``expand_canary``.

``check_canary_limits`` runs before anything is expanded: it computes, with Python
integers from the records alone (no array is allocated), the logical occurrences the
structure expands to (motif repeat counts multiply through nesting), the member events
they carry, and the length of every timing and flag stream, and refuses (exit 2,
``ResourceLimitExceeded`` naming the field) a canary over the resource policy
(``max_occurrences``, ``max_events``, ``max_ranks``, ``max_message_bytes``) or one whose
streams do not cover exactly the stated occurrences. A canary whose motif weights
claim 10^12 occurrences is refused here in microseconds.
"""

from __future__ import annotations

import os
from typing import Any

from tracecanary.errors import InputError
from tracecanary.formats.ids import CANARY_FORMAT
from tracecanary.formats.schemas import validate
from tracecanary.formats.skeleton import skeleton
from tracecanary.formats.vocab import OP_RE
from tracecanary.limits import Limits, check_number_range, current_limits, load_json


def validate_canary(doc: Any, *, file: str | None = None, limits: Limits | None = None) -> None:
    """Raise SchemaError (exit 2) naming the first violation's field path, or
    ResourceLimitExceeded / InputError from ``check_canary_limits``."""
    if not isinstance(doc, dict) or doc.get("format") != CANARY_FORMAT:
        raise InputError(f"not a {CANARY_FORMAT} document", file=file, field="format")
    validate(skeleton(doc), "canary", file=file or "canary")
    check_canary_limits(doc, limits or current_limits(), file=file)


def declared_order(doc: dict) -> str:
    """The order a canary's occurrences (and so its source's) are in:
    ``source.occurrence_order``, "time" where absent. A reader of the source loads it in
    this order (``load_program(..., order=declared_order(canary))``)."""
    return str(doc["source"].get("occurrence_order", "time"))


def load_canary(path: str | os.PathLike) -> dict:
    """Parse (under the resource limits) and validate a canary file."""
    limits = current_limits()
    doc = load_json(path, limits)
    validate_canary(doc, file=str(path), limits=limits)
    return doc


def records_length(records: list, block_key: str) -> int:
    """Logical length of run / block / motif records, as a Python integer (exact, no
    overflow, nothing materialized). Recursion depth is bounded by the JSON depth limit."""
    total = 0
    for rec in records:
        if block_key in rec:
            total += len(rec[block_key])
        elif "body" in rec:
            total += int(rec["repeat"]) * records_length(rec["body"], block_key)
        else:
            total += int(rec["repeat"])
    return total


def _member_events(records: list, sizes: list[int]) -> int:
    """Member events of structure records, ``sizes[sig]`` members per occurrence."""
    total = 0
    for rec in records:
        if "sigs" in rec:
            total += sum(sizes[s] if 0 <= s < len(sizes) else 0 for s in rec["sigs"])
        elif "body" in rec:
            total += int(rec["repeat"]) * _member_events(rec["body"], sizes)
        else:
            sig = rec["sig"]
            total += int(rec["repeat"]) * (sizes[sig] if 0 <= sig < len(sizes) else 0)
    return total


def _check_stream_length(
    records: list, block_key: str, want: int, field: str, limits: Limits, file: str | None
) -> None:
    length = records_length(records, block_key)
    limits.check("max_occurrences", length, what=f"{field} logical length", file=file, field=field)
    if length != want:
        raise InputError(f"{field} covers {length} occurrences, not {want}", file=file, field=field)


def check_canary_limits(doc: dict, limits: Limits, *, file: str | None = None) -> None:
    """Refuse, before any expansion, a (schema-valid) canary over the resource policy or
    whose streams do not cover its stated occurrences (see the module docstring)."""
    check_number_range(doc, limits.max_time_ns, limit_name="max_time_ns", file=file)
    structure = doc["structure"]
    n = int(structure["occurrences"])
    limits.check(
        "max_occurrences", n, what="structure.occurrences", file=file, field="structure.occurrences"
    )
    length = records_length(structure["records"], "sigs")
    limits.check(
        "max_occurrences",
        length,
        what="occurrences the structure records (motif repeat counts) expand to",
        file=file,
        field="structure.records",
    )
    if length != n:
        raise InputError(
            f"structure records expand to {length} occurrences, not {n}",
            file=file,
            field="structure.records",
        )
    source = doc["source"]
    limits.check("max_ranks", int(source["world_size"]), file=file, field="source.world_size")
    world = int(source["world_size"])
    for gid, ranks in doc["groups"].items():
        limits.check("max_ranks", len(ranks), what=f"group {gid!r} size", file=file, field="groups")
        if any(b <= a for a, b in zip(ranks, ranks[1:], strict=False)) or ranks[-1] >= world:
            raise InputError(
                f"group {gid[:100]!r} must list ranks below world_size {world} in increasing order",
                file=file,
                field="groups",
            )
    for i, sig in enumerate(doc["signatures"]):
        limits.check(
            "max_message_bytes", int(sig["bytes"]), file=file, record=i, field="signatures.bytes"
        )
        # what a native trace event could not hold, a canary cannot expand to
        if not OP_RE.match(sig["op"]):
            raise InputError(
                f"unknown op {sig['op'][:100]!r}", file=file, record=i, field="signatures.op"
            )
        if not sig["dtype"]:
            raise InputError(
                "dtype must not be empty", file=file, record=i, field="signatures.dtype"
            )
    groups = doc["groups"]
    sizes = [len(groups.get(sig["group"], ())) for sig in doc["signatures"]]
    members = _member_events(structure["records"], sizes)
    limits.check(
        "max_events", members, what="member events of the expansion", file=file, field="groups"
    )
    measured = {}
    for name, stream in doc["timing"].items():
        if stream is None:
            continue
        field = f"timing.{name}"
        if "measured" in stream:
            _check_stream_length(stream["measured"], "values", n, f"{field}.measured", limits, file)
            measured[name] = True
        if stream["encoding"] == "exact":
            length = records_length(stream["values"], "values")
            limits.check(
                "max_occurrences", length, what=f"{field} logical length", file=file, field=field
            )
            if name not in measured and length != n:
                raise InputError(
                    f"{field} covers {length} occurrences, not {n}", file=file, field=field
                )
            if length > n:
                raise InputError(
                    f"{field} holds {length} values for {n} occurrences", file=file, field=field
                )
        else:
            for k, itv in enumerate(stream["intervals"]):
                if not 0 <= int(itv["start"]) < int(itv["stop"]) <= n:
                    raise InputError(
                        f"interval [{itv['start']}, {itv['stop']}) is not inside [0, {n})",
                        file=file,
                        record=k,
                        field=f"{field}.intervals",
                    )
    _check_stream_length(doc["flags"]["tail"], "values", n, "flags.tail", limits, file)
