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
import json
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson
import pyarrow.parquet as pq

from tracecanary.canonical import atomic_output, sha256_file, write_json
from tracecanary.clocks.status import decide_skew
from tracecanary.columnar_capture import is_columnar, open_columnar
from tracecanary.errors import InputError, ResourceLimitExceeded, SchemaError, TimingError
from tracecanary.formats.ids import NORMALIZED_FORMAT
from tracecanary.formats.jsonl_template import parse_chunk
from tracecanary.formats.trace import (
    EVENT_FIELDS,
    EVENT_SCHEMA,
    INT_FIELDS,
    NORMALIZED_SCHEMA,
    TIME_FIELDS,
    check_event_dict,
    check_header_limits,
    clock_of_ranks,
    expand_groups,
    validate_header,
)
from tracecanary.formats.vocab import OP_PATTERN, OP_RE, OPS, P2P_OPS, ROOTED_OPS
from tracecanary.limits import Limits, current_limits, load_json, open_input, parse_json_bytes
from tracecanary.parquet_io import ROW_GROUP_SIZE, WRITER_OPTIONS

BATCH_BYTES = 1 << 24
PARSE_THREADS = 2  # chunks parsed at once, each on its own worker
CHUNKS_AHEAD = PARSE_THREADS + 1  # read ahead: a worker that finishes finds the next chunk

# the plain op names as one value set; an op outside it is custom (checked by the
# pattern) or unknown. Index lookup tables: position in OPS -> class (-1: not plain).
_OPS = pa.array(OPS, type=pa.string())
_IS_P2P = np.array([name in P2P_OPS for name in OPS] + [False])
_IS_ROOTED = np.array([name in ROOTED_OPS for name in OPS] + [False])
assert all(OP_RE.match(name) for name in OPS)


_NON_NEGATIVE_FIELDS = INT_FIELDS  # every integer field of an event is >= 0
_LIMITED_FIELDS = (("bytes", "max_message_bytes"),) + tuple((t, "max_time_ns") for t in TIME_FIELDS)
assert all(name in _NON_NEGATIVE_FIELDS for name, _ in _LIMITED_FIELDS)


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


def is_jsonl(path: str | os.PathLike) -> bool:
    name = Path(path).name
    return name.endswith(".jsonl") or name.endswith(".jsonl.gz")


