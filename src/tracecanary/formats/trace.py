"""The native trace format ``tracecanary.trace/v1``: constants, the Arrow schema of
normalized events, header checks and group expansion.

Guarantees: a header accepted here has a known world size, groups with explicit,
duplicate-free rank lists inside the world, and clock domains that cover each rank at
most once.
"""

from __future__ import annotations

from typing import Any

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
SPLIT_FIELDS = ("send_splits", "recv_splits")
"""An uneven all_to_all's (all_to_allv's) per-member split sizes: in a JSON event, a list
of non-negative integers, one per member of the event's group in the group's rank order,
counted in elements of the event's ``dtype`` (``send_splits[j]``: what this rank sends to
the j-th member; ``recv_splits[j]``: what it receives from it). Both or neither, only on
``all_to_all``. Optional: a trace without them has no split column anywhere (its Parquet,
canaries and reports are those of a trace before splits existed). In the columns that
ingest and matching read they are texts, ``split_text`` of the list."""

# Events as read (file order; every optional field nullable): each field's name and
# Arrow type name, in column order. ``EVENT_SCHEMA`` and ``NORMALIZED_SCHEMA`` are built
# from this on first use (module ``__getattr__``): reading a trace's fields needs no pyarrow.
EVENT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("rank", "int64"),
    ("seq", "int64"),
    ("op", "string"),
    ("bytes", "int64"),
    ("dtype", "string"),
    ("group", "string"),
    ("root", "int64"),
    ("peer", "int64"),
    ("phase", "string"),
    ("stream", "string"),
    ("ts_ns", "int64"),
    ("gap_ns", "int64"),
    ("latency_ns", "int64"),
    ("overlap_ns", "int64"),
    ("arrival_ns", "int64"),
    ("instance", "int64"),
)
EVENT_FIELDS = tuple(name for name, _ in EVENT_COLUMNS)
assert {n for n, t in EVENT_COLUMNS if t == "int64"} == set(INT_FIELDS)
assert {n for n, t in EVENT_COLUMNS if t == "string"} == set(STR_FIELDS)
# Normalized table = events + the derived issue time and clock domain of the rank.
NORMALIZED_EXTRA_COLUMNS: tuple[tuple[str, str], ...] = (("issue_ns", "int64"), ("clock", "string"))

SPLIT_COLUMNS: tuple[tuple[str, str], ...] = tuple((name, "string") for name in SPLIT_FIELDS)
"""The split columns, appended to the event and normalized columns of a trace (and only of
a trace) whose events carry splits."""

_SCHEMAS: dict[str, Any] = {}


def split_text(values: list[int]) -> str:
    """A split list as the text the columns hold: decimal integers joined by commas."""
    return ",".join(str(int(v)) for v in values)


def split_values(text: str) -> list[int]:
    """The split list that ``split_text`` wrote."""
    return [int(v) for v in text.split(",")] if text else []


def uneven_splits(send: list[int], recv: list[int]) -> dict:
    """The split fields of an all_to_all that sends ``send`` and receives ``recv``
    (elements per member): ``{"send_splits": send, "recv_splits": recv}``, or {} where
    every part is the same (an all_to_all without splits is equal parts, so such a trace
    stays as it always was). The recorder and the Kineto import both decide by this."""
    if len(set(send) | set(recv)) <= 1:
        return {}
    return {"send_splits": list(send), "recv_splits": list(recv)}


def with_split_columns(schema):
    """``schema`` (an Arrow schema) with the nullable split columns appended."""
    import pyarrow as pa

    for name, kind in SPLIT_COLUMNS:
        schema = schema.append(pa.field(name, getattr(pa, kind)()))
    return schema


def has_splits(events: list) -> bool:
    """Whether any event object of ``events`` carries a split field."""
    return any(isinstance(e, dict) and ("send_splits" in e or "recv_splits" in e) for e in events)


def __getattr__(name: str):
    """``EVENT_SCHEMA`` (Arrow schema of ``EVENT_COLUMNS``, all nullable) and
    ``NORMALIZED_SCHEMA`` (that plus ``NORMALIZED_EXTRA_COLUMNS``, not nullable), built
    once on first use."""
    if name not in ("EVENT_SCHEMA", "NORMALIZED_SCHEMA"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if not _SCHEMAS:
        import pyarrow as pa

        events = pa.schema([(n, getattr(pa, t)()) for n, t in EVENT_COLUMNS])
        normalized = events
        for n, t in NORMALIZED_EXTRA_COLUMNS:
            normalized = normalized.append(pa.field(n, getattr(pa, t)(), nullable=False))
        _SCHEMAS.update(EVENT_SCHEMA=events, NORMALIZED_SCHEMA=normalized)
    return _SCHEMAS[name]


def check_event_dict(event: Any, *, file: str, record: int) -> None:
    """Mirror of the event schema for one event, naming the offending field.

    Used where precise location matters (JSON documents, and to locate the record
    behind a fast-path parse failure)."""
    if not isinstance(event, dict):
        raise SchemaError("event is not a JSON object", file=file, record=record)
    for key in event:
        if key not in EVENT_FIELDS and key not in SPLIT_FIELDS:
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
    for key in SPLIT_FIELDS:
        if key in event:
            value = event[key]
            if not isinstance(value, list) or not all(
                isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**63 for v in value
            ):
                raise SchemaError(
                    "must be a list of non-negative integers (elements of dtype per member)",
                    file=file,
                    record=record,
                    field=key,
                )
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


def merge_headers(headers: list[tuple[str, dict]]) -> dict:
    """One header for a trace split over files ((path, header) each, in order): the same
    world size, each group and clock domain declared alike wherever declared (a clock
    domain's ranks joined across the processes of its host), notes and sources joined;
    refuses (SchemaError naming the file and field) a disagreement."""
    first_path, first = headers[0]
    world = first["meta"]["world_size"]
    groups = {g["id"]: g for g in first["groups"]}
    domains = {d["id"]: d for d in first["meta"].get("clock_domains", [])}
    notes = list(first["meta"].get("notes", []))
    sources = [first["meta"]["source"]]
    for path, header in headers[1:]:
        if header["meta"]["world_size"] != world:
            raise SchemaError(
                f"world_size {header['meta']['world_size']} differs from {world} in {first_path}",
                file=path,
                field="meta/world_size",
            )
        for g in header["groups"]:
            if g["id"] in groups and groups[g["id"]] != g:
                raise SchemaError(
                    f"group {g['id']!r} is declared differently in {first_path}",
                    file=path,
                    field="groups",
                )
            groups.setdefault(g["id"], g)
        for d in header["meta"].get("clock_domains", []):
            known = domains.get(d["id"])
            if known is None:
                domains[d["id"]] = d
            elif known.get("host") != d.get("host"):
                raise SchemaError(
                    f"clock domain {d['id']!r} names host {d.get('host')!r}, but {known.get('host')!r} in {first_path}",
                    file=path,
                    field="meta/clock_domains",
                )
            else:  # one host's clock, declared by each of its processes
                domains[d["id"]] = {**known, "ranks": sorted(set(known["ranks"]) | set(d["ranks"]))}
        notes += [n for n in header["meta"].get("notes", []) if n not in notes]
        sources.append(header["meta"]["source"])
    meta = dict(first["meta"])
    meta["notes"] = notes
    meta["source"] = "; ".join(dict.fromkeys(sources))
    if domains:
        meta["clock_domains"] = [domains[k] for k in domains]
    return {"format": first["format"], "meta": meta, "groups": [groups[k] for k in groups]}


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
