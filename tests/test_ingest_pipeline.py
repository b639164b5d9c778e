"""The pipelined ingest: inputs hashed as they stream, row groups encoded on a writer
thread, refusals from any batch (and failures of the writer thread) surfacing as one
error with no output left, bytes independent of how the input was batched."""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
import subprocess
import sys
import textwrap
import threading

import pyarrow.parquet as pq
import pytest
from conftest import REPO, small_trace, write_doc

import tracecanary.ingest as ingest_mod
from tracecanary.canonical import sha256_file
from tracecanary.limits import open_input
from tracecanary.synth.decode import DecodeSpec, build_decode
from tracecanary.trace_io import write_trace


def _decode_doc(events_per_rank: int = 1500) -> dict:
    docs, _ = build_decode(DecodeSpec(events_per_rank=events_per_rank))
    return docs[1]


def _writer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("tracecanary-parquet")]


@pytest.mark.parametrize("name", ["t.jsonl", "t.jsonl.gz", "t.json", "t.json.gz"])
def test_open_input_digest_equals_sha256_of_the_stored_file(tmp_path, name):
    path = tmp_path / name
    write_trace(_decode_doc(300), path)
    digest = hashlib.sha256()
    with open_input(path, digest=digest) as stream:
        first = stream.read(100)  # read in two parts: the digest follows every read
        rest = stream.read()
    assert len(first) == 100 and rest
    assert digest.hexdigest() == sha256_file(path)


def test_open_input_digest_covers_every_member_of_a_multi_member_gzip(tmp_path):
    body = b"".join(json.dumps({"i": i}).encode() + b"\n" for i in range(5000))
    path = tmp_path / "two.jsonl.gz"
    path.write_bytes(gzip.compress(body[:20000]) + gzip.compress(body[20000:]))
    digest = hashlib.sha256()
    with open_input(path, digest=digest) as stream:
        assert stream.read() == body
    assert digest.hexdigest() == sha256_file(path)


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".json"])
def test_sidecar_source_digest_is_the_sha256_of_each_input(tmp_path, run_cli, monkeypatch, suffix):
    monkeypatch.setattr(ingest_mod, "BATCH_BYTES", 1 << 16)
    docs, _ = build_decode(DecodeSpec(events_per_rank=800))
    paths = []
    for rank, doc in enumerate(docs):
        path = tmp_path / f"rank{rank}{suffix}"
        write_trace(doc, path)
        paths.append(path)
    out = tmp_path / "t.parquet"
    code, _, err = run_cli("ingest", *paths, "-o", out)
    assert code == 0, err
    side = json.loads(ingest_mod.sidecar_path(out).read_text())
    assert side["sources"] == [{"path": p.name, "sha256": sha256_file(p)} for p in paths]
    assert side["table_sha256"] == sha256_file(out)


def test_row_groups_are_fixed_and_bytes_do_not_depend_on_batching(tmp_path, monkeypatch):
    """Several row groups (so the writer thread encodes while batches are checked):
    the same bytes whatever the batch size, and every group but the last is full."""
    doc = _decode_doc(1500)
    src = tmp_path / "t.jsonl"
    write_trace(doc, src)
    monkeypatch.setattr(ingest_mod, "ROW_GROUP_SIZE", 300)
    digests = set()
    for batch_bytes in (1 << 12, 1 << 16, 1 << 24):
        monkeypatch.setattr(ingest_mod, "BATCH_BYTES", batch_bytes)
        out = tmp_path / f"b{batch_bytes}.parquet"
        result = ingest_mod.ingest_files([str(src)], out)
        digests.add(result.parquet_sha256)
        assert result.parquet_sha256 == sha256_file(out)
        meta = pq.read_metadata(out)
        sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        assert sum(sizes) == len(doc["events"]) and len(sizes) > 3
        assert set(sizes[:-1]) == {300} and 0 < sizes[-1] <= 300
    assert len(digests) == 1
    # the JSON form (one batch per 2**18 events) gives the same bytes again
    write_trace(doc, tmp_path / "t.json")
    assert (
        ingest_mod.ingest_files([str(tmp_path / "t.json")], tmp_path / "j.parquet").parquet_sha256
        in digests
    )
    assert not _writer_threads()


