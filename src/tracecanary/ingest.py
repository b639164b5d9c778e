"""Ingest: validate native traces and normalize them into one Parquet table.

Guarantees of ``ingest_files``:
- every refusal of the format (DESIGN.md §3 ingest) raises an ``InputError`` naming the
  file, the event's index in that file and the field; nothing is written then;
- one timing semantics per trace: every event has ``ts_ns``, or none has and gaps
  govern; mixed only when every event carries its own ``gap_ns``; a ``gap_ns`` that
  contradicts the timestamps is rejected, never arbitrated;
- JSON, JSON Lines and columnar (Parquet, Arrow IPC: ``columnar_capture``) forms of one
  trace give the same Parquet bytes; every form passes the same checks;
- JSON Lines is read in bounded batches: memory grows with the batch size and the
  output row group, not with the trace;
- JSON Lines is cut into chunks where pyarrow's streaming reader cut its batches, and
  each chunk is read by the exact template parser (``formats.jsonl_template``) or, where
  it declines, by pyarrow's JSON reader: the same batches, values and refusals as the
  streaming reader over the whole body gave;
- the work is pipelined: ``PARSE_THREADS`` workers parse the next chunks while this
  thread reads (and hashes) the input and checks a batch, and a finished row group is
  encoded to Parquet on a writer thread while the next one is checked (at most one row
  group in encoding at a time);
  an input's SHA-256 is computed from the bytes as they stream through the reader,
  never by reading the input twice;
- the resource policy (``tracecanary.limits``) holds before work that scales with it:
  world size and group sizes (``max_ranks``), declared group members and events
  (``max_events``), bytes of one message (``max_message_bytes``), every time value and
  every issue time derived from gaps (``max_time_ns``, so int64 arithmetic never wraps).

Normalized rows keep file order (per rank, ``seq`` must increase in file order) and add
``issue_ns`` (``ts_ns`` where given, else the previous issue plus ``gap_ns``; a rank's
first gap counts from its clock's origin) and ``clock`` (the rank's clock domain).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson
import pyarrow.parquet as pq

from tracecanary.canonical import atomic_output, sha256_file, write_json
from tracecanary.columnar_capture import is_columnar, open_columnar
from tracecanary.errors import InputError, ResourceLimitExceeded, SchemaError
from tracecanary.event_checks import (
    CHECKED_TEXT_FIELDS,
    EventColumns,
    TraceState,
    check_events,
)
from tracecanary.formats.ids import NORMALIZED_FORMAT
from tracecanary.formats.jsonl_template import parse_chunk
from tracecanary.formats.trace import (
    EVENT_FIELDS,
    EVENT_SCHEMA,
    INT_FIELDS,
    NORMALIZED_SCHEMA,
    SPLIT_FIELDS,
    check_event_dict,
    check_header_limits,
    clock_of_ranks,
    expand_groups,
    has_splits,
    merge_headers,
    split_text,
    validate_header,
    with_split_columns,
)
from tracecanary.limits import Limits, current_limits, open_input, parse_json_bytes
from tracecanary.parquet_io import ROW_GROUP_SIZE, WRITER_OPTIONS
from tracecanary.trace_columns import (
    JSON_BATCH_EVENTS,
    check_event_objects,
    is_jsonl,
    load_trace_document,
)

BATCH_BYTES = 1 << 24
MAX_LINE_BYTES = 2 * BATCH_BYTES  # the longest line the chunked reader can take whole
PARSE_THREADS = 2  # chunks parsed at once, each on its own worker
CHUNKS_AHEAD = PARSE_THREADS + 1  # read ahead: a worker that finishes finds the next chunk


class _StreamDigest:
    """SHA-256 of a file fed by the reader as the bytes stream through it."""

    def __init__(self) -> None:
        self.sha = hashlib.sha256()
        self.bytes = 0

    def update(self, data) -> None:
        self.sha.update(data)
        self.bytes += len(data)

    def hexdigest(self, path: str) -> str:
        """The file's SHA-256; any stored bytes the reader did not consume (none once
        the stream was read to its end) are read here, so it is always the whole file's."""
        with open(path, "rb") as rest:
            rest.seek(self.bytes)
            while chunk := rest.read(1 << 20):
                self.update(chunk)
        return self.sha.hexdigest()


