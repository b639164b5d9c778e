"""Lone surrogates and repeated keys in JSON (issue 17, defect 5 and the duplicate-key
hole): exit 2 naming record and field on every JSON path, never a traceback, never a
partial output."""

from __future__ import annotations

import gzip
import json

import pytest
from conftest import small_trace, write_doc

from tracecanary.errors import InputError
from tracecanary.limits import parse_json_bytes

LONE = ["\ud800", "\udfff", "ok\udc00"]


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("jsonl", [False, True], ids=["json", "jsonl"])
@pytest.mark.parametrize("value", LONE)
def test_a_lone_surrogate_in_an_event_field_is_exit_2_naming_record_and_field(
    tmp_path, run_cli, jsonl, value
):
    doc = small_trace()
    doc["events"][4]["phase"] = value
    path = write_doc(doc, tmp_path / ("t.jsonl" if jsonl else "t.json"), jsonl=jsonl)
    code, _, err = run_cli("ingest", path, "-o", tmp_path / "out" / "t.parquet")
    assert code == 2
    assert "record 4: field phase: string holds a lone surrogate" in _one_error_line(err)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("jsonl", [False, True], ids=["json", "jsonl"])
def test_a_lone_surrogate_in_meta_source_is_exit_2_naming_the_field(tmp_path, run_cli, jsonl):
    doc = small_trace()
    doc["meta"]["source"] = "\ud800"
    path = write_doc(doc, tmp_path / ("t.jsonl" if jsonl else "t.json"), jsonl=jsonl)
    code, _, err = run_cli("ingest", path, "-o", tmp_path / "out" / "t.parquet")
    assert code == 2 and "field meta.source: string holds a lone surrogate" in _one_error_line(err)
    assert not (tmp_path / "out").exists()


def test_a_lone_surrogate_in_a_kineto_trace_is_exit_2(tmp_path, run_cli):
    doc = {"traceEvents": [{"ph": "X", "name": "nccl:all_reduce\udc80", "ts": 1, "dur": 2}]}
    path = tmp_path / "k.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    code, _, err = run_cli("import-kineto", path, "-o", tmp_path / "out.json")
    assert code == 2 and "traceEvents[0].name" in _one_error_line(err)


def test_a_lone_surrogate_in_a_calibration_file_is_exit_2(tmp_path, run_cli):
    doc = small_trace()
    capture = write_doc(doc, tmp_path / "rank0.json")
    calibration = tmp_path / "calibration.json"
    calibration.write_text('{"format": "tracecanary.calibration/v1", "note": "\\udbff"}')
    code, _, err = run_cli(
        "merge", capture, "--calibration", calibration, "-o", tmp_path / "m.json"
    )
    assert code == 2 and "lone surrogate" in _one_error_line(err)


def test_paired_surrogates_are_one_character_and_accepted():
    assert parse_json_bytes(b'{"a": "\\ud83d\\ude00"}', file="x") == {"a": "\U0001f600"}
    # an escaped backslash before "ud800" is text, not an escape
    assert parse_json_bytes(b'{"a": "\\\\ud800"}', file="x") == {"a": "\\ud800"}


def test_a_lone_surrogate_in_a_key_is_named():
    with pytest.raises(InputError, match="lone surrogate"):
        parse_json_bytes(b'{"\\ud800": 1}', file="x")


@pytest.mark.parametrize("jsonl", [False, True], ids=["json", "jsonl"])
def test_a_key_repeated_within_an_event_is_exit_2_naming_record_and_key(tmp_path, run_cli, jsonl):
    doc = small_trace()
    path = write_doc(doc, tmp_path / ("t.jsonl" if jsonl else "t.json"), jsonl=jsonl)
    text = path.read_text()
    first = json.dumps(doc["events"][2])
    assert first in text
    path.write_text(text.replace(first, first[:-1] + ', "bytes": 1}', 1))
    code, _, err = run_cli("ingest", path, "-o", tmp_path / "t.parquet")
    line = _one_error_line(err)
    assert code == 2 and "key repeated within one JSON object" in line and "bytes" in line
    assert not (tmp_path / "t.parquet").exists()


def test_a_key_repeated_in_a_header_is_exit_2(tmp_path, run_cli):
    path = write_doc(small_trace(), tmp_path / "t.json")
    path.write_text(path.read_text().replace('"world_size": 2', '"world_size": 2, "world_size": 4'))
    code, _, err = run_cli("ingest", path, "-o", tmp_path / "t.parquet")
    assert code == 2 and "field world_size: key repeated" in _one_error_line(err)
