"""Every refusal of ingest: exit 2, one line naming file, record and field, no output."""

from __future__ import annotations

import copy

import pytest
from conftest import small_trace, write_doc


def _mutate(doc, fn):
    doc = copy.deepcopy(doc)
    fn(doc)
    return doc


def _set(index, field, value):
    def fn(doc):
        doc["events"][index][field] = value

    return fn


def _drop(index, field):
    def fn(doc):
        del doc["events"][index][field]

    return fn


CASES = {
    "schema_violation_string_size": (_set(2, "bytes", "4096"), 2, "bytes"),
    "unknown_field": (_set(1, "colour", "red"), 1, "colour"),
    "missing_required_field": (_drop(3, "dtype"), 3, "dtype"),
    "negative_size": (_set(4, "bytes", -8), 4, "bytes"),
    "non_integer_size": (_set(4, "bytes", 8.5), 4, "bytes"),
    "non_integer_time": (_set(5, "ts_ns", 1234.5), 5, "ts_ns"),
    "unknown_op": (_set(0, "op", "allreduce_fancy"), 0, "op"),
    "undeclared_group": (_set(2, "group", "tp7"), 2, "group"),
    "rank_outside_group": (
        lambda d: (
            d["groups"].append({"id": "solo", "ranks": [0]}),
            d["events"][10].update(group="solo"),
        ),
        10,
        "rank",
    ),
    "timestamps_backwards": (_set(5, "ts_ns", 5), 5, "ts_ns"),
    "gap_contradicts_timestamps": (_set(4, "gap_ns", 7), 4, "gap_ns"),
    "mixed_timing_semantics": (_drop(3, "ts_ns"), 3, "gap_ns"),
    "peer_missing_on_send": (_drop(2, "peer"), 2, "peer"),
}


@pytest.mark.parametrize("jsonl", [False, True], ids=["json", "jsonl"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_ingest_refuses_bad_event(tmp_path, run_cli, case, jsonl):
    mutate, record, field = CASES[case]
    doc = _mutate(small_trace(), mutate)
    src = write_doc(doc, tmp_path / ("bad.jsonl" if jsonl else "bad.json"), jsonl=jsonl)
    out = tmp_path / "out" / "t.parquet"
    code, _, err = run_cli("ingest", src, "-o", out)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(src) in lines[0]
    assert f"record {record}" in lines[0]
    assert f"field {field}" in lines[0]
    assert not out.exists()
    assert not any(out.parent.glob("*")) if out.parent.exists() else True


def test_ingest_refuses_non_finite_time_in_jsonl(tmp_path, run_cli):
    doc = small_trace()
    src = write_doc(doc, tmp_path / "t.jsonl", jsonl=True)
    lines = src.read_text().splitlines()
    lines[3] = lines[3].replace('"overlap_ns": 0', '"overlap_ns": NaN')
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "t.parquet"
    code, _, err = run_cli("ingest", src, "-o", out)
    assert code == 2 and "record 2" in err and "overlap_ns" in err
    assert not out.exists()


def test_ingest_refuses_group_whose_ranks_disagree_with_size(tmp_path, run_cli):
    doc = small_trace()
    doc["groups"][0]["size"] = 3
    src = write_doc(doc, tmp_path / "t.json")
    code, _, err = run_cli("ingest", src, "-o", tmp_path / "t.parquet")
    assert code == 2 and "groups/0/size" in err and "declares size 3" in err
    assert not (tmp_path / "t.parquet").exists()


def test_ingest_refuses_duplicate_event_of_a_rank(tmp_path, run_cli):
    doc = small_trace()
    doc["events"].insert(1, copy.deepcopy(doc["events"][0]))
    src = write_doc(doc, tmp_path / "t.json")
    code, _, err = run_cli("ingest", src, "-o", tmp_path / "t.parquet")
    assert code == 2 and "record 1" in err and "field seq" in err


def test_ingest_refuses_wrong_format_and_invalid_json(tmp_path, run_cli):
    bad = tmp_path / "x.json"
    bad.write_text('{"format": "something/else", "events": []}')
    code, _, err = run_cli("ingest", bad, "-o", tmp_path / "o.parquet")
    assert code == 2 and "field format" in err
    bad.write_text('{"format": ')
    code, _, err = run_cli("ingest", bad, "-o", tmp_path / "o.parquet")
    assert code == 2 and "not valid JSON" in err and len(err.strip().splitlines()) == 1


def test_mixed_timing_is_accepted_when_every_event_has_a_gap(tmp_path, run_cli):
    doc = small_trace(with_gap=True)
    for event in doc["events"]:
        if event["seq"] == 0:
            event["gap_ns"] = event["ts_ns"]
    for event in doc["events"][1::2]:
        del event["ts_ns"]
    src = write_doc(doc, tmp_path / "t.json")
    code, _, err = run_cli("ingest", src, "-o", tmp_path / "t.parquet")
    assert code == 0, err
    assert "mixed_with_gaps" in err
