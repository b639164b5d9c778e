"""Columnar captures: a ``tracecanary.trace/v1`` trace written as Parquet or Arrow IPC
by tools that produce columns rather than JSON.

Layout: one column per event field (the names and types of ``EVENT_SCHEMA``: int64 and
utf8 string; optional fields may be left out) and the trace header (``format``,
``meta``, ``groups``, as in a JSON Lines header line, without ``events``) as JSON in
the schema's key-value metadata under ``HEADER_KEY``. Suffixes: ``.parquet`` (Parquet),
``.arrow`` / ``.feather`` (Arrow IPC file), ``.arrows`` (Arrow IPC stream).

Guarantees of ``open_columnar``:
- the header passes the same checks as a JSON Lines header (parse policy, header schema,
  header limits, no ``events`` key);
- a column that is not an event field, or whose type is not the field's, is an
  ``InputError`` naming the file and the field; so is invalid UTF-8 in a string
  column (naming the record too);
- each batch is handed over as an ``EVENT_SCHEMA`` batch (absent optional columns as
  nulls), so ingest runs on it exactly the checks it runs on a JSON Lines batch, and
  the same events give the same normalized Parquet bytes whatever their container;
- batches are read one at a time (memory grows with one Parquet row group or IPC record
  batch, not the capture); the data's decoded size is held to ``max_decompressed_bytes``
  (Parquet: from its footer, before any row is read; IPC: as batches are read), so a
  compressed capture cannot expand without bound.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from tracecanary.errors import InputError, ResourceLimitExceeded, SchemaError
from tracecanary.formats.trace import (
    EVENT_SCHEMA,
    SPLIT_FIELDS,
    check_header_limits,
    validate_header,
)
from tracecanary.limits import Limits, parse_json_bytes

HEADER_KEY = b"tracecanary.header"
PARQUET_SUFFIXES = (".parquet",)
IPC_FILE_SUFFIXES = (".arrow", ".feather")
IPC_STREAM_SUFFIXES = (".arrows",)
BATCH_ROWS = 1 << 18


def is_columnar(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a columnar capture (by its suffix)."""
    return Path(path).name.endswith(PARQUET_SUFFIXES + IPC_FILE_SUFFIXES + IPC_STREAM_SUFFIXES)


def _open_reader(path: str, limits: Limits):
    """(Arrow schema, iterator of record batches) of the file; unreadable: InputError."""
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    name = Path(path).name
    try:
        if name.endswith(PARQUET_SUFFIXES):
            parquet = pq.ParquetFile(path)
            meta = parquet.metadata
            decoded = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
            limits.check("max_decompressed_bytes", decoded, what="decoded column data", file=path)
            return parquet.schema_arrow, parquet.iter_batches(batch_size=BATCH_ROWS)
        if name.endswith(IPC_FILE_SUFFIXES):
            ipc_file = ipc.open_file(path)
            batches = (ipc_file.get_batch(i) for i in range(ipc_file.num_record_batches))
            return ipc_file.schema, batches
        stream = ipc.open_stream(path)
        return stream.schema, iter(stream)
    except (pa.ArrowException, OSError) as err:
        raise InputError(f"not a readable columnar capture: {err}"[:300], file=path) from None


def _header(path: str, schema: pa.Schema, limits: Limits) -> dict:
    metadata = schema.metadata or {}
    if HEADER_KEY not in metadata:
        raise SchemaError(
            f"a columnar capture needs the trace header as JSON in its schema metadata "
            f"key {HEADER_KEY.decode()!r}",
            file=path,
            record="header",
        )
    header = parse_json_bytes(metadata[HEADER_KEY], file=path, limits=limits, record="header")
    validate_header(header, file=path)
    check_header_limits(header, limits, file=path)
    if "events" in header:
        raise SchemaError(
            "a columnar capture's header must not hold events", file=path, field="events"
        )
    return header


