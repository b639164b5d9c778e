"""The exact template parser of JSON Lines chunks (``formats.jsonl_template``) and the
chunked JSON Lines reader of ingest: every chunk either parses to exactly the batch
pyarrow's JSON reader gives or is left to that reader, and ingest gives the same
Parquet and sidecar bytes, or the same refusal, as pyarrow's streaming reader over the
whole body did before (``bench.bench_ingest.streaming_jsonl_batches``, the old path),
less the lines holding two JSON values, which ingest now refuses."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pyarrow.json as pajson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracecanary.ingest as ingest_mod
from bench.bench_ingest import streaming_jsonl_batches
from tracecanary.errors import InputError
from tracecanary.formats.jsonl_template import parse_chunk
from tracecanary.formats.trace import EVENT_FIELDS, EVENT_SCHEMA, INT_FIELDS
from tracecanary.synth.decode import DecodeSpec, build_decode
from tracecanary.trace_io import write_trace

_OPTIONS = pajson.ParseOptions(explicit_schema=EVENT_SCHEMA, unexpected_field_behavior="error")


def _json_reader(chunk: bytes) -> pa.Table | None:
    """pyarrow's JSON reader on one chunk; None when it refuses it."""
    read = pajson.ReadOptions(block_size=len(chunk) + 1, use_threads=False)
    try:
        return pajson.read_json(pa.BufferReader(chunk), read_options=read, parse_options=_OPTIONS)
    except pa.ArrowInvalid:
        return None


# --- lines: valid events in several layouts, and hostile variants of them ---------------

_STRINGS = {"op": ["all_reduce", "send", "custom:x"], "dtype": ["f", "bfloat16"]}
_STRINGS |= {"group": ["w", "world"], "phase": ["decode", "pré"], "stream": ["comm0", "s"]}


@st.composite
def _event(draw) -> dict:
    event = {
        "rank": draw(st.integers(0, 3)),
        "seq": draw(st.integers(0, 10**6)),
        "op": draw(st.sampled_from(_STRINGS["op"])),
        "bytes": draw(st.sampled_from([0, 8, 131072, 2**63 - 1])),
        "dtype": draw(st.sampled_from(_STRINGS["dtype"])),
        "group": draw(st.sampled_from(_STRINGS["group"])),
    }
    for key in draw(st.lists(st.sampled_from(EVENT_FIELDS), max_size=6, unique=True)):
        if key in INT_FIELDS:
            event.setdefault(key, draw(st.integers(0, 10**13)))
        else:
            event.setdefault(key, draw(st.sampled_from(_STRINGS.get(key, ["a"]))))
    return event


def _text(event: dict, order: str, spaced: bool) -> str:
    keys = sorted(event) if order == "sorted" else list(event)
    if order == "schema":
        keys = [k for k in EVENT_FIELDS if k in event]
    separators = (", ", ": ") if spaced else (",", ":")
    return json.dumps({k: event[k] for k in keys}, separators=separators, ensure_ascii=False)


# each: a line's text -> a variant (some valid JSON the parser must decline or read
# exactly, most refused by pyarrow)
_MUTATIONS = [
    lambda s: s.replace(":0,", ":00,", 1),
    lambda s: s.replace(":8,", ":-8,", 1),
    lambda s: s.replace(":8,", ":+8,", 1),
    lambda s: s.replace(":8,", ":8.0,", 1),
    lambda s: s.replace(":8,", ":8e0,", 1),
    lambda s: s.replace(":8,", ':"8",', 1),
    lambda s: s.replace(":8,", ":null,", 1),
    lambda s: s.replace(":8,", ":true,", 1),
    lambda s: s.replace(":8,", ": 8,", 1),
    lambda s: s.replace(":8,", ":8 ,", 1),
    lambda s: s.replace(":8,", ":9223372036854775808,", 1),
    lambda s: s.replace(":8,", ":0x8,", 1),
    lambda s: s.replace(":8,", ":0xFFFFF,", 1),  # as many digits as its value 1048575
    lambda s: s.replace(":0,", ":-0,", 1),
    lambda s: s.replace(":8,", ":18446744073709551616,", 1),
    lambda s: s.replace('"w"', '"w\\"x"', 1),
    lambda s: s.replace('"w"', '"\\u0077"', 1),
    lambda s: s.replace('"w"', '"\\ud800"', 1),
    lambda s: s.replace('"w"', '"a,b"', 1),
    lambda s: s.replace('"w"', '"a","rank":1', 1),
    lambda s: s.replace('"w"', '"a\tb"', 1),
    lambda s: s.replace('"w"', '"a}"', 1),
    lambda s: s.replace('"w"', '"a:b"', 1),
    lambda s: s.replace('"w"', '""', 1),
    lambda s: s.replace('"w"', "7", 1),
    lambda s: s.replace('"w"', '["w"]', 1),
    lambda s: s.replace('"w"', '{"a":1}', 1),
    lambda s: s.replace('"rank"', '"zzz"', 1),
    lambda s: s.replace('"rank"', '"Rank"', 1),
    lambda s: s[:-1] + ',"rank":0}',
    lambda s: s[:-1] + ',"extra":0}',
    lambda s: s[:-1] + "} ",
    lambda s: " " + s,
    lambda s: s + " " + s,
    lambda s: s[:-1],
    lambda s: s.replace(",", ", ", 1),
    lambda s: s.replace("{", "{ ", 1),
    lambda s: "[1,2]",
    lambda s: "",
    lambda s: "   ",
    lambda s: "\ufeff" + s,
    lambda s: s + "\r",
]