@dataclass
class _Source:
    """One input file: its header, its event batches as (index of the batch's first
    event, batch), and the digest its bytes feed while they stream (JSON Lines)."""

    path: str
    header: dict
    batches: Iterator[tuple[int, pa.RecordBatch]]
    digest: _StreamDigest | None = None
    stream: BinaryIO | None = None
    splits: bool = False  # whether its events carry SPLIT_FIELDS (JSON documents only)

    def sha256(self) -> str:
        """The input's SHA-256 (once its batches have been read)."""
        if self.digest is None:  # a JSON document, parsed whole: hashed on its own
            return sha256_file(self.path)
        return self.digest.hexdigest(self.path)

    def close(self) -> None:
        close = getattr(self.batches, "close", None)
        if close is not None:
            close()
        if self.stream is not None:
            self.stream.close()


def _open_source(path: str, limits: Limits, *, hash_input: bool = True) -> _Source:
    if is_columnar(path):  # Parquet / Arrow IPC: hashed whole (``digest`` None)
        header, batches = open_columnar(path, limits)
        return _Source(path, header, batches)
    if is_jsonl(path):
        digest = _StreamDigest() if hash_input else None
        stream = open_input(path, limits, digest=digest)
        try:
            first = stream.readline(limits.max_json_document_bytes + 1)
            if len(first) > limits.max_json_document_bytes:  # refused before it is parsed
                raise ResourceLimitExceeded(
                    "the header line is over "
                    f"max_json_document_bytes={limits.max_json_document_bytes}",
                    file=path,
                    record="header",
                )
            header = parse_json_bytes(first, file=path, limits=limits, record="header")
            validate_header(header, file=path)
            check_header_limits(header, limits, file=path)
        except BaseException:
            stream.close()
            raise
        if "events" in header:
            stream.close()
            raise SchemaError("a JSON Lines header must not hold events", file=path, field="events")
        return _Source(path, header, _jsonl_batches(path, stream), digest, stream)
    doc = load_trace_document(path, limits)
    splits = has_splits(doc["events"])
    return _Source(path, doc, _json_batches(path, doc["events"], splits), splits=splits)


def _header_and_batches(
    path: str, limits: Limits
) -> tuple[dict, Iterator[tuple[int, pa.RecordBatch]]]:
    """(header, iterator of (index of the batch's first event, batch)) of one input
    (merge.py reads the ranks of captures this way)."""
    source = _open_source(path, limits, hash_input=False)
    return source.header, source.batches


def _json_batches(
    path: str, events: list, splits: bool = False
) -> Iterator[tuple[int, pa.RecordBatch]]:
    """Batches of a JSON document's events; with ``splits``, the split columns appended
    (``split_text`` of each list)."""
    step = JSON_BATCH_EVENTS
    schema = with_split_columns(EVENT_SCHEMA) if splits else EVENT_SCHEMA
    for start in range(0, len(events), step):
        chunk = events[start : start + step]
        check_event_objects(path, chunk, start)
        if splits:
            chunk = [
                {k: split_text(v) if k in SPLIT_FIELDS else v for k, v in event.items()}
                for event in chunk
            ]
        yield start, pa.RecordBatch.from_pylist(chunk, schema=schema)


def _locate_jsonl_error(path: str, first_index: int, message: str) -> InputError:
    """Re-read the file slowly to name the record and field behind a fast-path failure.
    No line is read or parsed past ``MAX_LINE_BYTES`` (a longer one is its own refusal),
    so a 3 GiB line costs a few blocks of memory, not the line."""
    with open_input(path) as stream:
        stream.readline(current_limits().max_json_document_bytes)  # the header, read before
        for index in itertools.count():
            line = stream.readline(MAX_LINE_BYTES + 1)
            if not line:
                break
            if len(line) > MAX_LINE_BYTES:
                return ResourceLimitExceeded(
                    f"a line of more than {MAX_LINE_BYTES} bytes: no JSON Lines event is "
                    "that long (a line must fit in two of ingest's 16 MiB blocks)",
                    file=path,
                    record=index,
                )
            if not line.strip():
                continue
            parse_error = None
            try:
                event = parse_json_bytes(line, file=path, record=index)
            except InputError as err:
                parse_error = err
                try:  # NaN / Infinity: parse them to name the field they stand in
                    event = json.loads(line)
                except (ValueError, RecursionError):
                    return err
            try:
                check_event_dict(event, file=path, record=index)
            except InputError as err:
                return err
            if parse_error is not None:  # e.g. a lone surrogate: the parser named it
                return parse_error
    return SchemaError(f"unreadable event data: {message}"[:300], file=path, record=first_index)


