"""The native trace format ``tracecanary.trace/v1``: constants, the Arrow schema of
normalized events, header checks and group expansion.

Guarantees: a header accepted here has a known world size, groups with explicit,
duplicate-free rank lists inside the world, and clock domains that cover each rank at
most once.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from tracecanary.errors import SchemaError
from tracecanary.formats.ids import TRACE_FORMAT
from tracecanary.formats.schemas import validate
from tracecanary.formats.vocab import OP_RE, OPS
from tracecanary.limits import Limits

REQUIRED_EVENT_FIELDS = ("rank", "seq", "op", "bytes", "dtype", "group")
INT_FIELDS = (
    "rank",
    "seq",
    "bytes",
    "root",
    "peer",
    "ts_ns",
    "gap_ns",
    "latency_ns",
    "overlap_ns",
    "arrival_ns",
    "instance",
)
STR_FIELDS = ("op", "dtype", "group", "phase", "stream")
TIME_FIELDS = ("ts_ns", "gap_ns", "latency_ns", "overlap_ns", "arrival_ns")

# Arrow schema of events as read (file order, all optional fields nullable).
EVENT_SCHEMA = pa.schema(
    [
        ("rank", pa.int64()),
        ("seq", pa.int64()),
        ("op", pa.string()),
        ("bytes", pa.int64()),
        ("dtype", pa.string()),
        ("group", pa.string()),
        ("root", pa.int64()),
        ("peer", pa.int64()),
        ("phase", pa.string()),
        ("stream", pa.string()),
        ("ts_ns", pa.int64()),
        ("gap_ns", pa.int64()),
        ("latency_ns", pa.int64()),
        ("overlap_ns", pa.int64()),
        ("arrival_ns", pa.int64()),
        ("instance", pa.int64()),
    ]
)
EVENT_FIELDS = tuple(EVENT_SCHEMA.names)

# Normalized table = events + the derived issue time and clock domain of the rank.
NORMALIZED_SCHEMA = EVENT_SCHEMA.append(pa.field("issue_ns", pa.int64(), nullable=False)).append(
    pa.field("clock", pa.string(), nullable=False)
)


def check_event_dict(event: Any, *, file: str, record: int) -> None:
    """Mirror of the event schema for one event, naming the offending field.

    Used where precise location matters (JSON documents, and to locate the record
    behind a fast-path parse failure)."""
    if not isinstance(event, dict):
        raise SchemaError("event is not a JSON object", file=file, record=record)
    for key in event:
        if key not in EVENT_FIELDS:
            raise SchemaError("unknown field", file=file, record=record, field=str(key))
    for key in REQUIRED_EVENT_FIELDS:
        if key not in event:
            raise SchemaError("required field missing", file=file, record=record, field=key)
    for key in INT_FIELDS:
        if key in event:
            value = event[key]
            if isinstance(value, bool) or not isinstance(value, int):
                raise SchemaError(
                    f"must be a non-negative integer, got {value!r}"[:120],
                    file=file,
                    record=record,
                    field=key,
                )
            if value < 0:
                raise SchemaError(
                    f"must be non-negative, got {value}", file=file, record=record, field=key
                )
            if value >= 2**63:
                raise SchemaError("integer too large", file=file, record=record, field=key)
    for key in STR_FIELDS:
        if key in event and not isinstance(event[key], str):
            raise SchemaError("must be a string", file=file, record=record, field=key)
    for key in ("dtype", "group"):
        if event[key] == "":
            raise SchemaError("must not be empty", file=file, record=record, field=key)
    if not OP_RE.match(event["op"]):
        raise SchemaError(
            f"unknown op {event['op']!r}: use one of {', '.join(OPS)} or custom:<name>"[:200],
            file=file,
            record=record,
            field="op",
        )


def check_header_limits(header: dict, limits: Limits, *, file: str) -> None:
    """Refuse (ResourceLimitExceeded, exit 2) a schema-valid header whose declared sizes
    are over the resource policy, before anything is allocated for them: world size and
    each group's size over ``max_ranks``, declared group members in total (start/stride
    groups counted by their ``size``) over ``max_events``."""
    limits.check("max_ranks", header["meta"]["world_size"], file=file, field="meta/world_size")
    total = 0
    for index, group in enumerate(header["groups"]):
        size = len(group["ranks"]) if "ranks" in group else group["size"]
        limits.check(
            "max_ranks",
            size,
            what=f"group {group['id']!r} size",
            file=file,
            field=f"groups/{index}",
        )
        total += size
    limits.check("max_events", total, what="declared group members", file=file, field="groups")
    for index, domain in enumerate(header["meta"].get("clock_domains", [])):
        limits.check(
            "max_ranks",
            len(domain["ranks"]),
            what=f"clock domain {domain['id']!r} size",
            file=file,
            field=f"meta/clock_domains/{index}/ranks",
        )


def expand_groups(header: dict, *, file: str) -> dict[str, list[int]]:
    """Group id -> explicit rank list, refusing duplicates, ranks outside the world and
    rank lists that disagree with their declared size."""
    world = header["meta"]["world_size"]
    groups: dict[str, list[int]] = {}
    for index, group in enumerate(header["groups"]):
        gid = group["id"]
        field = f"groups/{index}"
        if gid in groups:
            raise SchemaError(f"group {gid!r} declared twice", file=file, field=field)
        if "ranks" in group:
            ranks = list(group["ranks"])
            if "size" in group and group["size"] != len(ranks):
                raise SchemaError(
                    f"group {gid!r} lists {len(ranks)} ranks but declares size {group['size']}",
                    file=file,
                    field=f"{field}/size",
                )
        else:
            ranks = [group["start"] + k * group["stride"] for k in range(group["size"])]
        if len(set(ranks)) != len(ranks):
            raise SchemaError(f"group {gid!r} repeats a rank", file=file, field=f"{field}/ranks")
        outside = [r for r in ranks if r >= world]
        if outside:
            raise SchemaError(
                f"group {gid!r} has rank {outside[0]} outside world_size {world}",
                file=file,
                field=f"{field}/ranks",
            )
        groups[gid] = ranks
    return groups


def clock_of_ranks(header: dict, *, file: str) -> dict[int, str]:
    """Rank -> clock domain id. Ranks not covered by a declared domain get their own
    domain ``rank<r>`` (their clock is not known to be shared with anyone's)."""
    world = header["meta"]["world_size"]
    mapping: dict[int, str] = {}
    for index, domain in enumerate(header["meta"].get("clock_domains", [])):
        for rank in domain["ranks"]:
            if rank >= world:
                raise SchemaError(
                    f"clock domain {domain['id']!r} names rank {rank} outside world_size {world}",
                    file=file,
                    field=f"meta/clock_domains/{index}/ranks",
                )
            if rank in mapping:
                raise SchemaError(
                    f"rank {rank} is in two clock domains",
                    file=file,
                    field=f"meta/clock_domains/{index}/ranks",
                )
            mapping[rank] = domain["id"]
    for rank in range(world):
        mapping.setdefault(rank, f"rank{rank}")
    return mapping


def validate_header(header: Any, *, file: str) -> None:
    """Schema check of everything but the events (``events`` may be absent: JSONL)."""
    if not isinstance(header, dict):
        raise SchemaError("trace is not a JSON object", file=file)
    if header.get("format") != TRACE_FORMAT:
        raise SchemaError(
            f"not a {TRACE_FORMAT} document (format={header.get('format')!r})"[:200],
            file=file,
            field="format",
        )
    doc = {k: v for k, v in header.items() if k != "events"}
    doc["events"] = []
    validate(doc, "trace", file=file)