def _chunk(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode()


@st.composite
def _chunks(draw) -> bytes:
    events = draw(st.lists(_event(), min_size=1, max_size=12))
    order = draw(st.sampled_from(["sorted", "schema", "mixed"]))
    spaced = draw(st.booleans())
    lines = []
    for event in events:
        line_order = order if order != "mixed" else draw(st.sampled_from(["sorted", "schema"]))
        line = _text(event, line_order, spaced)
        if draw(st.integers(0, 3)) == 0:
            line = draw(st.sampled_from(_MUTATIONS))(line)
        lines.append(line)
    chunk = _chunk(lines)
    if draw(st.booleans()):  # a final line without its newline
        chunk = chunk[:-1]
    if chunk and draw(st.integers(0, 9)) == 0:  # a byte that is not UTF-8 (a line can be empty)
        at = draw(st.integers(0, len(chunk) - 1))
        chunk = chunk[:at] + b"\xff" + chunk[at + 1 :]
    return chunk


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunk=_chunks())
def test_template_parser_returns_the_json_readers_batch_or_declines(chunk):
    fast = parse_chunk(chunk)
    if fast is None:
        return
    expected = _json_reader(chunk)
    assert expected is not None, "read a chunk pyarrow's JSON reader refuses"
    assert pa.Table.from_batches([fast]).equals(expected.combine_chunks())


@pytest.mark.parametrize("spaced", [False, True])
@pytest.mark.parametrize("order", ["sorted", "schema"])
def test_template_parser_reads_clean_chunks_of_several_layouts_in_file_order(order, spaced):
    """Layouts differ by optional keys (root on broadcasts, peer on sends); the parser
    takes them all and keeps the lines in order."""
    events = []
    for i in range(3000):
        event = {"rank": i % 4, "seq": i, "op": "all_reduce", "bytes": 8 * i, "dtype": "f"}
        event |= {"group": "w", "ts_ns": 10 * i, "phase": "décode"}
        if i % 7 == 0:
            event |= {"op": "broadcast", "root": 0}
        if i % 11 == 0:
            event |= {"op": "send", "peer": (i + 1) % 4}
            event.pop("root", None)
        events.append(event)
    chunk = _chunk([_text(e, order, spaced) for e in events])
    fast = parse_chunk(chunk)
    assert fast is not None
    assert pa.Table.from_batches([fast]).equals(_json_reader(chunk).combine_chunks())


@pytest.mark.parametrize(
    "text", ["00", "-0", "-8", "+8", "0x8", "0xFFFFF", "0XFFFFF", "08", " 8", "8 ", ""]
)
def test_template_parser_declines_integer_texts_that_are_not_canonical_decimals(text):
    """Arrow's cast reads some of these (signs, leading zeros, hex: 0xFFFFF is 1048575,
    as many digits as its text); JSON has none of them, so the parser leaves the chunk to
    the JSON reader, which refuses it."""
    good = '{"rank":0,"seq":1,"op":"all_reduce","bytes":%s,"dtype":"f","group":"w"}'
    chunk = _chunk([good % "0", good % "1048575", good % text])
    assert parse_chunk(chunk) is None
    assert parse_chunk(_chunk([good % "0", good % "1048575"])) is not None


def test_template_parser_declines_more_layouts_than_it_tries():
    from tracecanary.formats.jsonl_template import MAX_LAYOUTS

    keys = [k for k in EVENT_FIELDS if k in INT_FIELDS and k not in ("rank", "seq", "bytes")]
    assert len(keys) >= MAX_LAYOUTS
    lines = []
    for i in range(MAX_LAYOUTS + 1):  # each line a different optional key set
        event = {"rank": 0, "seq": i, "op": "all_reduce", "bytes": 8, "dtype": "f", "group": "w"}
        event |= {key: 1 for key in keys[:i]}
        lines.append(_text(event, "sorted", False))
    assert parse_chunk(_chunk(lines)) is None
    assert parse_chunk(_chunk(lines[:MAX_LAYOUTS])) is not None