class _Membership:
    """Which ranks belong to which declared group, as sorted ``group * world + rank``
    codes: memory grows with the declared members, not groups x world size.
    ``membership[g, r]`` (arrays) is True where rank ``r`` is a member of group ``g``."""

    def __init__(self, groups: dict[str, list[int]], world_size: int) -> None:
        self.world_size = world_size
        parts = [
            g * world_size + np.asarray(ranks, dtype=np.int64)
            for g, ranks in enumerate(groups.values())
        ]
        self.codes = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)

    def __getitem__(self, key: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        group, rank = key
        codes = np.asarray(group, dtype=np.int64) * self.world_size + np.asarray(rank, np.int64)
        pos = np.searchsorted(self.codes, codes)
        found = pos < len(self.codes)
        found[found] = self.codes[pos[found]] == codes[found]
        return found


@dataclass
class _TraceState:
    """What the checks carry across batches and files."""

    groups: dict[str, list[int]]
    clocks: dict[int, str]
    world_size: int
    limits: Limits = field(default_factory=current_limits)
    events: int = 0
    ts_present: int = 0
    ts_absent: int = 0
    # first (file, record) lacking ts_ns / gap_ns, for the end-of-trace semantics check
    first_without_ts: tuple[str, int] | None = None
    first_without_gap: tuple[str, int] | None = None
    # per rank: last seq and issue time seen, and whether any event was seen
    last_seq: np.ndarray = field(init=False)
    last_issue: np.ndarray = field(init=False)
    seen: np.ndarray = field(init=False)
    member: _Membership = field(init=False)
    declared: pa.Array = field(init=False)
    clock: pa.Array = field(init=False)

    def __post_init__(self) -> None:
        self.last_seq = np.full(self.world_size, -1, dtype=np.int64)
        self.last_issue = np.zeros(self.world_size, dtype=np.int64)
        self.seen = np.zeros(self.world_size, dtype=bool)
        self.declared = pa.array(list(self.groups), type=pa.string())
        self.member = _Membership(self.groups, self.world_size)
        self.clock = pa.array([self.clocks[r] for r in range(self.world_size)], type=pa.string())


@dataclass
class _Source:
    """One input file: its header, its event batches as (index of the batch's first
    event, batch), and the digest its bytes feed while they stream (JSON Lines)."""

    path: str
    header: dict
    batches: Iterator[tuple[int, pa.RecordBatch]]
    digest: _StreamDigest | None = None
    stream: BinaryIO | None = None

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
            first = stream.readline(limits.max_json_document_bytes)
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
    doc = load_json(path, limits)
    validate_header(doc, file=path)
    if not isinstance(doc.get("events"), list):
        raise SchemaError("a JSON trace needs an events list", file=path, field="events")
    check_header_limits(doc, limits, file=path)
    return _Source(path, doc, _json_batches(path, doc["events"]))


def _header_and_batches(
    path: str, limits: Limits
) -> tuple[dict, Iterator[tuple[int, pa.RecordBatch]]]:
    """(header, iterator of (index of the batch's first event, batch)) of one input
    (merge.py reads the ranks of captures this way)."""
    source = _open_source(path, limits, hash_input=False)
    return source.header, source.batches


def _json_batches(path: str, events: list) -> Iterator[tuple[int, pa.RecordBatch]]:
    step = 1 << 18
    for start in range(0, len(events), step):
        chunk = events[start : start + step]
        for offset, event in enumerate(chunk):
            check_event_dict(event, file=path, record=start + offset)
        yield start, pa.RecordBatch.from_pylist(chunk, schema=EVENT_SCHEMA)


def _locate_jsonl_error(path: str, first_index: int, message: str) -> InputError:
    """Re-read the file slowly to name the record and field behind a fast-path failure."""
    with open_input(path) as stream:
        stream.readline()
        for index, line in enumerate(stream):
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
    batch = parse_chunk(chunk)
    if batch is not None:
        return batch
    options = pajson.ParseOptions(explicit_schema=EVENT_SCHEMA, unexpected_field_behavior="error")
    read = pajson.ReadOptions(block_size=len(chunk) + 1, use_threads=False)
    try:
        table = pajson.read_json(pa.BufferReader(chunk), read_options=read, parse_options=options)
    except pa.ArrowInvalid as err:
        if "Empty JSON file" in str(err):
            return None
        raise
    return table.combine_chunks().to_batches()[0] if table.num_rows else None


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


def _first_false(mask: np.ndarray) -> int | None:
    bad = np.flatnonzero(~mask)
    return int(bad[0]) if bad.size else None


def _refuse_at(path: str, first_index: int, row: int, field: str, message: str, cls=SchemaError):
    raise cls(message, file=path, record=first_index + row, field=field)


def _segment_shift(values: np.ndarray, starts: np.ndarray, first: np.ndarray) -> np.ndarray:
    """``values`` shifted by one inside each segment (segments begin at ``starts``), the
    first element of each segment taken from ``first``."""
    out = np.empty_like(values)
    out[1:] = values[:-1]
    out[starts] = first
    return out


def _issue_times(
    path: str,
    first_index: int,
    rank: np.ndarray,
    seq: np.ndarray,
    ts: np.ndarray,
    gap: np.ndarray,
    has_ts: np.ndarray,
    has_gap: np.ndarray,
    state: _TraceState,
) -> np.ndarray:
    """Per-rank ``seq`` order and issue times of one batch, vectorized over all ranks.

    Works on the batch sorted by rank (stable, so file order within a rank); segment-wise
    cumulative sums carry each rank's last issue time across batches. Refusals name the
    same event the per-rank scan would: the lowest rank with a fault, and in it the
    first ``seq`` fault, else the first backwards timestamp, else the first
    contradicting gap."""
    n = rank.size
    issue = np.empty(n, dtype=np.int64)
    if n == 0:
        return issue
    order = np.argsort(rank, kind="stable")
    r_sorted = rank[order]
    starts = np.flatnonzero(np.concatenate(([True], r_sorted[1:] != r_sorted[:-1])))
    seg_rank = r_sorted[starts]
    seg_id = np.repeat(np.arange(starts.size), np.diff(np.append(starts, n)))
    pos = np.arange(n) - starts[seg_id]  # position inside the rank's segment
    s, t, g = seq[order], ts[order], gap[order]
    hts, hgap = has_ts[order], has_gap[order]

    prev_seq = _segment_shift(s, starts, state.last_seq[seg_rank])
    seq_bad = s <= prev_seq
    # issue = last timestamp at or before the event + the gaps since; else the rank's
    # previous issue + the gaps since the segment start
    cum_all = np.cumsum(g)
    cum = cum_all - np.repeat(cum_all[starts] - g[starts], np.diff(np.append(starts, n)))
    last_ts = np.maximum.accumulate(np.where(hts, np.arange(n), -1))
    in_seg = last_ts >= starts[seg_id]
    anchor = np.maximum(last_ts, 0)
    base = np.where(in_seg, t[anchor] - cum[anchor], state.last_issue[r_sorted])
    seg_issue = np.where(hts, t, base + cum)
    prev_issue = _segment_shift(seg_issue, starts, state.last_issue[seg_rank])
    has_prev = (pos > 0) | state.seen[r_sorted]
    back_bad = has_prev & hts & (t < prev_issue)
    contra_bad = has_prev & hts & hgap & (g != t - prev_issue)
    bad = seq_bad | back_bad | contra_bad
    if bad.any():
        seg = seg_id[int(np.flatnonzero(bad)[0])]
        lo = starts[seg]
        hi = starts[seg + 1] if seg + 1 < starts.size else n
        r = int(seg_rank[seg])
        faults = ((seq_bad, "seq"), (back_bad, "ts"), (contra_bad, "gap"))
        mask, kind = next((m, name) for m, name in faults if m[lo:hi].any())
        k = lo + int(np.flatnonzero(mask[lo:hi])[0])
        i = int(order[k])
        if kind == "seq":
            _refuse_at(
                path,
                first_index,
                i,
                "seq",
                f"seq {seq[i]} of rank {r} does not increase (previous {prev_seq[k]}); duplicate or out-of-order event",
            )
        if kind == "ts":
            _refuse_at(
                path,
                first_index,
                i,
                "ts_ns",
                f"timestamp goes backwards on rank {r} ({ts[i]} < previous issue {prev_issue[k]})",
                TimingError,
            )
        _refuse_at(
            path,
            first_index,
            i,
            "gap_ns",
            f"gap_ns {g[k]} contradicts ts_ns (difference to the previous event is {t[k] - prev_issue[k]})",
            TimingError,
        )
    issue[order] = seg_issue
    ends = np.append(starts[1:], n) - 1
    state.last_seq[seg_rank] = s[ends]
    state.last_issue[seg_rank] = seg_issue[ends]
    state.seen[seg_rank] = True
    return issue


def _check_batch(
    path: str, first_index: int, batch: pa.RecordBatch, state: _TraceState
) -> pa.RecordBatch:
    """Vectorized semantic checks of one batch; returns the normalized batch."""
    n = batch.num_rows
    try:  # the JSON reader passes invalid UTF-8 inside strings through
        batch.validate(full=True)
    except pa.ArrowInvalid as err:
        raise _locate_jsonl_error(path, first_index, str(err)) from None
    col = {name: batch.column(name) for name in EVENT_FIELDS}
    for name in ("rank", "seq", "op", "bytes", "dtype", "group"):
        if col[name].null_count:
            row = _first_false(np.asarray(col[name].is_valid()))
            _refuse_at(path, first_index, row, name, "required field missing")
    # one min/max pass per integer column decides both the sign and the limit checks;
    # rows are located (as before: the first offending row) only when a check fails
    extremes = {}
    for name in _NON_NEGATIVE_FIELDS:
        values = col[name]
        if values.null_count == n:
            continue
        extremes[name] = pc.min_max(values)
        if extremes[name]["min"].as_py() < 0:
            neg = pc.fill_null(pc.less(values, 0), False)
            row = int(np.flatnonzero(np.asarray(neg))[0])
            _refuse_at(
                path, first_index, row, name, f"must be non-negative, got {values[row].as_py()}"
            )
    limits = state.limits
    for name, limit_name in _LIMITED_FIELDS:
        if name not in extremes:
            continue
        limit = getattr(limits, limit_name)
        if extremes[name]["max"].as_py() > limit:
            values = col[name]
            over = np.asarray(pc.fill_null(pc.greater(values, limit), False))
            row = int(np.flatnonzero(over)[0])
            limits.check(
                limit_name,
                int(values[row].as_py()),
                file=path,
                record=first_index + row,
                field=name,
            )
    # a plain op name is found by one hash lookup; only a batch holding other names
    # (custom ops, or unknown ones) runs the pattern over every op
    op_code = pc.index_in(col["op"], value_set=_OPS)
    row = None
    if op_code.null_count:
        row = _first_false(np.asarray(pc.match_substring_regex(col["op"], OP_PATTERN)))
    if row is not None:
        _refuse_at(
            path,
            first_index,
            row,
            "op",
            f"unknown op {col['op'][row].as_py()!r}: use a known op or custom:<name>",
        )
    for name in ("dtype", "group"):
        row = _first_false(np.asarray(pc.not_equal(col[name], "")))
        if row is not None:
            _refuse_at(path, first_index, row, name, "must not be empty")

    rank = np.asarray(col["rank"])
    seq = np.asarray(col["seq"])
    op = col["op"]
    group = col["group"]

    row = _first_false(rank < state.world_size)
    if row is not None:
        _refuse_at(
            path,
            first_index,
            row,
            "rank",
            f"rank {rank[row]} outside world_size {state.world_size}",
        )
    group_code = pc.index_in(group, value_set=state.declared)
    if group_code.null_count:
        row = _first_false(np.asarray(group_code.is_valid()))
        _refuse_at(path, first_index, row, "group", f"group {group[row].as_py()!r} is not declared")

    # membership: encode (group index, rank) pairs and look them up
    gindex = np.asarray(group_code)
    member = state.member
    row = _first_false(member[gindex, rank])
    if row is not None:
        _refuse_at(
            path,
            first_index,
            row,
            "rank",
            f"rank {rank[row]} is not a member of group {group[row].as_py()!r}",
        )

    op_index = np.asarray(op_code.fill_null(-1))
    is_p2p = _IS_P2P[op_index]
    is_rooted = _IS_ROOTED[op_index]
    peer_valid = np.asarray(col["peer"].is_valid())
    root_valid = np.asarray(col["root"].is_valid())
    row = _first_false(~is_p2p | peer_valid)
    if row is not None:
        _refuse_at(path, first_index, row, "peer", f"{op[row].as_py()} needs a peer rank")
    row = _first_false(is_p2p | ~peer_valid)
    if row is not None:
        _refuse_at(path, first_index, row, "peer", f"peer is meaningless for {op[row].as_py()}")
    row = _first_false(~is_rooted | root_valid)
    if row is not None:
        _refuse_at(path, first_index, row, "root", f"{op[row].as_py()} needs a root rank")
    row = _first_false(is_rooted | ~root_valid)
    if row is not None:
        _refuse_at(path, first_index, row, "root", f"root is meaningless for {op[row].as_py()}")
    peer = np.asarray(col["peer"].fill_null(0))
    root = np.asarray(col["root"].fill_null(0))
    row = _first_false(
        ~is_p2p
        | ((peer < state.world_size) & member[gindex, np.minimum(peer, state.world_size - 1)])
    )
    if row is not None:
        _refuse_at(
            path,
            first_index,
            row,
            "peer",
            f"peer {peer[row]} is not a member of group {group[row].as_py()!r}",
        )
    row = _first_false(~is_p2p | (peer != rank))
    if row is not None:
        _refuse_at(path, first_index, row, "peer", "peer equals the rank itself")
    row = _first_false(
        ~is_rooted
        | ((root < state.world_size) & member[gindex, np.minimum(root, state.world_size - 1)])
    )
    if row is not None:
        _refuse_at(
            path,
            first_index,
            row,
            "root",
            f"root {root[row]} is not a member of group {group[row].as_py()!r}",
        )

    # timing
    has_ts = np.asarray(col["ts_ns"].is_valid())
    has_gap = np.asarray(col["gap_ns"].is_valid())
    row = _first_false(has_ts | has_gap)
    if row is not None:
        _refuse_at(
            path, first_index, row, "gap_ns", "event has neither ts_ns nor gap_ns", TimingError
        )
    ts = np.asarray(col["ts_ns"].fill_null(0))
    gap = np.asarray(col["gap_ns"].fill_null(0))
    # every value is <= max_time_ns < 2**63; issue times add gaps to the latest issue,
    # so bound their sum before int64 arithmetic could wrap around
    reach = max(int(state.last_issue.max(initial=0)), int(ts.max(initial=0)))
    reach += float(gap.sum(dtype=np.float64))
    if reach > limits.max_time_ns:
        raise ResourceLimitExceeded(
            f"issue times (timestamps plus gaps) reach {reach:.4g} ns, over "
            f"max_time_ns={limits.max_time_ns}",
            file=path,
            record=first_index,
            field="gap_ns",
        )
    state.ts_present += int(has_ts.sum())
    state.ts_absent += int(n - has_ts.sum())
    if state.first_without_ts is None and not has_ts.all():
        state.first_without_ts = (path, first_index + _first_false(has_ts))
    if state.first_without_gap is None and not has_gap.all():
        state.first_without_gap = (path, first_index + _first_false(has_gap))

    issue = _issue_times(path, first_index, rank, seq, ts, gap, has_ts, has_gap, state)
    state.events += n
    clock = state.clock
    arrays = [batch.column(name) for name in EVENT_FIELDS]
    arrays.append(pa.array(issue, type=pa.int64()))
    arrays.append(pc.take(clock, pa.array(rank)))
    return pa.RecordBatch.from_arrays(arrays, schema=NORMALIZED_SCHEMA)


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

    def __init__(self, path: Path) -> None:
        self.rows_per_group = ROW_GROUP_SIZE
        self.writer = pq.ParquetWriter(path, NORMALIZED_SCHEMA, **WRITER_OPTIONS)
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
        table = pa.Table.from_batches(group, schema=NORMALIZED_SCHEMA).combine_chunks()
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


def _merge_headers(headers: list[tuple[str, dict]]) -> dict:
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
    sources: list[_Source] = []
    try:
        for p in inputs:
            sources.append(_open_source(str(p), limits))
        return _ingest_sources(sources, Path(output), limits)
    finally:
        for source in sources:  # streams of inputs not read to their end (a refusal)
            source.close()
        # the batches' buffers went back to Arrow's pool, which keeps freed pages for
        # reuse: hand them to the system, not to the caller's next stage as resident memory
        pa.default_memory_pool().release_unused()


def _ingest_sources(sources: list[_Source], out: Path, limits: Limits) -> IngestResult:
    header = _merge_headers([(s.path, s.header) for s in sources])
    file0 = sources[0].path
    groups = expand_groups(header, file=file0)
    clocks = clock_of_ranks(header, file=file0)
    state = _TraceState(
        groups=groups, clocks=clocks, world_size=header["meta"]["world_size"], limits=limits
    )
    side = sidecar_path(out)
    with atomic_output(out) as tmp:
        writer = _FixedRowGroupWriter(tmp)
        try:
            for source in sources:
                path = source.path
                for first_index, batch in source.batches:
                    if state.events + batch.num_rows > limits.max_events:
                        raise InputError(
                            f"more than max_events={limits.max_events} events", file=path
                        )
                    writer.write(_check_batch(path, first_index, batch, state))
        except BaseException:
            writer.abandon()
            raise
        writer.close()
        if state.events == 0:  # nothing to compile, replay or verify: say so here
            raise InputError(
                "no collectives found: the trace has no events; capture the part of the run "
                "that communicates",
                file=file0,
                field="events",
            )
        timing = _timing_semantics(state)
        source_digests = [{"path": Path(s.path).name, "sha256": s.sha256()} for s in sources]
        parquet_sha = sha256_file(tmp)
        ranks_seen = np.flatnonzero(state.seen).tolist()
        skew = decide_skew(clocks, ranks_seen, groups, header["meta"].get("skew"), file=file0)
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


def _timing_semantics(state: _TraceState) -> str:
    if state.ts_absent == 0:
        return "timestamps"
    if state.ts_present == 0:
        return "gaps"
    if state.first_without_gap is not None:
        path, record = state.first_without_gap
        raise TimingError(
            "mixed timing semantics: some events carry ts_ns and some do not, so every event needs its own gap_ns",
            file=path,
            record=record,
            field="gap_ns",
        )
    return "mixed_with_gaps"


def read_normalized(path: str | os.PathLike) -> tuple[pa.Table, dict]:
    """(normalized table, sidecar) of an ingested trace."""
    side = sidecar_path(path)
    if not side.is_file():
        raise InputError("normalized table has no .meta.json sidecar beside it", file=str(path))
    return pq.read_table(path), json.loads(side.read_text(encoding="utf-8"))


__all__ = ["ingest_files", "read_normalized", "sidecar_path", "IngestResult", "is_jsonl"]
