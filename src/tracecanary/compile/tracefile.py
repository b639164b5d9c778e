"""Write a ``Program`` as a native trace (``tracecanary.trace/v1`` JSON), vectorized.

One event per member per occurrence, in occurrence order then rank order (each rank's
events in its issue order where the occurrence order breaks it: see ``trace_bytes``):
``rank``, ``seq`` (the rank's issue order), ``op``, ``bytes``, ``dtype``, ``group``,
``instance`` (per-group sequence), ``root`` (when >= 0), ``peer`` and ``send``/``recv``
for a matched pair (group ``p2p:<src>-><dst>``), ``phase``/``stream`` when not empty,
``latency_ns``/``overlap_ns`` where measured (each member's own value where the program
holds it, ``Program.member_values``: a source, a lossless expansion; else the
occurrence's value, i.e. the max over members, written on every member), and ``ts_ns``:

* skew known: ``ts_ns = issue time + skew`` on one synthetic reference clock (all
  ranks in clock domain ``synthetic``), issue time = cumulative gaps (shifted to start
  at 0 where a canonical order's signed gaps take it below);
* skew unknown: ``ts_ns`` = the occurrence's issue time on each rank's own clock
  domain (one domain per rank): ranks are not comparable, so no skew is implied; the
  meta notes say so.

The ``.json`` bytes equal ``canonical_json_bytes`` of the same document; ``.jsonl``
has the header line (everything but ``events``) then one canonical event per line.
"""

from __future__ import annotations

import gzip
import io
import re
from pathlib import Path

import numpy as np

from tracecanary.canonical import atomic_output, canonical_json_bytes, sha256_bytes
from tracecanary.compile import jsonvec as jv
from tracecanary.errors import ExportRefused
from tracecanary.factorize import cumcount, sorted_distinct
from tracecanary.formats.ids import TRACE_FORMAT
from tracecanary.formats.vocab import DTYPE_BYTES
from tracecanary.program import SPLITS_COLUMN, Program

_P2P = re.compile(r"^p2p:(\d+)->(\d+)$")


def _text(b: bytes) -> str:
    return b.decode("utf-8")[:-1]  # canonical JSON without the trailing newline


def _group_list(program: Program, m_occ: np.ndarray, ranks: np.ndarray) -> list[dict]:
    """``[{"id": group, "ranks": [...]}]``: every group with members, by id, each with
    the distinct ranks of its members, ascending."""
    codes, names = program.factorized("group", sort=True)
    width = int(ranks.max()) + 1 if len(ranks) else 1
    pairs = sorted_distinct(codes[m_occ] * width + ranks)  # (group, rank), sorted by both
    group_of, rank_of = np.divmod(pairs, width)
    bounds = np.searchsorted(group_of, np.arange(len(names) + 1)).tolist()
    ranks_list = rank_of.tolist()
    return [
        {"id": name, "ranks": ranks_list[bounds[g] : bounds[g + 1]]}
        for g, name in enumerate(names)
        if bounds[g + 1] > bounds[g]
    ]


