"""Columnar captures (Parquet, Arrow IPC file and stream) go through ingest's checks and
give the same normalized bytes as the JSON Lines form of the same trace."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from conftest import small_trace, write_doc
from test_ingest_refusals import CASES, _mutate

from tracecanary.canonical import sha256_file
from tracecanary.columnar_capture import HEADER_KEY, write_columnar
from tracecanary.formats.trace import EVENT_SCHEMA
from tracecanary.synth.decode import DecodeSpec, build_decode
from tracecanary.trace_io import write_trace

CONTAINERS = ["t.parquet", "t.arrow", "t.arrows"]
# refusals of values (the type-level ones cannot be written into typed columns)
VALUE_CASES = sorted(
    set(CASES)
    - {"schema_violation_string_size", "unknown_field", "non_integer_size", "non_integer_time"}
)


def _header(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k != "events"}


def _columns(doc: dict, *, drop_empty: bool = False) -> pa.Table:
    table = pa.Table.from_pylist(doc["events"], schema=EVENT_SCHEMA)
    if drop_empty:  # a tool that writes only the fields it measures
        keep = [n for n in table.column_names if table.column(n).null_count < table.num_rows]
        table = table.select(keep)
    return table


@pytest.mark.parametrize("name", CONTAINERS)
def test_columnar_capture_gives_the_jsonl_parquet_bytes(tmp_path, run_cli, name):
    docs, _ = build_decode(DecodeSpec(events_per_rank=2000))
    doc = docs[0]
    write_trace(doc, tmp_path / "t.jsonl")
    write_columnar(_header(doc), _columns(doc, drop_empty=True), tmp_path / name)
    assert run_cli("ingest", tmp_path / "t.jsonl", "-o", tmp_path / "a.parquet")[0] == 0
    assert run_cli("ingest", tmp_path / name, "-o", tmp_path / "b.parquet")[0] == 0
    assert sha256_file(tmp_path / "a.parquet") == sha256_file(tmp_path / "b.parquet")
    side = json.loads((tmp_path / "b.meta.json").read_text())
    assert side["sources"] == [{"path": name, "sha256": sha256_file(tmp_path / name)}]


@pytest.mark.parametrize("case", VALUE_CASES)
def test_columnar_capture_refuses_what_jsonl_refuses(tmp_path, run_cli, case):
    mutate, record, field = CASES[case]
    doc = _mutate(small_trace(), mutate)
    write_columnar(_header(doc), _columns(doc), tmp_path / "bad.arrow")
    jsonl = write_doc(doc, tmp_path / "bad.jsonl", jsonl=True)
    out = tmp_path / "out" / "t.parquet"
    code, _, err = run_cli("ingest", tmp_path / "bad.arrow", "-o", out)
    _, _, jsonl_err = run_cli("ingest", jsonl, "-o", out)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"record {record}" in err and f"field {field}" in err
    assert err.replace("bad.arrow", "bad.jsonl") == jsonl_err
    assert not out.exists()


def _refusal(run_cli, path, out):
    code, _, err = run_cli("ingest", path, "-o", out)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert str(path) in err
    assert not out.exists()
    return err


def test_columnar_capture_refuses_a_column_that_is_not_an_event_field(tmp_path, run_cli):
    doc = small_trace()
    table = _columns(doc).append_column("colour", pa.array(["red"] * len(doc["events"])))
    write_columnar(_header(doc), table, tmp_path / "bad.parquet")
    err = _refusal(run_cli, tmp_path / "bad.parquet", tmp_path / "o.parquet")
    assert "field colour" in err


def test_columnar_capture_refuses_a_column_of_the_wrong_type(tmp_path, run_cli):
    doc = small_trace()
    table = _columns(doc)
    index = table.schema.get_field_index("bytes")
    table = table.set_column(index, "bytes", table.column("bytes").cast(pa.int32()))
    write_columnar(_header(doc), table, tmp_path / "bad.arrows")
    err = _refusal(run_cli, tmp_path / "bad.arrows", tmp_path / "o.parquet")
    assert "field bytes" in err and "int32" in err


def test_columnar_capture_refuses_a_missing_header(tmp_path, run_cli):
    table = _columns(small_trace())
    with ipc.new_file(tmp_path / "bad.arrow", table.schema) as writer:
        writer.write_table(table)
    err = _refusal(run_cli, tmp_path / "bad.arrow", tmp_path / "o.parquet")
    assert HEADER_KEY.decode() in err


def test_columnar_capture_refuses_invalid_utf8_naming_record_and_field(tmp_path, run_cli):
    doc = small_trace()
    table = _columns(doc)
    phases = [(p or "").encode() for p in table.column("phase").to_pylist()]
    phases[3] = b"\xff"
    offsets = [0]
    for p in phases:
        offsets.append(offsets[-1] + len(p))
    bad = pa.Array.from_buffers(
        pa.string(),
        len(phases),
        [
            None,
            pa.py_buffer(pa.array(offsets, pa.int32()).buffers()[1]),
            pa.py_buffer(b"".join(phases)),
        ],
    )
    table = table.set_column(table.schema.get_field_index("phase"), "phase", bad)
    write_columnar(_header(doc), table, tmp_path / "bad.arrow")
    err = _refusal(run_cli, tmp_path / "bad.arrow", tmp_path / "o.parquet")
    assert "record 3" in err and "field phase" in err


def test_columnar_capture_refuses_an_unreadable_file(tmp_path, run_cli):
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    _refusal(run_cli, tmp_path / "bad.parquet", tmp_path / "o.parquet")


def test_merge_of_columnar_per_rank_captures_equals_the_merge_of_json_ones(tmp_path, run_cli):
    from test_merge import _calibration, _per_rank

    from tracecanary.canonical import write_json

    write_json(
        tmp_path / "clocks.json",
        _calibration([{"ranks": [0, 1], "offset_ns": 0, "drift_ppb": 0, "uncertainty_ns": 0}]),
    )
    docs = _per_rank(small_trace())
    as_json = [write_doc(d, tmp_path / f"rank{i}.json") for i, d in enumerate(docs)]
    as_arrow = []
    for i, d in enumerate(docs):
        as_arrow.append(tmp_path / f"rank{i}.arrow")
        write_columnar(_header(d), _columns(d, drop_empty=True), as_arrow[-1])
    clocks = ("--calibration", tmp_path / "clocks.json")
    assert run_cli("merge", *as_json, *clocks, "-o", tmp_path / "a.json")[0] == 0
    assert run_cli("merge", *as_arrow, *clocks, "-o", tmp_path / "b.json")[0] == 0
    a = json.loads((tmp_path / "a.json").read_text())
    b = json.loads((tmp_path / "b.json").read_text())
    assert a["events"] == b["events"] and a["groups"] == b["groups"]


@pytest.mark.parametrize("name", ["bad.parquet", "bad.arrow"])
def test_columnar_capture_over_the_decoded_size_limit_is_refused(
    tmp_path, run_cli, monkeypatch, name
):
    doc = small_trace()
    write_columnar(_header(doc), _columns(doc), tmp_path / name)
    monkeypatch.setenv("TRACECANARY_LIMITS", "max_decompressed_bytes=64")
    err = _refusal(run_cli, tmp_path / name, tmp_path / "o.parquet")
    assert "max_decompressed_bytes=64" in err


@pytest.mark.slow
def test_columnar_capture_of_small_batches_gives_the_jsonl_bytes_past_the_dictionary_limit(
    tmp_path,
):
    """A capture read in batches of a few thousand rows, with more distinct timestamps
    than fit the Parquet writer's dictionary page (so the writer falls back to plain
    encoding inside the row group): the same bytes as the JSON Lines ingest. (Handing the
    writer the batches uncopied, even cut to multiples of its 1,024-row runs, changed the
    bytes of ``ts_ns`` here.)"""
    from tracecanary.ingest import ingest_files

    docs, _ = build_decode(DecodeSpec(ranks=4, events_per_rank=40_000))
    doc = docs[0]
    doc["events"] = [e for d in docs for e in d["events"]]
    write_trace(doc, tmp_path / "t.jsonl")
    events = _columns(doc, drop_empty=True)
    meta = {HEADER_KEY: json.dumps(_header(doc), sort_keys=True).encode("utf-8")}
    with ipc.new_file(tmp_path / "t.arrow", events.schema.with_metadata(meta)) as writer:
        writer.write_table(events.replace_schema_metadata(meta), max_chunksize=5_000)
    jsonl = ingest_files([str(tmp_path / "t.jsonl")], tmp_path / "a.parquet")
    arrow = ingest_files([str(tmp_path / "t.arrow")], tmp_path / "b.parquet")
    assert jsonl.events == arrow.events > (1 << 20) // 8  # timestamps past a 1 MiB page
    assert jsonl.parquet_sha256 == arrow.parquet_sha256
