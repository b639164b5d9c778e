"""Ingest: validate native traces and normalize them into one Parquet table.

Guarantees of ``ingest_files``:
- every refusal of the format (DESIGN.md §3 ingest) raises an ``InputError`` naming the
  file, the event's index in that file and the field; nothing is written then;
- one timing semantics per trace: every event has ``ts_ns``, or none has and gaps
  govern; mixed only when every event carries its own ``gap_ns``; a ``gap_ns`` that
  contradicts the timestamps is rejected, never arbitrated;
- JSON and JSON Lines forms of one trace give the same Parquet bytes;
- JSON Lines is read in bounded batches: memory grows with the batch size and the
  output row group, not with the trace.

Normalized rows keep file order (per rank, ``seq`` must increase in file order) and add
``issue_ns`` (``ts_ns`` where given, else the previous issue plus ``gap_ns``; a rank's
first gap counts from its clock's origin) and ``clock`` (the rank's clock domain).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson
import pyarrow.parquet as pq

from tracecanary.canonical import atomic_output, sha256_file, write_json
from tracecanary.errors import InputError, SchemaError, TimingError
from tracecanary.limits import Limits, current_limits, load_json, open_input
from tracecanary.parquet_io import ROW_GROUP_SIZE, WRITER_OPTIONS
from tracecanary.trace_format import (
    EVENT_FIELDS,
    EVENT_SCHEMA,
    NORMALIZED_FORMAT,
    NORMALIZED_SCHEMA,
    OP_PATTERN,
    P2P_OPS,
    ROOTED_OPS,
    check_event_dict,
    clock_of_ranks,
    expand_groups,
    validate_header,
)

BATCH_BYTES = 1 << 24


def is_jsonl(path: str | os.PathLike) -> bool:
    name = Path(path).name
    return name.endswith(".jsonl") or name.endswith(".jsonl.gz")


@dataclass
class _RankState:
    last_seq: int = -1
    last_issue: int = 0
    seen: bool = False


@dataclass
class _TraceState:
    """What the checks carry across batches and files."""

    groups: dict[str, list[int]]
    clocks: dict[int, str]
    world_size: int
    ranks: dict[int, _RankState] = field(default_factory=dict)
    events: int = 0
    ts_present: int = 0
    ts_absent: int = 0
    # first (file, record) lacking ts_ns / gap_ns, for the end-of-trace semantics check
    first_without_ts: tuple[str, int] | None = None
    first_without_gap: tuple[str, int] | None = None


def _header_and_batches(
    path: str, limits: Limits
) -> tuple[dict, Iterator[tuple[int, pa.RecordBatch]]]:
    """(header, iterator of (index of the batch's first event, batch))."""
    if is_jsonl(path):
        stream = open_input(path, limits)
        first = stream.readline(limits.max_json_document_bytes)
        try:
            header = json.loads(first)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            stream.close()
            raise InputError(
                f"header line is not valid JSON: {err}", file=path, record="header"
            ) from None
        validate_header(header, file=path)
        if "events" in header:
            stream.close()
            raise SchemaError("a JSON Lines header must not hold events", file=path, field="events")
        return header, _jsonl_batches(path, stream)
    doc = load_json(path, limits)
    validate_header(doc, file=path)
    return doc, _json_batches(path, doc["events"])


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
            try:
                event = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as err:
                return SchemaError(f"not valid JSON: {err}", file=path, record=index)
            try:
                check_event_dict(event, file=path, record=index)
            except SchemaError as err:
                return err
    return SchemaError(f"unreadable event data: {message}"[:300], file=path, record=first_index)


def _jsonl_batches(path: str, stream) -> Iterator[tuple[int, pa.RecordBatch]]:
    options = pajson.ParseOptions(explicit_schema=EVENT_SCHEMA, unexpected_field_behavior="error")
    reader_options = pajson.ReadOptions(block_size=BATCH_BYTES)
    index = 0
    try:
        with stream:
            try:
                reader = pajson.open_json(
                    stream, read_options=reader_options, parse_options=options
                )
            except pa.ArrowInvalid as err:
                if "Empty JSON file" in str(err):
                    return
                raise _locate_jsonl_error(path, index, str(err)) from None
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    return
                except pa.ArrowInvalid as err:
                    raise _locate_jsonl_error(path, index, str(err)) from None
                yield index, batch
                index += batch.num_rows
    except pa.ArrowInvalid as err:  # raised while opening on an empty body, etc.
        raise _locate_jsonl_error(path, index, str(err)) from None


def _first_false(mask: np.ndarray) -> int | None:
    bad = np.flatnonzero(~mask)
    return int(bad[0]) if bad.size else None


def _refuse_at(path: str, first_index: int, row: int, field: str, message: str, cls=SchemaError):
    raise cls(message, file=path, record=first_index + row, field=field)


def _check_batch(
    path: str, first_index: int, batch: pa.RecordBatch, state: _TraceState
) -> pa.RecordBatch:
    """Vectorized semantic checks of one batch; returns the normalized batch."""
    n = batch.num_rows
    col = {name: batch.column(name) for name in EVENT_FIELDS}
    for name in ("rank", "seq", "op", "bytes", "dtype", "group"):
        if col[name].null_count:
            row = _first_false(np.asarray(col[name].is_valid()))
            _refuse_at(path, first_index, row, name, "required field missing")
    for name in (
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
    ):
        values = col[name]
        if values.null_count == n:
            continue
        neg = pc.fill_null(pc.less(values, 0), False)
        if pc.any(neg).as_py():
            row = int(np.flatnonzero(np.asarray(neg))[0])
            _refuse_at(
                path, first_index, row, name, f"must be non-negative, got {values[row].as_py()}"
            )
    ok_op = np.asarray(pc.match_substring_regex(col["op"], OP_PATTERN))
    row = _first_false(ok_op)
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
    op = np.asarray(col["op"].to_numpy(zero_copy_only=False), dtype=object)
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
    declared = pa.array(list(state.groups), type=pa.string())
    known_group = np.asarray(pc.is_in(group, value_set=declared))
    row = _first_false(known_group)
    if row is not None:
        _refuse_at(path, first_index, row, "group", f"group {group[row].as_py()!r} is not declared")

    # membership: encode (group index, rank) pairs and look them up
    gindex = np.asarray(pc.index_in(group, value_set=declared))
    member = np.zeros((len(state.groups), state.world_size), dtype=bool)
    for g, ranks in enumerate(state.groups.values()):
        member[g, ranks] = True
    row = _first_false(member[gindex, rank])
    if row is not None:
        _refuse_at(
            path,
            first_index,
            row,
            "rank",
            f"rank {rank[row]} is not a member of group {group[row].as_py()!r}",
        )

    is_p2p = np.isin(op, P2P_OPS)
    is_rooted = np.isin(op, ROOTED_OPS)
    peer_valid = np.asarray(col["peer"].is_valid())
    root_valid = np.asarray(col["root"].is_valid())
    row = _first_false(~is_p2p | peer_valid)
    if row is not None:
        _refuse_at(path, first_index, row, "peer", f"{op[row]} needs a peer rank")
    row = _first_false(is_p2p | ~peer_valid)
    if row is not None:
        _refuse_at(path, first_index, row, "peer", f"peer is meaningless for {op[row]}")
    row = _first_false(~is_rooted | root_valid)
    if row is not None:
        _refuse_at(path, first_index, row, "root", f"{op[row]} needs a root rank")
    row = _first_false(is_rooted | ~root_valid)
    if row is not None:
        _refuse_at(path, first_index, row, "root", f"root is meaningless for {op[row]}")
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
    state.ts_present += int(has_ts.sum())
    state.ts_absent += int(n - has_ts.sum())
    if state.first_without_ts is None and not has_ts.all():
        state.first_without_ts = (path, first_index + _first_false(has_ts))
    if state.first_without_gap is None and not has_gap.all():
        state.first_without_gap = (path, first_index + _first_false(has_gap))

    issue = np.empty(n, dtype=np.int64)
    order = np.argsort(rank, kind="stable")
    bounds = np.flatnonzero(np.diff(rank[order])) + 1
    for seg in np.split(order, bounds):
        r = int(rank[seg[0]])
        st = state.ranks.setdefault(r, _RankState())
        s = seq[seg]
        prev_seq = np.concatenate(([st.last_seq], s[:-1]))
        bad = np.flatnonzero(s <= prev_seq)
        if bad.size:
            i = seg[bad[0]]
            _refuse_at(
                path,
                first_index,
                int(i),
                "seq",
                f"seq {seq[i]} of rank {r} does not increase (previous {prev_seq[bad[0]]}); duplicate or out-of-order event",
            )
        t, g, hts, hgap = ts[seg], gap[seg], has_ts[seg], has_gap[seg]
        cum = np.cumsum(g)
        last_ts = np.maximum.accumulate(np.where(hts, np.arange(len(seg)), -1))
        base = np.where(
            last_ts >= 0, t[np.maximum(last_ts, 0)] - cum[np.maximum(last_ts, 0)], st.last_issue
        )
        seg_issue = base + cum
        seg_issue = np.where(hts, t, seg_issue)
        prev_issue = np.concatenate(([st.last_issue], seg_issue[:-1]))
        has_prev = np.ones(len(seg), dtype=bool)
        has_prev[0] = st.seen
        back = np.flatnonzero(has_prev & hts & (t < prev_issue))
        if back.size:
            i = seg[back[0]]
            _refuse_at(
                path,
                first_index,
                int(i),
                "ts_ns",
                f"timestamp goes backwards on rank {r} ({ts[i]} < previous issue {prev_issue[back[0]]})",
                TimingError,
            )
        contra = np.flatnonzero(has_prev & hts & hgap & (g != t - prev_issue))
        if contra.size:
            k = contra[0]
            i = seg[k]
            _refuse_at(
                path,
                first_index,
                int(i),
                "gap_ns",
                f"gap_ns {g[k]} contradicts ts_ns (difference to the previous event is {t[k] - prev_issue[k]})",
                TimingError,
            )
        issue[seg] = seg_issue
        st.last_seq = int(s[-1])
        st.last_issue = int(seg_issue[-1])
        st.seen = True
    state.events += n
    clock = pa.array([state.clocks[int(r)] for r in range(state.world_size)], type=pa.string())
    arrays = [batch.column(name) for name in EVENT_FIELDS]
    arrays.append(pa.array(issue, type=pa.int64()))
    arrays.append(pc.take(clock, pa.array(rank)))
    return pa.RecordBatch.from_arrays(arrays, schema=NORMALIZED_SCHEMA)


class _FixedRowGroupWriter:
    """Writes row groups of exactly ROW_GROUP_SIZE rows (the last may be shorter), so the
    bytes do not depend on how the input was batched."""

    def __init__(self, path: Path) -> None:
        self.writer = pq.ParquetWriter(path, NORMALIZED_SCHEMA, **WRITER_OPTIONS)
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0

    def write(self, batch: pa.RecordBatch) -> None:
        self.pending.append(batch)
        self.pending_rows += batch.num_rows
        while self.pending_rows >= ROW_GROUP_SIZE:
            table = pa.Table.from_batches(self.pending, schema=NORMALIZED_SCHEMA)
            self.writer.write_table(
                table.slice(0, ROW_GROUP_SIZE).combine_chunks(), row_group_size=ROW_GROUP_SIZE
            )
            rest = table.slice(ROW_GROUP_SIZE).combine_chunks()
            self.pending = rest.to_batches() if rest.num_rows else []
            self.pending_rows = rest.num_rows

    def close(self) -> None:
        if self.pending_rows or not self.pending:
            table = pa.Table.from_batches(self.pending, schema=NORMALIZED_SCHEMA).combine_chunks()
            self.writer.write_table(table, row_group_size=ROW_GROUP_SIZE)
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
    opened = [(str(p), *_header_and_batches(str(p), limits)) for p in inputs]
    header = _merge_headers([(p, h) for p, h, _ in opened])
    file0 = opened[0][0]
    groups = expand_groups(header, file=file0)
    clocks = clock_of_ranks(header, file=file0)
    state = _TraceState(groups=groups, clocks=clocks, world_size=header["meta"]["world_size"])
    out = Path(output)
    side = sidecar_path(out)
    with atomic_output(out) as tmp:
        writer = _FixedRowGroupWriter(tmp)
        try:
            for path, _, batches in opened:
                for first_index, batch in batches:
                    if state.events + batch.num_rows > limits.max_events:
                        raise InputError(
                            f"more than max_events={limits.max_events} events", file=path
                        )
                    writer.write(_check_batch(path, first_index, batch, state))
        finally:
            writer.close()
        timing = _timing_semantics(state)
        parquet_sha = sha256_file(tmp)
        sidecar = {
            "format": NORMALIZED_FORMAT,
            "meta": header["meta"],
            "groups": {gid: ranks for gid, ranks in groups.items()},
            "clocks": {str(r): c for r, c in sorted(clocks.items())},
            "timing_semantics": timing,
            "events": state.events,
            "ranks_seen": sorted(state.ranks),
            "sources": [{"path": Path(p).name, "sha256": sha256_file(p)} for p, _, _ in opened],
            "table_sha256": parquet_sha,
        }
        side_sha = write_json(side, sidecar)
    return IngestResult(out, side, state.events, timing, sha256_file(out), side_sha)


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