def _check_columns(path: str, schema: pa.Schema) -> None:
    for column in schema:
        if column.name in SPLIT_FIELDS:
            raise SchemaError(
                "an uneven all_to_all's splits are read from JSON and JSON Lines traces, not "
                "from columnar captures: write this capture as JSON (Lines)",
                file=path,
                field=column.name,
            )
        if column.name not in EVENT_SCHEMA.names:
            raise SchemaError(
                f"column {column.name!r} is not an event field", file=path, field=column.name
            )
        expected = EVENT_SCHEMA.field(column.name).type
        if column.type != expected:
            raise SchemaError(
                f"column type {column.type} is not {expected}", file=path, field=column.name
            )
    names = schema.names
    repeated = next((n for n in names if names.count(n) > 1), None)
    if repeated is not None:
        raise SchemaError("column appears twice", file=path, field=repeated)


def _conform(path: str, first_index: int, batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` as an EVENT_SCHEMA batch; invalid UTF-8 refused naming record and field."""
    arrays = []
    for field in EVENT_SCHEMA:
        index = batch.schema.get_field_index(field.name)
        if index < 0:
            arrays.append(pa.nulls(batch.num_rows, type=field.type))
            continue
        array = batch.column(index)
        try:
            array.validate(full=True)
        except pa.ArrowInvalid:
            row = next(i for i in range(len(array)) if not _valid(array.slice(i, 1)))
            raise InputError(
                "string is not valid UTF-8", file=path, record=first_index + row, field=field.name
            ) from None
        arrays.append(array)
    return pa.RecordBatch.from_arrays(arrays, schema=EVENT_SCHEMA)


def _valid(array: pa.Array) -> bool:
    try:
        array.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def open_columnar(path: str, limits: Limits) -> tuple[dict, Iterator[tuple[int, pa.RecordBatch]]]:
    """(header, iterator of (index of the batch's first event, EVENT_SCHEMA batch)) of a
    columnar capture; the header and the column layout are checked before returning."""
    size = Path(path).stat().st_size
    if size > limits.max_file_bytes:
        raise ResourceLimitExceeded(
            f"file is {size} bytes, over max_file_bytes={limits.max_file_bytes}", file=path
        )
    schema, batches = _open_reader(path, limits)
    header = _header(path, schema, limits)
    _check_columns(path, schema)
    return header, _batches(path, batches, limits)


def _batches(path: str, batches, limits: Limits) -> Iterator[tuple[int, pa.RecordBatch]]:
    index = 0
    decoded = 0
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except (pa.ArrowException, OSError) as err:
            raise InputError(
                f"unreadable columnar data: {err}"[:300], file=path, record=index
            ) from None
        decoded += batch.nbytes
        limits.check(
            "max_decompressed_bytes", decoded, what="decoded column data", file=path, record=index
        )
        if batch.num_rows:
            yield index, _conform(path, index, batch)
            index += batch.num_rows


def write_columnar(header: dict, table: pa.Table, path: str | os.PathLike) -> None:
    """Write ``table`` (event columns) with ``header`` as a columnar capture, the
    container chosen by the suffix of ``path`` (the layout ``open_columnar`` reads)."""
    import json

    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    meta = {HEADER_KEY: json.dumps(header, sort_keys=True).encode("utf-8")}
    table = table.replace_schema_metadata(meta)
    name = Path(path).name
    if name.endswith(PARQUET_SUFFIXES):
        pq.write_table(table, path)
    elif name.endswith(IPC_FILE_SUFFIXES):
        with ipc.new_file(path, table.schema) as writer:
            writer.write_table(table)
    elif name.endswith(IPC_STREAM_SUFFIXES):
        with ipc.new_stream(path, table.schema) as writer:
            writer.write_table(table)
    else:
        raise InputError(
            "not a columnar capture suffix (.parquet, .arrow, .feather, .arrows)", file=str(path)
        )


__all__ = ["HEADER_KEY", "is_columnar", "open_columnar", "write_columnar"]