_STRADDLING = "straddling object straddles two block boundaries (try to increase block size?)"


class _ChunkBuffers:
    """Byte buffers for the body's chunks, each used again once its chunk is parsed, so
    a long body costs fresh memory (page faults) for a few chunks, not for every one.
    A buffer something still views (an export) is never used again."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.free: list[bytearray] = []

    def take(self, size: int) -> bytearray:
        """A buffer of ``size`` bytes (contents unspecified)."""
        while self.free:
            buffer = self.free.pop()
            if size < buffer.__alloc__() <= 2 * size:  # resized in place, no new memory
                if len(buffer) > size:
                    del buffer[size:]
                else:
                    buffer.extend(bytes(size - len(buffer)))
                return buffer
        return bytearray(size)

    def give(self, buffer: bytearray | None) -> None:
        """Hand back a chunk's buffer once nothing reads it."""
        if buffer is None or not buffer or len(self.free) >= self.keep:
            return
        try:  # a resize refuses while a view (e.g. an Arrow buffer) holds the bytes
            buffer.append(buffer.pop())
        except BufferError:
            return
        self.free.append(buffer)


def _jsonl_chunks(stream: BinaryIO, buffers: _ChunkBuffers | None = None) -> Iterator[bytearray]:
    """The body in whole-line chunks, cut where pyarrow's streaming JSON reader cuts its
    batches, so a refusal names the same record: the body is read in ``BATCH_BYTES``
    blocks; a chunk is what was carried from the block before and this block up to its
    last newline, the rest is carried on; the final block is taken whole. A block
    without a newline after a carried partial line is refused as the reader refuses it
    (``_STRADDLING``, raised as ``pa.ArrowInvalid``). Each block is read straight in
    behind the carried bytes (into a buffer from ``buffers`` where given), so a chunk
    is never copied whole."""
    buffers = buffers or _ChunkBuffers(keep=0)
    buffer = buffers.take(BATCH_BYTES)
    carried = 0  # bytes at the start of ``buffer`` carried from the block before
    read = stream.readinto(memoryview(buffer)[carried:])
    while read:
        end = carried + read
        cut = buffer.rfind(b"\n", carried, end) + 1
        rest = end - cut if cut else read  # carried on (a block without newline: whole)
        following = buffers.take(rest + BATCH_BYTES)
        following[:rest] = memoryview(buffer)[end - rest : end]
        following_read = stream.readinto(memoryview(following)[rest:])
        if not following_read:
            del buffer[end:]
            yield buffer
            return
        if not cut and carried:
            raise pa.ArrowInvalid(_STRADDLING)
        if cut:
            del buffer[cut:]
            yield buffer
        buffer, carried, read = following, rest, following_read


def _parse_jsonl_chunk(chunk: bytes) -> pa.RecordBatch | None:
    """The events of one chunk: the exact template parser where it proves the chunk is in
    a layout it reads (``formats.jsonl_template``), else pyarrow's JSON reader (which
    raises ``pa.ArrowInvalid`` on what it refuses). None: no events in the chunk."""
    splits = b'_splits"' in chunk  # a split list is for pyarrow's reader, not the template
    batch = None if splits else parse_chunk(chunk)
    if batch is not None:
        return batch
    schema = EVENT_SCHEMA
    if splits:
        schema = schema.append(pa.field("send_splits", pa.list_(pa.int64())))
        schema = schema.append(pa.field("recv_splits", pa.list_(pa.int64())))
    options = pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
    read = pajson.ReadOptions(block_size=len(chunk) + 1, use_threads=False)
    try:
        table = pajson.read_json(pa.BufferReader(chunk), read_options=read, parse_options=options)
    except pa.ArrowInvalid as err:
        if "Empty JSON file" in str(err):
            return None
        raise
    if table.num_rows != _nonblank_lines(chunk):  # pyarrow reads "{...} {...}" as two rows
        raise pa.ArrowInvalid("a line holds more than one JSON value")
    if not table.num_rows:
        return None
    if splits:  # the lists as the texts the columns hold (``split_text``)
        for name in SPLIT_FIELDS:
            lists = table.column(name).to_pylist()
            if any(v is not None and None in v for v in lists):  # located and named slowly
                raise pa.ArrowInvalid(f"{name} holds null")
            texts = [None if v is None else split_text(v) for v in lists]
            table = table.set_column(
                table.schema.get_field_index(name), name, pa.array(texts, type=pa.string())
            )
    return table.combine_chunks().to_batches()[0]


