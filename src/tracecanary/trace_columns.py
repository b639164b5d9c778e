"""A native trace's JSON document read straight into checked numpy columns: how
``load_program`` reads a small trace, with no Arrow and no normalized table on disk.

Guarantees of ``read_json_trace``:
- it runs ingest's checks in ingest's order (the document and its header, each event's
  fields, the event count limit, ``event_checks.check_events``, then the timing semantics
  and the skew decision) over one batch, as ingest reads a document of at most
  ``JSON_BATCH_EVENTS`` events: it refuses what ingest refuses, naming the same file,
  record and field;
- the columns it returns give ``matching.build_program_from_columns`` the program that
  ingest's normalized table gives (pinned by tests);
- a document with more events than one batch is not read into columns (None): ingest
  reads it in batches, and its Arrow and pandas imports are then a small part of the work.

Importing this module imports neither pandas nor pyarrow.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tracecanary.clocks.status import SkewStatus
from tracecanary.columns import CodedText, IntColumn
from tracecanary.errors import InputError, SchemaError
from tracecanary.event_checks import EventColumns, TraceState, check_events
from tracecanary.formats.trace import (
    INT_FIELDS,
    SPLIT_FIELDS,
    STR_FIELDS,
    check_event_dict,
    check_header_limits,
    clock_of_ranks,
    expand_groups,
    merge_headers,
    validate_header,
)
from tracecanary.limits import Limits, current_limits, load_json

JSON_BATCH_EVENTS = 1 << 18  # events of a JSON document checked at once (ingest's batches)
# the largest file ``load_program`` reads as columns (a document of at most one batch of
# events is smaller, unless compressed); a larger one goes to ingest, parsed once
DIRECT_READ_BYTES = 1 << 24


def is_jsonl(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a JSON Lines trace (``.jsonl``, ``.jsonl.gz``)."""
    name = Path(path).name
    return name.endswith(".jsonl") or name.endswith(".jsonl.gz")


def reads_as_columns(path: str | os.PathLike) -> bool:
    """Whether ``load_program`` reads the trace at ``path`` with ``read_json_trace``: a
    JSON document (not JSON Lines) of at most ``DIRECT_READ_BYTES`` bytes."""
    return not is_jsonl(path) and os.path.getsize(path) <= DIRECT_READ_BYTES


def load_trace_document(path: str, limits: Limits) -> dict:
    """A native trace's JSON document (plain or gzip), its header checked (schema and
    the resource policy) and its ``events`` a list; refuses (SchemaError) otherwise."""
    doc = load_json(path, limits)
    validate_header(doc, file=path)
    if not isinstance(doc.get("events"), list):
        raise SchemaError("a JSON trace needs an events list", file=path, field="events")
    check_header_limits(doc, limits, file=path)
    return doc


def check_event_objects(path: str, events: list, first_index: int) -> None:
    """``check_event_dict`` of each event (``first_index``: the file index of the first)."""
    for offset, event in enumerate(events):
        check_event_dict(event, file=path, record=first_index + offset)


@dataclass(frozen=True)
class TraceColumns:
    """A checked trace: its normalized columns (every event field and ``issue_ns``, as
    a normalized table names them) and what matching needs of its header."""

    columns: dict[str, IntColumn | CodedText]
    groups: dict[str, list[int]]
    clocks: dict[int, str]
    world_size: int
    skew: SkewStatus
    notes: tuple[str, ...]


def read_json_trace(path: str | os.PathLike, limits: Limits | None = None) -> TraceColumns | None:
    """The checked columns of the JSON trace document at ``path`` (module doc); None
    when its events do not fit one batch."""
    limits = limits or current_limits()
    path = str(path)
    doc = load_trace_document(path, limits)
    events = doc["events"]
    if len(events) > JSON_BATCH_EVENTS:
        return None
    check_event_objects(path, events, 0)
    if len(events) > limits.max_events:
        raise InputError(f"more than max_events={limits.max_events} events", file=path)
    header = merge_headers([(path, doc)])
    groups = expand_groups(header, file=path)
    clocks = clock_of_ranks(header, file=path)
    state = TraceState(
        groups=groups, clocks=clocks, world_size=header["meta"]["world_size"], limits=limits
    )
    batch = EventColumns.from_dicts(events)
    issue = check_events(path, 0, batch, state)
    _, skew = state.conclude(path, header["meta"].get("skew"))
    columns: dict[str, IntColumn | CodedText] = {}
    for name in INT_FIELDS:
        columns[name] = batch.int_column(name)
    for name in STR_FIELDS:
        columns[name] = batch.text_column(name)
    for name in SPLIT_FIELDS:
        if name in batch.texts:  # an uneven all_to_all's splits, where the trace has any
            columns[name] = batch.text_column(name)
    columns["issue_ns"] = IntColumn(issue)
    return TraceColumns(
        columns=columns,
        groups=groups,
        clocks=clocks,
        world_size=int(header["meta"]["world_size"]),
        skew=skew,
        notes=tuple(header["meta"].get("notes", [])),
    )


__all__ = [
    "JSON_BATCH_EVENTS",
    "TraceColumns",
    "is_jsonl",
    "load_trace_document",
    "read_json_trace",
    "reads_as_columns",
]
