"""The timing streams of a canary as its format states them, read back: the stream names
(``FIELDS``: one per timing field, each a field of a budget), which of them carry a
measured mask (``MASKED``), the keys of a value run and block, and the decoding of a
stream into one value per occurrence (skew and the member streams: per member) with its
mask.

Guarantee: ``decode_stream`` returns the values ``compile.timing`` encoded (exactly, or
each interval's representative for a bounded stream) or raises InputError naming the
stream and record; nothing here encodes, so reading a canary (replay, verification)
needs none of the compiler's planning.
"""

from __future__ import annotations

import itertools

import numpy as np

from tracecanary.compile import sequence
from tracecanary.compile.structure import member_positions
from tracecanary.errors import InputError

FIELDS = ("gap", "overlap", "latency", "skew")
MASKED = ("overlap", "latency")
# lossless only, and only where some member's own value differs from its occurrence's:
# per occurrence, one value per member in rank order, the occurrence's value (the max
# over members) minus the member's own (0 where unmeasured); stream -> its field
MEMBER_STREAMS = {"latency_members": "latency", "overlap_members": "overlap"}
VALUE_RUN = "v"
VALUE_BLOCK = "values"


def _expand_vectors(records: list[dict], table: list) -> np.ndarray:
    """Leaf ids of vector-valued records; every literal leaf gets its own id in ``table``."""
    parts: list[np.ndarray] = []
    for rec in records:
        if VALUE_BLOCK in rec:
            items = rec[VALUE_BLOCK]
            parts.append(np.arange(len(table), len(table) + len(items), dtype=np.int64))
            table.extend(items)
        elif "body" in rec:
            parts.append(np.tile(_expand_vectors(rec["body"], table), int(rec["repeat"])))
        else:
            parts.append(np.full(int(rec["repeat"]), len(table), dtype=np.int64))
            table.append(rec[VALUE_RUN])
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def decode_bool(records) -> np.ndarray:
    return sequence.expand_records(records, run_key=VALUE_RUN, block_key=VALUE_BLOCK).astype(bool)


def decode_ints(records) -> np.ndarray:
    return sequence.expand_records(records, run_key=VALUE_RUN, block_key=VALUE_BLOCK)


def decode_stream(name: str, stream: dict, n: int, member_offsets: np.ndarray):
    """(values, measured mask or None) per occurrence; skew: flat per member."""
    where = f"timing.{name}"
    mask = None
    if name in MASKED:
        mask = decode_bool(stream["measured"])
        if len(mask) != n:
            raise InputError(f"measured mask covers {len(mask)} occurrences, not {n}", field=where)
    if name in MEMBER_STREAMS and stream["encoding"] != "exact":
        raise InputError("a member stream is stated exactly or not at all", field=where)
    if stream["encoding"] == "exact":
        if name == "skew" or name in MEMBER_STREAMS:
            table: list = []
            ids = _expand_vectors(stream["values"], table)
            if len(ids) != n:
                raise InputError(
                    f"{name} stream covers {len(ids)} occurrences, not {n}", field=where
                )
            lens = np.fromiter(map(len, table), dtype=np.int64, count=len(table))
            if not np.array_equal(lens[ids], np.diff(member_offsets)):
                raise InputError(f"{name} vectors do not match the group sizes", field=where)
            flat_table = np.fromiter(itertools.chain.from_iterable(table), dtype=np.int64)
            table_off = np.concatenate(([0], np.cumsum(lens)))
            return flat_table[member_positions(table_off[ids], lens[ids])], None
        vals = decode_ints(stream["values"])
        if mask is None:
            if len(vals) != n:
                raise InputError(f"stream covers {len(vals)} occurrences, not {n}", field=where)
            return vals, None
        if len(vals) != int(mask.sum()):
            raise InputError("values do not match the measured mask", field=where)
        out = np.zeros(n, dtype=np.int64)
        out[mask] = vals
        return out, mask
    return _decode_intervals(name, stream["intervals"], n, member_offsets, mask), mask


def _decode_intervals(name, intervals, n, member_offsets, mask):
    where = f"timing.{name}.intervals"
    skew = name == "skew"
    out = np.zeros(int(member_offsets[-1]) if skew else n, dtype=np.int64)
    pos = 0
    p1_start, p1_len, p1_val = [], [], []
    for k, itv in enumerate(intervals):
        s, e, p, rep = int(itv["start"]), int(itv["stop"]), int(itv["period"]), itv["rep"]
        if s != pos or e <= s or p < 1 or (e - s) % p or len(rep) != p:
            raise InputError(
                f"interval [{s}, {e}) period {p} does not continue the partition at {pos}",
                record=k,
                field=where,
            )
        pos = e
        if skew:
            sizes = np.diff(member_offsets[s : s + p + 1]) if p > 1 else None
            flat = [x for part in rep for x in part]
            m0, m1 = int(member_offsets[s]), int(member_offsets[e])
            if p == 1:
                widths = np.diff(member_offsets[s : e + 1])
                if (widths != len(flat)).any():
                    raise InputError(
                        "skew representative has the wrong slot count", record=k, field=where
                    )
            elif sum(len(part) for part in rep) != int(sizes.sum()) or any(
                len(part) != int(w) for part, w in zip(rep, sizes, strict=True)
            ):
                raise InputError(
                    "skew representative has the wrong slot count", record=k, field=where
                )
            out[m0:m1] = np.tile(np.asarray(flat, dtype=np.int64), (e - s) // p)
            continue
        vals = np.array([0 if v is None else int(v) for v in rep], dtype=np.int64)
        if mask is not None:
            block = mask[s:e].reshape(-1, p)
            nulls = np.array([v is None for v in rep])
            if (block[:, nulls]).any():
                raise InputError(
                    "a measured occurrence has no representative", record=k, field=where
                )
        elif any(v is None for v in rep):
            raise InputError("representative is null", record=k, field=where)
        if p == 1:
            p1_start.append(s)
            p1_len.append(e - s)
            p1_val.append(vals[0])
        else:
            out[s:e] = np.tile(vals, (e - s) // p)
    if pos != n:
        raise InputError(f"intervals cover {pos} occurrences, not {n}", field=where)
    if p1_start:
        lens = np.asarray(p1_len, dtype=np.int64)
        idx = np.repeat(np.asarray(p1_start, dtype=np.int64), lens) + (
            np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
        )
        out[idx] = np.repeat(np.asarray(p1_val, dtype=np.int64), lens)
    if mask is not None:
        out = np.where(mask, out, 0)
    return out


def count_stream_records(stream: dict | None) -> int:
    if stream is None:
        return 0
    total = 0
    if "measured" in stream:
        total += sequence.count_records(stream["measured"], VALUE_BLOCK)
    if stream["encoding"] == "exact":
        total += sequence.count_records(stream["values"], VALUE_BLOCK)
    else:
        total += len(stream["intervals"])
    return total
