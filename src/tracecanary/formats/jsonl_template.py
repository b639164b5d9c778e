"""Exact fast parse of JSON Lines event chunks written in a fixed key layout.

pyarrow's JSON reader spends about 1.2 CPU-seconds per million events; most captures
come from one writer that prints every event the same way, ``{"k1":v1,"k2":v2,...}``
with the keys of one of a few layouts (a key set in a fixed order) and fixed
separators. Such a chunk is split into fields by pyarrow's CSV reader (comma-delimited,
quotes not special) and every field is checked against its layout with vectorized
kernels, several times cheaper than parsing JSON.

Guarantee: ``parse_chunk(chunk)`` returns either None or a record batch equal to the
one pyarrow's JSON reader returns for ``chunk`` with ``EVENT_SCHEMA`` (unexpected
fields an error). It returns a batch only when it has proved that every line is exactly
``{`` P0 v0 ``,`` P1 v1 ... ``}`` where Pi is the key prefix ``"key":`` of a layout
taken from a line of the chunk (known event fields, none twice; compact or with one
space after ``,`` / ``:``), and every vi is the canonical JSON text of its value: a
non-negative decimal integer below 2**63 without leading zeros for an integer field, a
string without quote, backslash or control byte for a string field. Such a line is
valid JSON whose decoded values are those texts, so pyarrow reads the same values.
Anything else (escapes, ``null``, negative or non-canonical numbers, other whitespace,
blank lines, carriage returns, a byte-order mark, more than ``MAX_LAYOUTS`` layouts in
a chunk) gives None: the caller parses the chunk with pyarrow, and its refusals are
unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from tracecanary.formats.trace import EVENT_FIELDS, EVENT_SCHEMA, INT_FIELDS

MAX_LAYOUTS = 8  # layouts tried per chunk before it is left to the JSON reader
_SAMPLE_LINES = 64  # lines looked at to choose the first layout to read
_CSV_BLOCK_BYTES = 1 << 20  # the CSV reader's block: small enough to stay in cache

_KEY = re.compile(rb'"([a-z_]+)"(: ?)')
_UNSAFE_IN_STRING = re.compile(rb'["\\\x00-\x1f]')  # not in a string that needs no unescaping


@dataclass(frozen=True)
class _Layout:
    """The keys of one line in order, and the text before each value."""

    keys: tuple[str, ...]
    prefixes: tuple[str, ...]


def _layout_of(line: bytes) -> _Layout | None:
    """The layout of one line, or None when its fields are not plain ``"key":`` fields
    of distinct event fields with one separator style."""
    fields = line.split(b",")
    if not fields[0].startswith(b"{"):
        return None
    spaced = len(fields) > 1 and fields[1].startswith(b" ")
    keys: list[str] = []
    prefixes: list[str] = []
    colon = None
    for index, text in enumerate(fields):
        lead = b"{" if index == 0 else (b" " if spaced else b"")
        if not text.startswith(lead):
            return None
        match = _KEY.match(text, len(lead))
        if match is None or (colon is not None and match.group(2) != colon):
            return None
        colon = match.group(2)
        key = match.group(1).decode()
        if key not in EVENT_FIELDS or key in keys:
            return None
        keys.append(key)
        prefixes.append((lead + match.group(0)).decode())
    return _Layout(tuple(keys), tuple(prefixes))


def _cut(text: pa.ChunkedArray, start: int, end: int) -> pa.ChunkedArray:
    """Each value without its first ``start`` and last ``end`` bytes."""
    stop = -end if end else max(pc.max(pc.binary_length(text)).as_py() or 0, start)
    return pc.binary_slice(text, start, stop)


def _integer_values(text: pa.ChunkedArray) -> np.ndarray | None:
    """The int64 values of canonical non-negative decimal texts, else None. Arrow's
    cast takes decimal digits with an optional ``-``, leading zeros and a ``0x`` prefix
    (and refuses every other byte); a canonical text starts with 1-9 or is ``0``."""
    try:
        values = pc.cast(text, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if not all(_lead_canonically(chunk) for chunk in text.chunks):
        return None
    return values.combine_chunks().to_numpy()


def _lead_canonically(texts: pa.BinaryArray) -> bool:
    """Whether every text is ``0`` or starts with 1-9 (read from the array's offsets and
    bytes: no kernel pass per condition)."""
    count = len(texts)
    if count == 0:
        return True
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int32)
    offsets = offsets[texts.offset : texts.offset + count + 1]
    lengths = np.diff(offsets)
    if not lengths.all():  # an empty text (which the cast refuses anyway)
        return False
    first = np.frombuffer(texts.buffers()[2], dtype=np.uint8)[offsets[:-1]]
    digit = (first >= ord("1")) & (first <= ord("9"))
    return bool((digit | ((first == ord("0")) & (lengths == 1))).all())


def _distinct_texts(text: pa.ChunkedArray) -> tuple[list[bytes], np.ndarray]:
    """(the distinct texts of a column, each row's index into them): one hash pass.
    Event strings repeat (ops, dtypes, groups, phases, streams), so each distinct text
    is then checked once."""
    encoded = pc.dictionary_encode(text)
    chunks = encoded.chunks
    if not chunks:
        return [], np.empty(0, dtype=np.int32)
    dictionary = chunks[-1].dictionary  # one memo serves every chunk
    if not all(chunk.dictionary.equals(dictionary) for chunk in chunks):
        encoded = encoded.combine_chunks()
        chunks, dictionary = [encoded], encoded.dictionary
    indices = pa.chunked_array([c.indices for c in chunks], pa.int32()).combine_chunks()
    return dictionary.to_pylist(), indices.to_numpy()


def _string_values(
    texts: list[bytes], codes: np.ndarray, prefix: bytes, suffix: bytes
) -> tuple[list[str], np.ndarray] | None:
    """(the contents, each row's index into them) of rows whose texts (``texts[code]``)
    are ``prefix "content" suffix`` with nothing to unescape, else None. Only the texts
    some row holds are checked."""
    head, tail = prefix + b'"', b'"' + suffix
    used = np.zeros(len(texts), dtype=bool)
    used[codes] = True
    contents = []
    for value, held in zip(texts, used.tolist(), strict=True):
        if not held:
            contents.append("")  # no row refers to it
            continue
        if len(value) < len(head) + len(tail) or not value.startswith(head):
            return None
        if not value.endswith(tail):
            return None
        content = value[len(head) : len(value) - len(tail)]
        if _UNSAFE_IN_STRING.search(content):
            return None
        contents.append(content.decode())  # the chunk is valid UTF-8
    return contents, codes


@dataclass
class _Rows:
    """Parsed lines of a chunk, columns kept cheap to reorder: an integer field as its
    values, a string field as its distinct contents and each row's index into them
    (-1: absent, null); a field in no layout is absent from both maps (all null)."""

    count: int
    integers: dict[str, tuple[np.ndarray, np.ndarray | None]]  # values, present (None: all)
    strings: dict[str, tuple[list[str], np.ndarray]]

    @staticmethod
    def interleave(first: _Rows, second: _Rows, second_at: np.ndarray) -> _Rows:
        """The rows of both in one order: ``second``'s rows at the (increasing)
        positions ``second_at``, ``first``'s rows in order at the others."""
        count = first.count + second.count
        first_at = np.ones(count, dtype=bool)
        first_at[second_at] = False
        integers: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
        for name in first.integers.keys() | second.integers.keys():
            values = np.zeros(count, dtype=np.int64)
            present = np.zeros(count, dtype=bool)
            for rows, at in ((first, first_at), (second, second_at)):
                if name in rows.integers:
                    part, part_present = rows.integers[name]
                    values[at] = part
                    present[at] = True if part_present is None else part_present
            integers[name] = (values, None if present.all() else present)
        strings: dict[str, tuple[list[str], np.ndarray]] = {}
        for name in first.strings.keys() | second.strings.keys():
            codes = np.full(count, -1, dtype=np.int32)
            contents: list[str] = []
            for rows, at in ((first, first_at), (second, second_at)):
                if name in rows.strings:
                    part_contents, part_codes = rows.strings[name]
                    codes[at] = np.where(part_codes < 0, -1, part_codes + len(contents))
                    contents = contents + part_contents
            strings[name] = (contents, codes)
        return _Rows(count, integers, strings)

    def batch(self) -> pa.RecordBatch:
        """The rows as an ``EVENT_SCHEMA`` record batch."""
        arrays = []
        for field in EVENT_SCHEMA:
            if field.name in self.integers:
                values, present = self.integers[field.name]
                mask = None if present is None else ~present
                arrays.append(pa.array(values, type=field.type, mask=mask))
            elif field.name in self.strings:
                contents, codes = self.strings[field.name]
                mask = codes < 0
                indices = pa.array(codes, mask=mask if mask.any() else None)
                arrays.append(pa.array(contents, field.type).take(indices))
            else:
                arrays.append(pa.nulls(self.count, field.type))
        return pa.RecordBatch.from_arrays(arrays, schema=EVENT_SCHEMA)


def _csv_fields(chunk: bytes, width: int) -> tuple[pa.Table, dict[int, bytes]] | None:
    """(the lines with ``width`` comma-separated fields, as binary columns; line number
    -> text of every other line), or None when the CSV reader refuses the chunk. Each
    other line costs a Python call (about 3 us): cheap while most lines share a width.
    (Splitting every line with ``split_pattern`` and gathering the fields by index
    instead was measured slower, even with 15% of lines of another width.)"""
    others: dict[int, bytes] = {}

    def other_width(row) -> str:
        others[row.number - 1] = row.text.encode()  # lines counted from 1; valid UTF-8
        return "skip"

    names = [f"f{i}" for i in range(width)]
    try:
        table = pcsv.read_csv(
            pa.py_buffer(chunk),
            read_options=pcsv.ReadOptions(
                column_names=names, block_size=_CSV_BLOCK_BYTES, use_threads=False
            ),
            parse_options=pcsv.ParseOptions(
                delimiter=",",
                quote_char=False,
                double_quote=False,
                escape_char=False,
                newlines_in_values=False,
                ignore_empty_lines=False,
                invalid_row_handler=other_width,
            ),
            convert_options=pcsv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.binary()),
                null_values=[],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return table, others


def _set_aside_other_keys(
    table: pa.Table, layout: _Layout, others: dict[int, bytes]
) -> tuple[pa.Table, dict[int, tuple[list[bytes], np.ndarray]]]:
    """(the rows whose fields start with the layout's key prefixes, the distinct texts
    and per-row codes of their string fields by field index); the texts of the other
    rows (same width, other keys) join ``others`` under their line numbers. A string
    field's prefix is checked once per distinct text. A text is its fields joined by
    commas, which is the line itself, except for an empty line (the CSV reader's one
    row that is not its fields): that becomes commas only, which no layout reads, so
    the chunk is declined as it must be."""
    fits = np.ones(table.num_rows, dtype=bool)
    strings: dict[int, tuple[list[bytes], np.ndarray]] = {}
    for index, (key, prefix) in enumerate(zip(layout.keys, layout.prefixes, strict=True)):
        text = table.column(index)
        if key in INT_FIELDS:
            fits &= pc.starts_with(text, prefix).to_numpy()
            continue
        texts, codes = _distinct_texts(text)
        keyed = np.array([value.startswith(prefix.encode()) for value in texts], dtype=bool)
        fits &= keyed[codes]
        strings[index] = (texts, codes)
    if fits.all():
        return table, strings
    lines = np.ones(table.num_rows + len(others), dtype=bool)
    lines[list(others)] = False
    row_line = np.flatnonzero(lines)
    rejected = table.filter(pa.array(~fits))
    joined = pc.binary_join_element_wise(*rejected.columns, b",")
    for line, text in zip(row_line[~fits].tolist(), joined.to_pylist(), strict=True):
        others[line] = text
    kept = {index: (texts, codes[fits]) for index, (texts, codes) in strings.items()}
    return table.filter(pa.array(fits)), kept


def _commonest_line(chunk: bytes) -> bytes:
    """Of the first ``_SAMPLE_LINES`` lines, the first of the commonest width (commas):
    its layout is read first, so most lines are taken without a Python call."""
    sample: list[bytes] = []
    start = 0
    while len(sample) < _SAMPLE_LINES and start < len(chunk):
        end = chunk.find(b"\n", start)
        end = len(chunk) if end < 0 else end
        sample.append(chunk[start:end])
        start = end + 1
    widths = [line.count(b",") for line in sample]
    return sample[widths.index(max(widths, key=widths.count))] if sample else b""


def _parse(chunk: bytes, layouts_left: int) -> _Rows | None:
    """The chunk's events: the lines of the commonest layout read by the CSV reader,
    the other lines (other widths or keys) parsed the same way as a chunk of their own
    with one layout fewer left, both put back in line order; None as ``parse_chunk``."""
    if not chunk.startswith(b"{") or layouts_left == 0:  # (the CSV reader drops a BOM)
        return None
    layout = _layout_of(_commonest_line(chunk))
    if layout is None:
        return None
    width = len(layout.keys)
    read = _csv_fields(chunk, width)
    if read is None:
        return None
    table, others = read
    table, texts = _set_aside_other_keys(table, layout, others)
    rows = _Rows(table.num_rows, {}, {})
    for index, (key, prefix) in enumerate(zip(layout.keys, layout.prefixes, strict=True)):
        text = table.column(index)
        suffix = b"}" if index == width - 1 else b""
        if key in INT_FIELDS:
            if suffix and pc.all(pc.ends_with(text, suffix.decode())).as_py() is False:
                return None
            values = _integer_values(_cut(text, len(prefix), len(suffix)))
            if values is None:
                return None
            rows.integers[key] = (values, None)
        else:
            strings = _string_values(*texts[index], prefix.encode(), suffix)
            if strings is None:
                return None
            rows.strings[key] = strings
    if not others:
        return rows
    other_lines = np.array(sorted(others), dtype=np.int64)
    rest = b"\n".join(others[line] for line in other_lines.tolist()) + b"\n"
    rest_rows = _parse(rest, layouts_left - 1)
    if rest_rows is None or rest_rows.count != len(others):
        return None
    return _Rows.interleave(rows, rest_rows, other_lines)


def parse_chunk(chunk: bytes) -> pa.RecordBatch | None:
    """The events of ``chunk`` (whole lines of JSON Lines), or None when they are not
    provably in a layout this parser reads exactly (see the module's guarantee)."""
    if b"\\" in chunk or b"\r" in chunk:
        return None
    if not chunk.isascii():
        try:  # what the JSON reader would pass through invalid is left to it
            chunk.decode("utf-8")
        except UnicodeDecodeError:
            return None
    rows = _parse(chunk, MAX_LAYOUTS)
    return None if rows is None else rows.batch()


__all__ = ["MAX_LAYOUTS", "parse_chunk"]