def _member_splits(splits: np.ndarray, m_occ: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per member (``m_occ``: its occurrence; members in rank order within one): its
    ``send_splits`` and ``recv_splits`` as comma-joined text, "" where its occurrence has
    no splits (row and column k of the occurrence's send matrix for its k-th member), and
    the elements it sends (-1 where no splits)."""
    send = np.full(len(m_occ), "", dtype=object)
    recv = np.full(len(m_occ), "", dtype=object)
    sent = np.full(len(m_occ), -1, dtype=np.int64)  # elements sent; -1: no splits
    position = cumcount(m_occ)
    for row in np.flatnonzero(splits[m_occ] != "").tolist():
        matrix = [part.split(",") for part in splits[m_occ[row]].split(";")]
        k = int(position[row])
        send[row] = ",".join(matrix[k])
        recv[row] = ",".join(line[k] for line in matrix)
        sent[row] = sum(int(v) for v in matrix[k])
    return send, recv, sent


def _optional_list(tx, key: str, texts: np.ndarray | None) -> tuple:
    """The ``,"key":[...]`` part of each member's event where ``texts`` (comma-joined
    integers) is not empty; nothing at all for a program without splits."""
    if texts is None:
        return ()
    body = tx.texts([str(t) for t in texts.tolist()])
    return (tx.optional(texts != "", tx.concat(f',"{key}":[', body, "]")),)


def trace_bytes(program: Program, meta: dict, *, lines: bool = False) -> bytes:
    """The trace document: canonical JSON, or (``lines``) JSON Lines: a header line with
    everything but ``events``, then one canonical event per line. Reads the program
    through its column accessors (pandas only where it holds DataFrames); the text is
    built by the ``jsonvec`` builder for its size (the bytes do not depend on which)."""
    n = program.n
    m_occ = program.member_column("occ", np.int64)
    ranks = program.member_column("rank", np.int64)
    tx = jv.builder(max(n, len(m_occ)))
    issue = program.issue_ns()
    if n and issue.min() < 0:  # canonical order: an occurrence issued before the first
        issue = issue - issue.min()
    skew = program.member_column("skew_ns", np.int64) if program.skew_known else 0
    ts = issue[m_occ] + skew
    # each rank's events are written in its issue order (ts, then occurrence order), in
    # the slots its members hold in occurrence order: the same rows wherever occurrence
    # order keeps every rank's issue order; a canonical order that breaks a cycle of
    # crossing sends and receives does not, and a trace must not go back in time
    by_slot = np.lexsort((np.arange(len(m_occ)), ranks))
    by_issue = np.lexsort((np.arange(len(m_occ)), ts, ranks))
    if not np.array_equal(by_slot, by_issue):
        rows = np.empty_like(by_slot)
        rows[by_slot] = by_issue
        m_occ, ranks, ts = m_occ[rows], ranks[rows], ts[rows]
    seq = cumcount(ranks).astype(np.int64)
    instance = cumcount(program.factorized("group", sort=False)[0]).astype(np.int64)

    groups = program.column("group", object)
    occ_op = program.column("op", object)
    op = occ_op[m_occ]  # a copy (taken rows): pair members become send/recv below
    peer = np.full(len(m_occ), -1, dtype=np.int64)
    pair_occ = np.flatnonzero(occ_op == "send")
    for i in pair_occ:
        m = _P2P.match(str(groups[i]))
        if not m:
            raise ExportRefused(
                f"matched pair in group {groups[i]!r}: not of the form p2p:<src>-><dst>",
                record=int(i),
                field="group",
            )
    if len(pair_occ):
        src_dst = {}
        for g in set(groups[pair_occ]):
            m = _P2P.match(str(g))
            src_dst[g] = (int(m.group(1)), int(m.group(2)))
        is_pair = np.zeros(n, dtype=bool)
        is_pair[pair_occ] = True
        mem_pair = np.flatnonzero(is_pair[m_occ])
        src = np.array([src_dst[groups[m_occ[j]]][0] for j in mem_pair], dtype=np.int64)
        dst = np.array([src_dst[groups[m_occ[j]]][1] for j in mem_pair], dtype=np.int64)
        is_src = ranks[mem_pair] == src
        op[mem_pair] = np.where(is_src, "send", "recv")
        peer[mem_pair] = np.where(is_src, dst, src)

    def per_member(col, dtype=None):
        return program.column(col, dtype)[m_occ]

    def own(col):  # each member's own value (its occurrence's where none is held)
        return program.member_values(col)

    root = per_member("root")
    phase = per_member("phase", object)
    stream = per_member("stream", object)
    has_lat = per_member("has_latency", bool)
    has_ovl = per_member("has_overlap", bool)
    send_splits = recv_splits = None
    member_bytes = per_member("bytes")
    if SPLITS_COLUMN in program.column_names:  # an all_to_allv's member rows and columns
        send_splits, recv_splits, sent = _member_splits(
            program.column(SPLITS_COLUMN, object), m_occ
        )
        if (sent >= 0).any():  # a member's own send buffer, not the largest member's
            element = np.array(
                [DTYPE_BYTES.get(str(d), 0) for d in per_member("dtype", object).tolist()]
            )
            member_bytes = np.where(sent >= 0, sent * element, member_bytes)
    if lines:
        lead = "{"
    else:
        first = np.zeros(len(m_occ), dtype=bool)
        first[:1] = True
        lead = tx.take(tx.texts([",{", "{"]), first.view(np.int8))
    events = tx.concat(
        lead,
        '"bytes":',
        tx.int_text(member_bytes),
        ',"dtype":',
        tx.str_text(per_member("dtype", object)),
        ',"group":',
        tx.str_text(groups[m_occ]),
        ',"instance":',
        tx.int_text(instance[m_occ]),
        tx.optional(has_lat, tx.concat(',"latency_ns":', tx.int_text(own("latency_ns")))),
        ',"op":',
        tx.str_text(op),
        tx.optional(has_ovl, tx.concat(',"overlap_ns":', tx.int_text(own("overlap_ns")))),
        tx.optional(peer >= 0, tx.concat(',"peer":', tx.int_text(np.maximum(peer, 0)))),
        tx.optional(phase != "", tx.concat(',"phase":', tx.str_text(phase))),
        ',"rank":',
        tx.int_text(ranks),
        *_optional_list(tx, "recv_splits", recv_splits),
        tx.optional(root >= 0, tx.concat(',"root":', tx.int_text(np.maximum(root, 0)))),
        *_optional_list(tx, "send_splits", send_splits),
        ',"seq":',
        tx.int_text(seq),
        tx.optional(stream != "", tx.concat(',"stream":', tx.str_text(stream))),
        ',"ts_ns":',
        tx.int_text(ts),
        "}\n" if lines else "}",
    )
    body, _ = tx.buffer_and_offsets(events)
    group_list = _group_list(program, m_occ, ranks)
    if lines:
        header = {"format": TRACE_FORMAT, "groups": group_list, "meta": meta}
        return b"".join((canonical_json_bytes(header), body))  # one copy of the body
    head = b'{"events":['
    tail = (
        '],"format":'
        + _text(canonical_json_bytes(TRACE_FORMAT))
        + ',"groups":'
        + _text(canonical_json_bytes(group_list))
        + ',"meta":'
        + _text(canonical_json_bytes(meta))
        + "}\n"
    ).encode("utf-8")
    return b"".join((head, body, tail))


def trace_meta(
    program: Program, *, source: str, notes: list[str], extra: dict | None = None
) -> dict:
    world = list(range(program.world_size))
    if program.skew_known:
        domains = [{"id": "synthetic", "ranks": world}]
        notes = notes + ["ts_ns = issue time + arrival skew on one synthetic reference clock"]
    else:
        domains = [{"id": f"rank{r}", "ranks": [r]} for r in world]
        notes = notes + [
            "skew unknown: ts_ns is the occurrence's issue time, each rank on its own clock "
            "domain; cross-rank arrival order is not known and none is implied"
        ]
    if program.held_member_values():
        notes = notes + ["latency_ns/overlap_ns: each member's own measured value"]
    else:
        notes = notes + [
            "latency_ns/overlap_ns: the occurrence's value (max over members) on each member"
        ]
    meta = {
        "world_size": int(program.world_size),
        "source": source,
        "clock_domains": domains,
        "notes": notes,
    }
    if extra:
        meta.update(extra)
    return meta


def write_program_trace(program: Program, meta: dict, path) -> str:
    """Write ``program`` with ``meta`` to ``path`` as ``.json`` or ``.jsonl`` (optionally
    ``.gz``, fixed gzip header so equal programs give equal bytes); return the file's
    SHA-256. (``trace_io.write_trace`` writes a trace held as a document instead.)"""
    name = Path(path).name
    compressed = name.endswith(".gz")
    stem = name[:-3] if compressed else name
    data = trace_bytes(program, meta, lines=stem.endswith(".jsonl"))
    if compressed:
        buf = io.BytesIO()
        with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=6) as gz:
            gz.write(data)
        data = buf.getvalue()
    with atomic_output(path) as tmp:
        tmp.write_bytes(data)
    return sha256_bytes(data)