_JSON_BLANKS = np.zeros(256, dtype=bool)
_JSON_BLANKS[[0x20, 0x09, 0x0D]] = True  # JSON whitespace other than the newline


def _nonblank_lines(chunk: bytes) -> int:
    """Lines of ``chunk`` holding anything but JSON whitespace (vectorized: the template
    parser proves one object per line itself, so only pyarrow's chunks pay for this)."""
    data = np.frombuffer(chunk, dtype=np.uint8)
    significant = data[~_JSON_BLANKS[data]]  # newlines and every other byte, in order
    if not significant.size:
        return 0
    newline = significant == 0x0A
    return int(np.count_nonzero(~newline[1:] & newline[:-1]) + (not newline[0]))


def _failed(err: Exception) -> Future:
    """A finished future holding ``err``: a failed read, queued in its turn."""
    future: Future = Future()
    future.set_exception(err)
    return future


def _jsonl_batches(path: str, stream) -> Iterator[tuple[int, pa.RecordBatch]]:
    """(index of the first event, batch) of a JSON Lines body, in file order. This
    thread reads (and so hashes) the chunks; ``PARSE_THREADS`` workers parse the next
    ones while the caller checks the batch it was handed, and one more chunk waits
    read (``CHUNKS_AHEAD``). A read that fails (a
    resource limit, a straddling line) is raised when the batches before it are
    consumed, as the streaming reader raised it."""
    buffers = _ChunkBuffers(keep=CHUNKS_AHEAD + 2)
    chunks = _jsonl_chunks(stream, buffers)
    pending: deque[tuple[Future, bytearray | None]] = deque()
    index = 0
    with stream, ThreadPoolExecutor(PARSE_THREADS, thread_name_prefix="tracecanary-jsonl") as pool:
        try:
            reading = True
            while True:
                while reading and len(pending) < CHUNKS_AHEAD:
                    try:
                        chunk = next(chunks)
                    except StopIteration:
                        reading = False
                    except Exception as err:  # raised in its turn
                        pending.append((_failed(err), None))
                        reading = False
                    else:
                        pending.append((pool.submit(_parse_jsonl_chunk, chunk), chunk))
                if not pending:
                    return
                parsing, chunk = pending.popleft()
                try:
                    batch = parsing.result()
                except pa.ArrowInvalid as err:
                    raise _locate_jsonl_error(path, index, str(err)) from None
                buffers.give(chunk)
                if batch is None:
                    continue
                yield index, batch
                index += batch.num_rows
        finally:  # a refusal or an abandoned read: the workers finish before the close
            for future, _ in pending:
                future.cancel()


def _event_columns(batch: pa.RecordBatch) -> EventColumns:
    """``batch`` as the numpy columns the checks read (the checked text fields
    dictionary-encoded: a code per event into its batch's distinct texts)."""
    ints, present, texts = {}, {}, {}
    for name in INT_FIELDS:
        column = batch.column(name)
        if column.null_count:
            ints[name] = np.asarray(column.fill_null(0))
            present[name] = np.asarray(column.is_valid())
        else:
            ints[name], present[name] = np.asarray(column), None
    names = CHECKED_TEXT_FIELDS
    if batch.schema.get_field_index(SPLIT_FIELDS[0]) >= 0:
        names = (*names, *SPLIT_FIELDS)
    for name in names:
        encoded = batch.column(name).dictionary_encode()
        codes = encoded.indices
        codes = np.asarray(codes.fill_null(-1) if codes.null_count else codes, dtype=np.int64)
        texts[name] = (codes, encoded.dictionary.to_pylist())
    return EventColumns(batch.num_rows, ints, present, texts)


class _SplitsFound(Exception):
    """A JSON Lines batch carries splits, but the output was begun without split columns:
    ``ingest_files`` reads the trace again with them (only such traces pay for it)."""


