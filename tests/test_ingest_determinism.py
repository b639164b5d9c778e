"""Same input, same bytes: ingest twice, JSON vs JSON Lines, batched vs whole."""

from __future__ import annotations

import json

import jsonschema
import pyarrow.parquet as pq
from conftest import REPO, small_trace, write_doc

import tracecanary.ingest as ingest_mod
from tracecanary.canonical import sha256_file
from tracecanary.synth.decode import DecodeSpec, build_decode
from tracecanary.trace_io import write_trace


def test_ingest_twice_gives_identical_digest(tmp_path, run_cli):
    src = write_doc(small_trace(), tmp_path / "t.json")
    assert run_cli("ingest", src, "-o", tmp_path / "a.parquet")[0] == 0
    assert run_cli("ingest", src, "-o", tmp_path / "b.parquet")[0] == 0
    assert sha256_file(tmp_path / "a.parquet") == sha256_file(tmp_path / "b.parquet")
    code, out, _ = run_cli("hash", tmp_path / "a.parquet")
    assert code == 0 and out.split()[0] == sha256_file(tmp_path / "a.parquet")


def test_json_and_jsonl_give_the_same_parquet_bytes(tmp_path, monkeypatch, run_cli):
    docs, _ = build_decode(DecodeSpec(events_per_rank=3000))
    doc = docs[1]
    write_trace(doc, tmp_path / "t.json")
    write_trace(doc, tmp_path / "t.jsonl.gz")
    # small batches: the JSONL reader must cross many batch boundaries
    monkeypatch.setattr(ingest_mod, "BATCH_BYTES", 1 << 16)
    assert run_cli("ingest", tmp_path / "t.json", "-o", tmp_path / "a.parquet")[0] == 0
    assert run_cli("ingest", tmp_path / "t.jsonl.gz", "-o", tmp_path / "b.parquet")[0] == 0
    assert sha256_file(tmp_path / "a.parquet") == sha256_file(tmp_path / "b.parquet")
    assert pq.read_metadata(tmp_path / "b.parquet").num_rows == len(doc["events"])


def test_synthetic_decode_documents_validate_against_the_trace_schema(tmp_path):
    schema = json.loads((REPO / "schemas" / "trace.schema.json").read_text())
    docs, calibration = build_decode(DecodeSpec(events_per_rank=200))
    for doc in docs:
        jsonschema.validate(doc, schema)
    jsonschema.validate(
        calibration, json.loads((REPO / "schemas" / "calibration.schema.json").read_text())
    )


def test_unmeasured_fields_stay_null_not_zero(tmp_path, run_cli):
    doc = small_trace()
    src = write_doc(doc, tmp_path / "t.json")
    assert run_cli("ingest", src, "-o", tmp_path / "t.parquet")[0] == 0
    table = pq.read_table(tmp_path / "t.parquet")
    assert table.column("latency_ns").null_count == table.num_rows
    assert table.column("overlap_ns").null_count == 0
    side = json.loads((tmp_path / "t.meta.json").read_text())
    assert side["timing_semantics"] == "timestamps" and side["events"] == table.num_rows