# --- ingest end to end: the chunked reader against the streaming reference -------------


def _values_on_each_line(body: bytes) -> list[int]:
    """How many JSON values each non-blank line after the header holds (1 where its first
    value does not decode: pyarrow refuses that line on its own)."""
    counts = []
    decoder = json.JSONDecoder()
    for line in body.split(b"\n")[1:]:
        text = line.decode("utf-8", "replace").strip(" \t\r")
        if not text:
            continue
        values, at = 0, 0
        while at < len(text):
            try:
                _, end = decoder.raw_decode(text, at)
            except ValueError:
                values = max(values, 1)
                break
            values += 1
            at = len(text) - len(text[end:].lstrip(" \t\r"))
        counts.append(values)
    return counts


def _streaming_one_value_per_line(path: str, stream):
    """The old streaming reader with ingest's rule that a line holds one JSON value: the
    batch holding the first event of a line with two is refused (located), not read."""
    with ingest_mod.open_input(path) as whole:
        counts = _values_on_each_line(whole.read())
    first_bad_row = None
    if any(count > 1 for count in counts):
        first_bad_row = sum(counts[: next(i for i, c in enumerate(counts) if c > 1)])
    for index, batch in streaming_jsonl_batches(path, stream):
        if first_bad_row is not None and index <= first_bad_row < index + batch.num_rows:
            raise ingest_mod._locate_jsonl_error(path, index, "two values on a line")
        yield index, batch


def _ingest(path, out, batch_bytes, reference: bool):
    with pytest.MonkeyPatch.context() as m:
        m.setattr(ingest_mod, "BATCH_BYTES", batch_bytes)
        if reference:
            m.setattr(ingest_mod, "_jsonl_batches", _streaming_one_value_per_line)
        try:
            result = ingest_mod.ingest_files([str(path)], out)
        except InputError as err:
            assert not out.exists()
            return ("refused", type(err).__name__, err.one_line())
    parquet, sidecar = out.read_bytes(), ingest_mod.sidecar_path(out).read_bytes()
    out.unlink()
    ingest_mod.sidecar_path(out).unlink()
    return ("ok", result.events, parquet, sidecar)


_HEADER = {
    "format": "tracecanary.trace/v1",
    "meta": {"world_size": 4, "source": "t"},
    "groups": [{"id": "w", "ranks": [0, 1, 2, 3]}, {"id": "world", "ranks": [0, 1, 2, 3]}],
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    chunk=_chunks(),
    batch_bytes=st.sampled_from([64, 300, 900, 1 << 16]),
    gz=st.booleans(),
)
def test_ingest_matches_the_streaming_json_reader_on_hostile_lines(
    tmp_path_factory, chunk, batch_bytes, gz
):
    tmp = tmp_path_factory.mktemp("jsonl")
    body = json.dumps(_HEADER).encode() + b"\n" + chunk
    path = tmp / ("t.jsonl.gz" if gz else "t.jsonl")
    path.write_bytes(gzip.compress(body, mtime=0) if gz else body)
    out = tmp / "t.parquet"
    ours = _ingest(path, out, batch_bytes, reference=False)
    if not chunk.strip():  # no event: refused as the JSON form is (see the test below)
        assert ours[:2] == ("refused", "InputError") and "the trace has no events" in ours[2]
        return
    reference = _ingest(path, out, batch_bytes, reference=True)
    assert ours == reference


@pytest.mark.parametrize("body", [b"", b"\n", b"  \n\n"])
def test_a_json_lines_trace_without_events_is_refused_as_the_json_form_is(tmp_path, body, run_cli):
    """A header and nothing but whitespace: the JSON form's refusal (no collectives,
    named field ``events``), where pyarrow's streaming reader said only "Empty JSON
    stream" at record 0."""
    lines = tmp_path / "t.jsonl"
    lines.write_bytes(json.dumps(_HEADER).encode() + b"\n" + body)
    as_json = tmp_path / "t.json"
    as_json.write_text(json.dumps({**_HEADER, "events": []}))
    refusals = []
    for path in (lines, as_json):
        out = tmp_path / f"{path.suffix[1:]}.parquet"
        with pytest.raises(InputError) as caught:
            ingest_mod.ingest_files([str(path)], out)
        assert not out.exists()
        refusals.append(caught.value.one_line().replace(str(path), "FILE"))
    assert refusals[0] == refusals[1]
    assert "field events: no collectives found: the trace has no events" in refusals[0]
    out = tmp_path / "cli.parquet"
    code, _, err = run_cli("ingest", lines, "-o", out)
    assert code == 2 and "the trace has no events" in err and not out.exists()