@pytest.mark.parametrize(
    "field,value,expect", [("seq", 0, "field seq"), ("op", "fancy", "field op")]
)
def test_refusal_after_row_groups_were_encoded_leaves_no_output(
    tmp_path, run_cli, monkeypatch, field, value, expect
):
    """The refusal comes from a late batch, after the writer thread has written row
    groups: exit 2, one line naming file, record and field, nothing left behind."""
    doc = _decode_doc(1500)
    bad = len(doc["events"]) - 10
    doc["events"][bad][field] = value
    src = tmp_path / "bad.jsonl"
    write_trace(doc, src)
    monkeypatch.setattr(ingest_mod, "ROW_GROUP_SIZE", 500)
    monkeypatch.setattr(ingest_mod, "BATCH_BYTES", 1 << 14)
    out = tmp_path / "out" / "t.parquet"
    code, _, err = run_cli("ingest", src, "-o", out)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(src) in lines[0] and f"record {bad}" in lines[0] and expect in lines[0]
    assert not (tmp_path / "out").exists()
    assert not _writer_threads()


def test_parse_failure_in_a_later_block_is_one_line_with_no_output(tmp_path, run_cli, monkeypatch):
    doc = _decode_doc(1500)
    src = write_doc(doc, tmp_path / "bad.jsonl", jsonl=True)
    lines = src.read_text().splitlines()
    bad = len(lines) - 5  # line index; record = line index - 1 (the header is line 0)
    lines[bad] = lines[bad][:-1] + ', "colour": "red"}'
    src.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(ingest_mod, "ROW_GROUP_SIZE", 500)
    monkeypatch.setattr(ingest_mod, "BATCH_BYTES", 1 << 14)
    out = tmp_path / "out" / "t.parquet"
    code, _, err = run_cli("ingest", src, "-o", out)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"record {bad - 1}" in err and "field colour" in err
    assert not (tmp_path / "out").exists()


def test_writer_thread_failure_surfaces_and_leaves_no_output(tmp_path):
    """A real write failure on the writer thread (the file-size limit of the process is
    hit while a row group is encoded) is raised to the caller; no output remains."""
    doc = _decode_doc(1500)
    src = tmp_path / "t.jsonl"
    write_trace(doc, src)
    out = tmp_path / "out" / "t.parquet"
    code = textwrap.dedent(
        f"""
        import resource, signal, sys, threading
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too-large write fails (EFBIG)
        import tracecanary.ingest as m
        m.ROW_GROUP_SIZE = 500
        m.BATCH_BYTES = 1 << 14
        resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
        try:
            m.ingest_files([{str(src)!r}], {str(out)!r})
        except OSError as err:
            threads = [t.name for t in threading.enumerate() if t.name.startswith("tracecanary-parquet")]
            print("raised", type(err).__name__, threads)
            sys.exit(0)
        print("no error")
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "raised OSError []", proc.stdout
    assert not out.exists() and not (tmp_path / "out").exists()


def test_custom_ops_pass_and_malformed_custom_op_is_refused(tmp_path, run_cli):
    doc = small_trace()
    for event in doc["events"]:
        if event["op"] == "all_reduce":
            event["op"] = "custom:fused_ar/v2"
    src = write_doc(doc, tmp_path / "t.jsonl", jsonl=True)
    assert run_cli("ingest", src, "-o", tmp_path / "t.parquet")[0] == 0
    table = pq.read_table(tmp_path / "t.parquet")
    assert "custom:fused_ar/v2" in table.column("op").to_pylist()
    bad = copy.deepcopy(doc)
    bad["events"][4]["op"] = "custom:"
    src = write_doc(bad, tmp_path / "bad.jsonl", jsonl=True)
    code, _, err = run_cli("ingest", src, "-o", tmp_path / "bad.parquet")
    assert code == 2 and "record 4" in err and "field op" in err
    assert not (tmp_path / "bad.parquet").exists()


def test_sign_refusals_come_before_limit_refusals_in_a_batch(tmp_path, run_cli):
    """One batch with an over-limit byte count (record 1) and a negative timestamp
    (record 5): the sign check of every field runs first, as before, so record 5."""
    doc = small_trace()
    doc["events"][1]["bytes"] = 2**62
    doc["events"][5]["overlap_ns"] = -3
    src = write_doc(doc, tmp_path / "t.jsonl", jsonl=True)
    code, _, err = run_cli("ingest", src, "-o", tmp_path / "t.parquet")
    assert code == 2 and "record 5" in err and "field overlap_ns" in err, err
    doc["events"][5]["overlap_ns"] = 3
    src = write_doc(doc, tmp_path / "t.jsonl", jsonl=True)
    code, _, err = run_cli("ingest", src, "-o", tmp_path / "t.parquet")
    assert code == 2 and "record 1" in err and "max_message_bytes" in err, err