def _check_batch(
    path: str, first_index: int, batch: pa.RecordBatch, state: TraceState, splits: bool = False
) -> pa.RecordBatch:
    """``check_events`` of one Arrow batch; returns the normalized batch (its columns,
    the issue times and each event's clock domain; with ``splits``, the split columns)."""
    try:  # the JSON reader passes invalid UTF-8 inside strings through
        batch.validate(full=True)
    except pa.ArrowInvalid as err:
        raise _locate_jsonl_error(path, first_index, str(err)) from None
    if not splits and batch.schema.get_field_index(SPLIT_FIELDS[0]) >= 0:
        raise _SplitsFound  # JSON Lines: known only once read; ingest starts again
    issue = check_events(path, first_index, _event_columns(batch), state)
    clock = pa.array(state.clock_names, type=pa.string())
    arrays = [batch.column(name) for name in EVENT_FIELDS]
    arrays.append(pa.array(issue, type=pa.int64()))
    arrays.append(pc.take(clock, batch.column("rank")))
    if not splits:
        return pa.RecordBatch.from_arrays(arrays, schema=NORMALIZED_SCHEMA)
    for name in SPLIT_FIELDS:
        index = batch.schema.get_field_index(name)
        arrays.append(batch.column(index) if index >= 0 else pa.nulls(batch.num_rows, pa.string()))
    return pa.RecordBatch.from_arrays(arrays, schema=with_split_columns(NORMALIZED_SCHEMA))


def _split_rows(
    batches: list[pa.RecordBatch], rows: int
) -> tuple[list[pa.RecordBatch], list[pa.RecordBatch]]:
    """(the first ``rows`` rows, the rest) of a list of batches, as zero-copy slices;
    the rest holds no empty batch."""
    head: list[pa.RecordBatch] = []
    for i, batch in enumerate(batches):
        if batch.num_rows < rows:
            head.append(batch)
            rows -= batch.num_rows
            continue
        head.append(batch.slice(0, rows))
        rest = [batch.slice(rows)] if batch.num_rows > rows else []
        return head, rest + [b for b in batches[i + 1 :] if b.num_rows]
    return head, []


class _FixedRowGroupWriter:
    """Writes row groups of exactly ROW_GROUP_SIZE rows (the last may be shorter, and
    is empty when the rows fill the groups exactly or there are none), each from one
    contiguous table, so the bytes do not depend on how the input was batched.

    A full row group is encoded on a writer thread while the caller goes on; one row
    group at most is in encoding (``write`` waits for it before handing over the next),
    so memory holds at most the row group being encoded and the one being filled."""

    def __init__(self, path: Path, schema=None) -> None:
        self.rows_per_group = ROW_GROUP_SIZE
        self.schema = NORMALIZED_SCHEMA if schema is None else schema
        self.writer = pq.ParquetWriter(path, self.schema, **WRITER_OPTIONS)
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="tracecanary-parquet")
        self._encoding: Future | None = None

    def write(self, batch: pa.RecordBatch) -> None:
        self.pending.append(batch)
        self.pending_rows += batch.num_rows
        while self.pending_rows >= self.rows_per_group:
            group, self.pending = _split_rows(self.pending, self.rows_per_group)
            self.pending_rows -= self.rows_per_group
            self._hand_over(group)

    def _hand_over(self, group: list[pa.RecordBatch]) -> None:
        self._wait()
        self._encoding = self._thread.submit(self._encode, group)

    def _wait(self) -> None:
        if self._encoding is not None:
            encoding, self._encoding = self._encoding, None
            encoding.result()  # re-raises what the writer thread raised

    def _encode(self, group: list[pa.RecordBatch]) -> None:
        table = pa.Table.from_batches(group, schema=self.schema).combine_chunks()
        group.clear()  # the batches can go once their rows are copied
        self.writer.write_table(table, row_group_size=self.rows_per_group)

    def close(self) -> None:
        """Write what is pending as the last row group and finish the file."""
        try:
            if self.pending_rows or not self.pending:
                group, self.pending, self.pending_rows = self.pending, [], 0
                self._hand_over(group)
            self._wait()
        finally:
            self._thread.shutdown(wait=True)
            self.writer.close()

    def abandon(self) -> None:
        """Stop after a refusal: wait for the writer thread, close the (discarded) file."""
        try:
            if self._encoding is not None:
                self._encoding.exception()  # the refusal being raised is what counts
                self._encoding = None
        finally:
            self._thread.shutdown(wait=True)
            with contextlib.suppress(Exception):  # the file is discarded; keep the refusal
                self.writer.close()