@pytest.mark.parametrize("batch_bytes", [1 << 24, 1 << 16, 700, 100])
def test_ingest_matches_the_streaming_json_reader_on_decode_traces(tmp_path, batch_bytes):
    """Byte-identical Parquet and sidecar at every batch size, lines longer than a
    block included (then both refuse the straddling line the same way)."""
    docs, _ = build_decode(DecodeSpec(ranks=4, events_per_rank=600))
    doc = docs[0]
    doc["events"] = [e for d in docs for e in d["events"]]
    path = tmp_path / "t.jsonl"
    write_trace(doc, path)
    out = tmp_path / "t.parquet"
    ours = _ingest(path, out, batch_bytes, reference=False)
    assert ours == _ingest(path, out, batch_bytes, reference=True)
    assert ours[0] == ("refused" if batch_bytes == 100 else "ok")


def test_shipped_captures_take_the_template_parser(tmp_path, monkeypatch):
    """The shipped decode captures are read by the template parser (not left to the
    JSON reader), with the same bytes as the streaming reader."""
    from conftest import REPO

    taken = []
    original = ingest_mod.parse_chunk

    def counting(chunk):
        batch = original(chunk)
        taken.append(batch is not None)
        return batch

    monkeypatch.setattr(ingest_mod, "parse_chunk", counting)
    for path in sorted((REPO / "resources" / "decode").glob("rank*.jsonl.gz")):
        out = tmp_path / "t.parquet"
        ours = _ingest(path, out, ingest_mod.BATCH_BYTES, reference=False)
        assert ours[0] == "ok"
        assert ours == _ingest(path, out, ingest_mod.BATCH_BYTES, reference=True)
    assert taken and all(taken)


def test_template_parser_reads_what_trace_io_writes(tmp_path):
    docs, _ = build_decode(DecodeSpec(ranks=2, events_per_rank=400))
    path = tmp_path / "t.jsonl"
    write_trace(docs[0], path)
    body = path.read_bytes().split(b"\n", 1)[1]
    fast = parse_chunk(body)
    assert fast is not None and fast.num_rows == len(docs[0]["events"])
    assert pa.Table.from_batches([fast]).equals(_json_reader(body).combine_chunks())


# --- the body's chunks: cut as pyarrow's streaming reader cuts, buffers used again -----


def _chunks_by_definition(body: bytes, block: int) -> list[bytes] | str:
    """The cutting rule written plainly (blocks of ``block`` bytes; a chunk is the carry
    and the block up to its last newline; the final block whole; a carried line with no
    newline in the next block, when more follows, is refused)."""
    blocks = [body[i : i + block] for i in range(0, len(body), block)]
    chunks, carry = [], b""
    for i, data in enumerate(blocks):
        if i == len(blocks) - 1:
            chunks.append(carry + data)
            break
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            if carry:
                return "straddling"
            carry = data
        else:
            chunks.append(carry + data[:cut])
            carry = data[cut:]
    return chunks


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=30),
    final_newline=st.booleans(),
    block=st.integers(1, 64),
)
def test_body_chunks_follow_the_cutting_rule_while_reusing_buffers(lines, final_newline, block):
    import io

    body = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    expected = _chunks_by_definition(body, block)
    buffers = ingest_mod._ChunkBuffers(keep=4)
    got: list[bytes] = []
    with pytest.MonkeyPatch.context() as m:
        m.setattr(ingest_mod, "BATCH_BYTES", block)
        try:
            for chunk in ingest_mod._jsonl_chunks(io.BytesIO(body), buffers):
                got.append(bytes(chunk))
                buffers.give(chunk)  # as the reader does once the chunk is parsed
        except pa.ArrowInvalid as err:
            assert expected == "straddling" and "straddl" in str(err)
            return
    assert got == expected


def test_a_chunk_buffer_still_viewed_is_never_handed_out_again():
    buffers = ingest_mod._ChunkBuffers(keep=4)
    viewed = buffers.take(1000)
    view = memoryview(viewed)  # e.g. an Arrow buffer over the chunk's bytes
    buffers.give(viewed)
    assert buffers.take(1000) is not viewed
    view.release()
    free = buffers.take(1000)
    buffers.give(free)
    again = buffers.take(990)
    assert again is free and len(again) == 990
