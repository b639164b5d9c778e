"""Canonical serialization of a normalized source program, its digest and segment
commitments: the bytes every receipt in a canary refers to.

Format ``tracecanary.source/v1``: a header line, then one line per occurrence, each the
canonical JSON (``tracecanary.canonical.canonical_json_bytes``, newline-terminated) of::

    {"bytes", "dtype", "gap_ns", "group", "group_size", ["latency_ns"],
     ["latency_ns_members"], "members", "occ", "op", ["overlap_ns"],
     ["overlap_ns_members"], "phase", "root", ["splits"], "stream", "tail", "weight"}

``members`` lists the occurrence's members in rank order as ``[rank, skew_ns]``, or as
``[rank]`` when the program's skew is unknown (skew is omitted, never written as 0).
``latency_ns`` / ``overlap_ns`` are present only where measured (never 0 for unmeasured):
the occurrence's value, the max over its members; where some member's own value differs
from it, ``latency_ns_members`` / ``overlap_ns_members`` list every member's own value in
rank order (absent otherwise, so a source whose members agree serializes as before).
``splits`` (an all_to_allv's send matrix, ``program.SPLITS_COLUMN``) is present only on an
occurrence that has one, so a program without splits serializes as it always did.
The header is the canonical JSON of ``{"format", "occurrences", "skew_known",
"skew_reason", "world_size"}``. Program notes are provenance text and are not covered.

Digests (SHA-256, hex):
- ``source_digest``: header line + every occurrence line.
- ``segment_commitment(start, stop)``: the canonical JSON line
  ``{"format":"tracecanary.segment/v1","start":S,"stop":E}`` followed by the lines of
  occurrences [start, stop). It depends only on those occurrences and the range, so a
  third party holding the source recomputes it without the canary's help.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

import numpy as np

from tracecanary.canonical import canonical_json_bytes
from tracecanary.compile import jsonvec as jv
from tracecanary.formats.ids import SEGMENT_FORMAT, SOURCE_FORMAT
from tracecanary.program import SPLITS_COLUMN, Program


def source_header(program: Program, occurrences: int | None = None) -> bytes:
    """The header line of the serialization (of the first ``occurrences`` occurrences)."""
    return canonical_json_bytes(
        {
            "format": SOURCE_FORMAT,
            "occurrences": int(program.n if occurrences is None else occurrences),
            "skew_known": bool(program.skew_known),
            "skew_reason": program.skew_reason,
            "world_size": int(program.world_size),
        }
    )


def segment_header(start: int, stop: int) -> bytes:
    """``canonical_json_bytes({"format": SEGMENT_FORMAT, "start": S, "stop": E})``,
    formatted directly (it is computed once per interval)."""
    return f'{{"format":"{SEGMENT_FORMAT}","start":{int(start)},"stop":{int(stop)}}}\n'.encode()


class SourceSerialization:
    """The serialized lines of one program, made chunk by chunk when read.

    Holds the line offsets (``offsets[i]``: where line i starts in the whole text; 8
    bytes per occurrence), the digests and commitments computed so far and one chunk of
    lines (``CHUNK_OCCURRENCES`` occurrences), never the whole text: its memory is
    bounded by the chunk, not by the program. The pass that measures the lines also
    computes the whole ``digest()`` and ``segment(0, n)``; any other range is
    re-serialized from the program's columns (ranges read in increasing order serialize
    each chunk once). The bytes are those of one serialization of the whole program,
    whatever the chunking."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self._columns = _SourceColumns(program)
        self._segments: dict = {}
        self._chunk: tuple[int, memoryview | None] = (-1, None)
        n = program.n
        offsets = np.zeros(n + 1, dtype=np.int64)
        whole = hashlib.sha256(source_header(program, n))
        segment = hashlib.sha256(segment_header(0, n))
        for lo in range(0, n, CHUNK_OCCURRENCES):
            hi = min(n, lo + CHUNK_OCCURRENCES)
            data, local = self._columns.lines(lo, hi)
            offsets[lo + 1 : hi + 1] = offsets[lo] + local[1:]
            whole.update(data)
            segment.update(data)
            self._chunk = (lo // CHUNK_OCCURRENCES, data)  # the last one stays cached
        self.offsets = offsets
        self._segments[("digest", n)] = whole.hexdigest()
        self._segments[(0, n)] = segment.hexdigest()

    @property
    def n(self) -> int:
        return len(self.offsets) - 1

    def _chunk_data(self, c: int) -> memoryview:
        """The lines of chunk ``c`` (occurrences [c * CHUNK_OCCURRENCES, ...))."""
        if self._chunk[0] != c:
            lo = c * CHUNK_OCCURRENCES
            data, _ = self._columns.lines(lo, min(self.n, lo + CHUNK_OCCURRENCES))
            self._chunk = (c, data)
        return self._chunk[1]

    def _pieces(self, start: int, stop: int) -> Iterator[memoryview]:
        """The bytes of lines [start, stop), chunk by chunk."""
        if start >= stop:
            return
        for c in range(start // CHUNK_OCCURRENCES, (stop - 1) // CHUNK_OCCURRENCES + 1):
            lo = c * CHUNK_OCCURRENCES
            a, b = max(start, lo), min(stop, lo + CHUNK_OCCURRENCES)
            base = int(self.offsets[lo])
            yield self._chunk_data(c)[int(self.offsets[a]) - base : int(self.offsets[b]) - base]

    def line(self, i: int) -> bytes:
        return b"".join(self._pieces(i, i + 1))

    def size_bytes(self, occurrences: int | None = None) -> int:
        """Byte size of the serialization of the first ``occurrences`` occurrences
        (header included), i.e. of the prefix program's own serialization."""
        stop = self.n if occurrences is None else int(occurrences)
        return len(source_header(self.program, stop)) + int(self.offsets[stop])

    def digest(self, occurrences: int | None = None) -> str:
        """``source_digest`` of the program (or of its prefix of ``occurrences``)."""
        stop = self.n if occurrences is None else int(occurrences)
        key = ("digest", stop)
        got = self._segments.get(key)
        if got is None:
            h = hashlib.sha256(source_header(self.program, stop))
            for piece in self._pieces(0, stop):
                h.update(piece)
            got = self._segments[key] = h.hexdigest()
        return got

    def segment(self, start: int, stop: int) -> str:
        """``segment_commitment`` of occurrences [start, stop)."""
        if not 0 <= start <= stop <= self.n:
            raise ValueError(f"segment [{start}, {stop}) outside 0..{self.n}")
        key = (int(start), int(stop))
        got = self._segments.get(key)
        if got is None:
            h = hashlib.sha256(segment_header(start, stop))
            for piece in self._pieces(int(start), int(stop)):
                h.update(piece)
            got = self._segments[key] = h.hexdigest()
        return got


# occurrences serialized at once: bounds the text and the temporaries held (tens of MB)
CHUNK_OCCURRENCES = 1 << 16


def _codes(program: Program, name: str) -> tuple[np.ndarray, list[str]]:
    """(code per row, JSON literal per code) of the text column ``name``."""
    codes, uniques = program.factorized(name, sort=False)
    literals = [json.dumps(u, ensure_ascii=False) for u in uniques]
    return codes.astype(np.int32), literals  # fewer codes than rows (< 2^31): 4 B per row


MAX_RANK_HEADS = 1 << 16


def _rank_heads(ranks: np.ndarray, skew_known: bool) -> tuple[list[str] | None, int]:
    """The text a member starts with, per (rank, first member of its occurrence):
    element ``2 * (rank - lo) + first`` of the returned list (``lo``: the smallest
    rank); None when the ranks span too wide a range for a table."""
    if len(ranks) == 0:
        return None, 0
    lo, hi = int(ranks.min()), int(ranks.max())
    if hi - lo >= MAX_RANK_HEADS:
        return None, 0
    end = "," if skew_known else "]"
    return [t for r in range(lo, hi + 1) for t in (f",[{r}{end}", f"[{r}{end}")], lo


class _SourceColumns:
    """A program's columns as the serializer reads them (numeric columns as views,
    strings as codes into JSON literals): what ``lines`` needs for any range. The text
    is built by one ``jsonvec`` builder, chosen by the program's size (the bytes do not
    depend on which)."""

    def __init__(self, program: Program) -> None:
        n = program.n
        member_occ = program.member_column("occ")  # int32 (a view): only compared and counted
        if len(member_occ) and (np.diff(member_occ) < 0).any():
            raise ValueError("program members are not sorted by occurrence")
        counts = np.bincount(member_occ, minlength=n) if len(member_occ) else np.zeros(n, np.int64)
        if len(counts) > n:
            raise ValueError("program members refer to occurrences beyond the table")
        self.tx = tx = jv.builder(max(n, len(member_occ)))
        self.counts = counts
        self.member_offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=self.member_offsets[1:])
        self.ranks = program.member_column("rank")  # int32 (a view); widened per chunk
        self.skew = program.member_column("skew_ns", np.int64) if program.skew_known else None
        self.ints = {
            c: program.column(c, np.int64)
            for c in ("bytes", "gap_ns", "group_size", "occ", "root", "latency_ns", "overlap_ns")
        }
        self.bools = {c: program.column(c, bool) for c in ("has_latency", "has_overlap", "tail")}
        self.weight = program.column("weight", np.float64)
        # members' own values (rank order), written on an occurrence where one differs
        self.member_values = {}
        for c in program.held_member_values():
            own = program.member_column(c, np.int64)
            differs = np.zeros(n, dtype=bool)
            some = self.bools["has_" + c.removesuffix("_ns")][member_occ]
            differs[member_occ[some & (own != self.ints[c][member_occ])]] = True
            self.member_values[c] = (own, differs)
        self.strings = {}
        for c in ("dtype", "group", "op", "phase", "stream"):
            codes, literals = _codes(program, c)
            self.strings[c] = (codes, tx.texts(literals))
        self.splits = None  # (has splits per occurrence, codes, literals) where a column
        if SPLITS_COLUMN in program.column_names:
            codes, literals = _codes(program, SPLITS_COLUMN)
            empty = np.array([text == '""' for text in literals] + [True])  # JSON literals
            self.splits = (~empty[codes], codes, tx.texts(literals))
        heads, self.rank_lo = _rank_heads(self.ranks, self.skew is not None)
        self.rank_heads = None if heads is None else tx.texts(heads)
        self.member_prefix = tx.texts([",[", "["])  # a member that is not / is first

    def lines(self, lo: int, hi: int) -> tuple[memoryview, np.ndarray]:
        """The text of lines [lo, hi) and where each starts in it (hi - lo + 1 offsets)."""
        tx = self.tx
        ranks, skew, counts = self.ranks, self.skew, self.counts
        m0, m1 = int(self.member_offsets[lo]), int(self.member_offsets[hi])
        local = self.member_offsets[lo : hi + 1] - m0
        first = np.zeros(m1 - m0, dtype=bool)
        first[local[:-1][counts[lo:hi] > 0]] = True
        if self.rank_heads is not None:
            # '[r,' / ',[r,' (skew known) or '[r]' / ',[r]': one literal per (rank, first)
            head = tx.take(
                self.rank_heads,
                2 * (ranks[m0:m1].astype(np.int64) - self.rank_lo) + first.view(np.int8),
            )
            elements = head if skew is None else tx.concat(head, tx.int_text(skew[m0:m1]), "]")
        else:
            prefix = tx.take(self.member_prefix, first.view(np.int8))
            if skew is not None:
                elements = tx.concat(
                    prefix, tx.int_text(ranks[m0:m1]), ",", tx.int_text(skew[m0:m1]), "]"
                )
            else:
                elements = tx.concat(prefix, tx.int_text(ranks[m0:m1]), "]")
        members = tx.regroup(elements, local)
        ints, bools = self.ints, self.bools

        def num(c):
            return tx.int_text(ints[c][lo:hi])

        def text(c):
            codes, literals = self.strings[c]
            return tx.take(literals, codes[lo:hi])

        def own_values(c):
            """',"<c>_members":[v, ...]' where a member's own value differs, else ''."""
            if c not in self.member_values:
                return ""
            own, differs = self.member_values[c]
            sep = tx.take(tx.texts([",", ""]), first.view(np.int8))
            listed = tx.regroup(tx.concat(sep, tx.int_text(own[m0:m1])), local)
            return tx.optional(differs[lo:hi], tx.concat(f',"{c}_members":[', listed, "]"))

        latency = tx.optional(
            bools["has_latency"][lo:hi], tx.concat(',"latency_ns":', num("latency_ns"))
        )
        overlap = tx.optional(
            bools["has_overlap"][lo:hi], tx.concat(',"overlap_ns":', num("overlap_ns"))
        )
        root = num("root")
        if self.splits is not None:
            present, codes, literals = self.splits
            root = tx.concat(
                root,
                tx.optional(
                    present[lo:hi], tx.concat(',"splits":', tx.take(literals, codes[lo:hi]))
                ),
            )
        lines = tx.concat(
            '{"bytes":', num("bytes"),
            ',"dtype":', text("dtype"),
            ',"gap_ns":', num("gap_ns"),
            ',"group":', text("group"),
            ',"group_size":', num("group_size"),
            latency,
            own_values("latency_ns"),
            ',"members":[', members,
            '],"occ":', num("occ"),
            ',"op":', text("op"),
            overlap,
            own_values("overlap_ns"),
            ',"phase":', text("phase"),
            ',"root":', root,
            ',"stream":', text("stream"),
            ',"tail":', tx.bool_text(bools["tail"][lo:hi]),
            ',"weight":', tx.float_text(self.weight[lo:hi]),
            "}\n",
        )  # fmt: skip
        return tx.buffer_and_offsets(lines)


def serialize_source(program: Program) -> SourceSerialization:
    """The serialization of ``program`` (vectorized, in chunks of rows so temporaries
    stay small; about a second per million occurrences of 8 members per pass)."""
    return SourceSerialization(program)


def source_digest(program: Program) -> str:
    """SHA-256 of the canonical serialization of the whole program (header + lines)."""
    return serialize_source(program).digest()


def segment_commitment(program: Program, start: int, stop: int) -> str:
    """SHA-256 commitment to occurrences [start, stop) of ``program`` and the range."""
    return serialize_source(program).segment(start, stop)


def occurrence_record(program: Program, i: int) -> dict:
    """The dict whose canonical JSON is line i (the plain, per-row reference form)."""

    def value(name: str):
        return program.column(name)[i]

    member_rows = np.flatnonzero(program.member_column("occ") == i)
    ranks = program.member_column("rank")[member_rows].tolist()
    if program.skew_known:
        skews = program.member_column("skew_ns")[member_rows].tolist()
        members = [[int(r), int(s)] for r, s in zip(ranks, skews, strict=True)]
    else:
        members = [[int(r)] for r in ranks]
    rec = {
        "bytes": int(value("bytes")),
        "dtype": str(value("dtype")),
        "gap_ns": int(value("gap_ns")),
        "group": str(value("group")),
        "group_size": int(value("group_size")),
        "members": members,
        "occ": int(value("occ")),
        "op": str(value("op")),
        "phase": str(value("phase")),
        "root": int(value("root")),
        "stream": str(value("stream")),
        "tail": bool(value("tail")),
        "weight": float(value("weight")),
    }
    if bool(value("has_latency")):
        rec["latency_ns"] = int(value("latency_ns"))
    if bool(value("has_overlap")):
        rec["overlap_ns"] = int(value("overlap_ns"))
    for c in program.held_member_values():
        own = program.member_column(c, np.int64)[member_rows].tolist()
        if bool(value("has_" + c.removesuffix("_ns"))) and any(v != value(c) for v in own):
            rec[c + "_members"] = [int(v) for v in own]
    if SPLITS_COLUMN in program.column_names and str(value(SPLITS_COLUMN)):
        rec[SPLITS_COLUMN] = str(value(SPLITS_COLUMN))
    return rec