def sidecar_path(parquet_path: str | os.PathLike) -> Path:
    """``x.parquet`` -> ``x.meta.json``."""
    p = Path(parquet_path)
    stem = p.name[: -len(".parquet")] if p.name.endswith(".parquet") else p.name
    return p.with_name(stem + ".meta.json")


@dataclass(frozen=True)
class IngestResult:
    parquet: Path
    sidecar: Path
    events: int
    timing: str
    parquet_sha256: str
    sidecar_sha256: str


def ingest_files(
    inputs: list[str], output: str | os.PathLike, limits: Limits | None = None
) -> IngestResult:
    """Validate and normalize ``inputs`` (one trace, possibly split over files) into
    ``output`` (Parquet) and its sidecar; atomic: on any refusal nothing is left."""
    limits = limits or current_limits()
    if not inputs:
        raise InputError("no input files", field="inputs")
    for splits in (False, True):
        sources: list[_Source] = []
        try:
            for p in inputs:
                sources.append(_open_source(str(p), limits))
            return _ingest_sources(sources, Path(output), limits, splits)
        except _SplitsFound:
            continue  # read again, the split columns written from the start
        finally:
            for source in sources:  # streams of inputs not read to their end (a refusal)
                source.close()
            # the batches' buffers went back to Arrow's pool, which keeps freed pages for
            # reuse: hand them to the system, not to the caller's next stage as resident memory
            pa.default_memory_pool().release_unused()
    raise AssertionError("unreachable: the second reading has the split columns")


def _ingest_sources(
    sources: list[_Source], out: Path, limits: Limits, splits: bool = False
) -> IngestResult:
    """Ingest ``sources`` into ``out``; the split columns are written where ``splits`` or
    a JSON document source has them (raises ``_SplitsFound`` where a JSON Lines batch
    brings them unannounced)."""
    header = merge_headers([(s.path, s.header) for s in sources])
    file0 = sources[0].path
    groups = expand_groups(header, file=file0)
    clocks = clock_of_ranks(header, file=file0)
    state = TraceState(
        groups=groups, clocks=clocks, world_size=header["meta"]["world_size"], limits=limits
    )
    side = sidecar_path(out)
    splits = splits or any(source.splits for source in sources)
    with atomic_output(out) as tmp:
        writer = _FixedRowGroupWriter(
            tmp, with_split_columns(NORMALIZED_SCHEMA) if splits else None
        )
        try:
            for source in sources:
                path = source.path
                for first_index, batch in source.batches:
                    if state.events + batch.num_rows > limits.max_events:
                        raise InputError(
                            f"more than max_events={limits.max_events} events", file=path
                        )
                    writer.write(_check_batch(path, first_index, batch, state, splits))
        except BaseException:
            writer.abandon()
            raise
        writer.close()
        timing, skew = state.conclude(file0, header["meta"].get("skew"))
        source_digests = [{"path": Path(s.path).name, "sha256": s.sha256()} for s in sources]
        parquet_sha = sha256_file(tmp)
        ranks_seen = np.flatnonzero(state.seen).tolist()
        sidecar = {
            "format": NORMALIZED_FORMAT,
            "meta": header["meta"],
            "groups": {gid: ranks for gid, ranks in groups.items()},
            "clocks": {str(r): c for r, c in sorted(clocks.items())},
            "timing_semantics": timing,
            "events": state.events,
            "ranks_seen": ranks_seen,
            "skew": skew.to_json(),
            "sources": source_digests,
            "table_sha256": parquet_sha,
        }
        side_sha = write_json(side, sidecar)
    return IngestResult(out, side, state.events, timing, parquet_sha, side_sha)


def read_normalized(path: str | os.PathLike) -> tuple[pa.Table, dict]:
    """(normalized table, sidecar) of an ingested trace."""
    side = sidecar_path(path)
    if not side.is_file():
        raise InputError("normalized table has no .meta.json sidecar beside it", file=str(path))
    return pq.read_table(path), json.loads(side.read_text(encoding="utf-8"))


__all__ = ["ingest_files", "read_normalized", "sidecar_path", "IngestResult", "is_jsonl"]
