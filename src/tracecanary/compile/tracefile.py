"""Write a ``Program`` as a native trace (``tracecanary.trace/v1`` JSON), vectorized.

One event per member per occurrence, in occurrence order then rank order:
``rank``, ``seq`` (the rank's issue order), ``op``, ``bytes``, ``dtype``, ``group``,
``instance`` (per-group sequence), ``root`` (when >= 0), ``peer`` and ``send``/``recv``
for a matched pair (group ``p2p:<src>-><dst>``), ``phase``/``stream`` when not empty,
``latency_ns``/``overlap_ns`` where measured (the occurrence's value, i.e. the max over
members, written on every member), and ``ts_ns``:

* skew known: ``ts_ns = issue time + skew`` on one synthetic reference clock (all
  ranks in clock domain ``synthetic``), issue time = cumulative gaps;
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
from tracecanary.errors import ExportRefused
from tracecanary.formats.ids import TRACE_FORMAT
from tracecanary.program import Program

_P2P = re.compile(r"^p2p:(\d+)->(\d+)$")


def _text(b: bytes) -> str:
    return b.decode("utf-8")[:-1]  # canonical JSON without the trailing newline


def trace_bytes(program: Program, meta: dict, *, lines: bool = False) -> bytes:
    """The trace document: canonical JSON, or (``lines``) JSON Lines: a header line with
    everything but ``events``, then one canonical event per line."""
    import pandas as pd

    from tracecanary.compile import jsonvec as jv

    occ = program.occurrences
    mem = program.members
    n = program.n
    m_occ = mem["occ"].to_numpy(dtype=np.int64)
    ranks = mem["rank"].to_numpy(dtype=np.int64)
    issue = program.issue_ns()
    ts = issue[m_occ] + (mem["skew_ns"].to_numpy(dtype=np.int64) if program.skew_known else 0)
    seq = pd.Series(np.zeros(len(m_occ))).groupby(ranks).cumcount().to_numpy(dtype=np.int64)
    instance = occ.groupby("group", sort=False).cumcount().to_numpy(dtype=np.int64)

    op = occ["op"].to_numpy(dtype=object)[m_occ].copy()
    groups = occ["group"].to_numpy(dtype=object)
    peer = np.full(len(m_occ), -1, dtype=np.int64)
    pair_occ = np.flatnonzero(occ["op"].to_numpy(dtype=object) == "send")
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

    def per_member(col):
        return occ[col].to_numpy()[m_occ]

    root = per_member("root")
    phase = per_member("phase").astype(object)
    stream = per_member("stream").astype(object)
    has_lat = per_member("has_latency").astype(bool)
    has_ovl = per_member("has_overlap").astype(bool)
    first = np.zeros(len(m_occ), dtype=bool)
    if len(first):
        first[0] = True
    if lines:
        lead = jv.pa.array(["{"] * len(first), type=jv.STRING)
    else:
        lead = jv.pa.array([",{", "{"], type=jv.STRING).take(jv.pa.array(first.view(np.int8)))
    events = jv.concat(
        lead,
        '"bytes":',
        jv.int_text(per_member("bytes")),
        ',"dtype":',
        jv.str_text(per_member("dtype").astype(object)),
        ',"group":',
        jv.str_text(groups[m_occ]),
        ',"instance":',
        jv.int_text(instance[m_occ]),
        jv.optional(has_lat, jv.concat(',"latency_ns":', jv.int_text(per_member("latency_ns")))),
        ',"op":',
        jv.str_text(op),
        jv.optional(has_ovl, jv.concat(',"overlap_ns":', jv.int_text(per_member("overlap_ns")))),
        jv.optional(peer >= 0, jv.concat(',"peer":', jv.int_text(np.maximum(peer, 0)))),
        jv.optional(phase != "", jv.concat(',"phase":', jv.str_text(phase))),
        ',"rank":',
        jv.int_text(ranks),
        jv.optional(root >= 0, jv.concat(',"root":', jv.int_text(np.maximum(root, 0)))),
        ',"seq":',
        jv.int_text(seq),
        jv.optional(stream != "", jv.concat(',"stream":', jv.str_text(stream))),
        ',"ts_ns":',
        jv.int_text(ts),
        "}\n" if lines else "}",
    )
    body, _ = jv.buffer_and_offsets(events)
    group_ranks = (
        mem.assign(group=groups[m_occ])
        .drop_duplicates(["group", "rank"])
        .groupby("group", sort=True)["rank"]
    )
    group_list = [{"id": str(g), "ranks": [int(r) for r in sorted(rs)]} for g, rs in group_ranks]
    if lines:
        header = {"format": TRACE_FORMAT, "groups": group_list, "meta": meta}
        return canonical_json_bytes(header) + bytes(body)
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
    return head + bytes(body) + tail


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
