"""One PyTorch Flight Recorder dump, read and shape-checked.

A dump is what ``torch._C._distributed_c10d._dump_fr_trace_json`` (JSON) or
``_dump_fr_trace`` (pickle; the form torch's own dump-on-timeout writer and
``torchfrtrace`` use) return on one rank. The form is told from the first byte (``{``:
JSON, anything else is read as a pickle), never from the name; the pickle is read by
``tracecanary.flightrec.plain_pickle`` (plain data only, nothing executed).

The rank is not in the dump: like ``torchfrtrace`` (and torch's writer, which names a dump
``$TORCH_FR_DUMP_TEMP_FILE<rank>``) it is the trailing number of the file name, after a
``.json``, ``.pkl`` or ``.pickle`` suffix is set aside.

Guarantees of ``load_dump``: a ``Dump`` whose ``entries`` each hold every field the
import reads, with the types it expects (an absent timing field is ``None``, whether the
dump wrote ``null``, ``0`` or nothing); anything else is ``ImportRefused`` naming the
file, the entry index (``record N``) and the field.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracecanary.canonical import sha256_bytes
from tracecanary.errors import ImportRefused
from tracecanary.flightrec.plain_pickle import load_plain_pickle
from tracecanary.limits import Limits, current_limits, parse_json_bytes, read_input

_SUFFIXES = (".json", ".pkl", ".pickle")
_RANK_RE = re.compile(r"(\d+)$")
_INT_FIELDS = ("record_id", "pg_id", "collective_seq_id", "p2p_seq_id", "op_id")
_OPTIONAL_TIME_FIELDS = ("time_discovered_started_ns", "time_discovered_completed_ns")


@dataclass(frozen=True)
class Entry:
    """One recorded operation, as the dump wrote it (sizes per tensor)."""

    index: int  # position in the dump's entries
    record_id: int
    pg_name: str
    pg_desc: str
    collective_seq_id: int
    p2p_seq_id: int
    op_id: int
    is_p2p: bool
    profiling_name: str
    input_sizes: list[list[int]]
    input_dtypes: list[str]
    output_sizes: list[list[int]]
    output_dtypes: list[str]
    time_created_ns: int | None
    duration_ms: float | None
    time_discovered_started_ns: int | None
    time_discovered_completed_ns: int | None


@dataclass(frozen=True)
class Dump:
    file: str
    rank: int
    form: str  # "json" or "pickle"
    version: str
    comm_lib_version: str
    pg_config: dict[str, Any]
    entries: list[Entry]
    sha256: str


def rank_from_name(path: str | os.PathLike) -> int:
    """The trailing number of the file name (a ``.json``/``.pkl``/``.pickle`` suffix set
    aside); ImportRefused if there is none."""
    name = Path(path).name
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    m = _RANK_RE.search(name)
    if m is None:
        raise ImportRefused(
            "the file name does not end in a rank number (torch names a dump "
            "$TORCH_FR_DUMP_TEMP_FILE<rank>, e.g. rank0.json or nccl_trace_rank_0)",
            file=str(path),
        )
    return int(m.group(1))


def load_dump(path: str | os.PathLike, limits: Limits | None = None) -> Dump:
    """Read and check one dump (see module docstring)."""
    limits = limits or current_limits()
    file = str(path)
    rank = rank_from_name(path)
    data = read_input(path, limits)
    if data.lstrip()[:1] == b"{":
        form = "json"
        doc = parse_json_bytes(data, file=file, limits=limits)
    else:  # torch writes protocol 2+ (first byte 0x80); anything else fails the scan
        form = "pickle"
        doc = load_plain_pickle(data, file=file, max_depth=limits.max_depth)
    if not isinstance(doc, dict):
        raise ImportRefused("not a Flight Recorder dump: not an object at the top", file=file)
    for key in ("version", "pg_config", "entries"):
        if key not in doc:
            why = " (dumped with includeCollectives=False?)" if key == "entries" else ""
            raise ImportRefused(
                f"not a Flight Recorder dump: no {key!r}{why}", file=file, field=key
            )
    if not isinstance(doc["version"], str):
        raise ImportRefused("must be a string", file=file, field="version")
    if not isinstance(doc["pg_config"], dict):
        raise ImportRefused("must be an object", file=file, field="pg_config")
    if not isinstance(doc["entries"], list):
        raise ImportRefused("must be a list", file=file, field="entries")
    limits.check("max_events", len(doc["entries"]), what="entries", file=file)
    comm = doc.get("comm_lib_version", "")
    entries = [_entry(e, i, file) for i, e in enumerate(doc["entries"])]
    return Dump(
        file=file,
        rank=rank,
        form=form,
        version=doc["version"],
        comm_lib_version=comm if isinstance(comm, str) else str(comm),
        pg_config=doc["pg_config"],
        entries=entries,
        sha256=sha256_bytes(data),
    )


def _entry(e: Any, index: int, file: str) -> Entry:
    def refuse(message: str, field: str) -> ImportRefused:
        return ImportRefused(message, file=file, record=index, field=field)

    if not isinstance(e, dict):
        raise refuse("entry is not an object", "entries")
    for key in (
        *_INT_FIELDS,
        "process_group",
        "profiling_name",
        "is_p2p",
        "input_sizes",
        "input_dtypes",
        "output_sizes",
        "output_dtypes",
        "time_created_ns",
    ):
        if key not in e:
            raise refuse("required field missing", key)
    for key in _INT_FIELDS:
        if type(e[key]) is not int or e[key] < 0:
            raise refuse(f"must be a non-negative integer, got {e[key]!r}"[:120], key)
    pg = e["process_group"]
    if not (isinstance(pg, list) and len(pg) == 2 and all(isinstance(x, str) for x in pg)):
        raise refuse(f"must be [name, description], got {pg!r}"[:120], "process_group")
    if not pg[0]:
        raise refuse("the process group has no name", "process_group")
    if not isinstance(e["profiling_name"], str):
        raise refuse("must be a string", "profiling_name")
    if type(e["is_p2p"]) is not bool:
        raise refuse("must be true or false", "is_p2p")
    for side in ("input", "output"):
        sizes, dtypes = e[f"{side}_sizes"], e[f"{side}_dtypes"]
        if not isinstance(sizes, list) or not all(
            isinstance(s, list) and all(type(d) is int and d >= 0 for d in s) for s in sizes
        ):
            raise refuse(
                "must be a list of shapes (lists of non-negative integers)", f"{side}_sizes"
            )
        if not isinstance(dtypes, list) or not all(isinstance(d, str) for d in dtypes):
            raise refuse("must be a list of dtype names", f"{side}_dtypes")
        if len(sizes) != len(dtypes):
            raise refuse(f"{len(sizes)} shapes but {len(dtypes)} dtypes", f"{side}_dtypes")
    times = {}
    for key in ("time_created_ns", *_OPTIONAL_TIME_FIELDS):
        value = e.get(key)
        if value is not None and (type(value) is not int or value < 0 or value >= 2**63):
            raise refuse(f"must be a non-negative 64-bit integer or null, got {value!r}"[:120], key)
        times[key] = value or None  # the JSON form writes 0 where the pickle has None
    duration = e.get("duration_ms")
    if duration is not None and (
        type(duration) not in (int, float) or not duration >= 0 or duration == float("inf")
    ):
        raise refuse(
            f"must be a non-negative number or null, got {duration!r}"[:120], "duration_ms"
        )
    return Entry(
        index=index,
        record_id=e["record_id"],
        pg_name=pg[0],
        pg_desc=pg[1],
        collective_seq_id=e["collective_seq_id"],
        p2p_seq_id=e["p2p_seq_id"],
        op_id=e["op_id"],
        is_p2p=e["is_p2p"],
        profiling_name=e["profiling_name"],
        input_sizes=e["input_sizes"],
        input_dtypes=e["input_dtypes"],
        output_sizes=e["output_sizes"],
        output_dtypes=e["output_dtypes"],
        duration_ms=None if duration is None else float(duration),
        **times,
    )
