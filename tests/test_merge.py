"""Merge: every refusal, and skew only from an explicit clock calibration."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from conftest import small_trace, write_doc

from tracecanary.canonical import write_json
from tracecanary.load import load_program


def _per_rank(doc: dict, host_offset_ns: dict[int, int] | None = None) -> list[dict]:
    """Split a 2-rank trace into per-process captures on separate host clocks."""
    host_offset_ns = host_offset_ns or {}
    out = []
    for rank in (0, 1):
        d = copy.deepcopy(doc)
        d["events"] = [e for e in d["events"] if e["rank"] == rank]
        for e in d["events"]:
            e["ts_ns"] += host_offset_ns.get(rank, 0)
        d["meta"]["clock_domains"] = [{"id": f"host{rank}", "ranks": [rank], "host": f"host{rank}"}]
        out.append(d)
    return out


def _write_captures(tmp_path, docs):
    return [write_doc(d, tmp_path / f"rank{i}.json") for i, d in enumerate(docs)]


def _calibration(entries):
    return {
        "format": "tracecanary.calibration/v1",
        "reference": "host0",
        "method": "test",
        "clocks": entries,
    }


def test_merge_without_calibration_records_skew_unknown_never_zero(tmp_path, run_cli):
    caps = _write_captures(tmp_path, _per_rank(small_trace(), {1: 5_000_000}))
    out = tmp_path / "merged.json"
    code, _, err = run_cli("merge", *caps, "-o", out)
    assert code == 0, err
    merged = json.loads(out.read_text())
    assert merged["meta"]["skew"]["status"] == "unknown"
    assert "calibration" in merged["meta"]["skew"]["reason"]
    program = load_program(out)
    assert program.skew_known is False and program.skew_reason


def test_merge_with_offset_and_drift_calibration_recovers_skew_within_uncertainty(
    tmp_path, run_cli
):
    doc = small_trace()  # true skew: rank 1 arrives 50 ns after rank 0 at every collective
    offset, drift_ppb, anchor = 7_000_000, 40.0, 0
    docs = _per_rank(doc)
    for e in docs[1]["events"]:  # host1's clock runs ahead by offset and drifts
        true = e["ts_ns"]
        e["ts_ns"] = true - (-offset - 0)  # local = true + offset (drift applied below)
        e["ts_ns"] = int(round(e["ts_ns"] + drift_ppb * (true - anchor) / 1e9))
    caps = _write_captures(tmp_path, docs)
    calibration = _calibration(
        [
            {"clock": "host0", "offset_ns": 0, "drift_ppb": 0, "uncertainty_ns": 0},
            {
                "clock": "host1",
                "offset_ns": -offset,
                "drift_ppb": -drift_ppb,
                "anchor_ns": anchor,
                "uncertainty_ns": 5,
            },
        ]
    )
    write_json(tmp_path / "clocks.json", calibration)
    out = tmp_path / "merged.json"
    code, _, err = run_cli("merge", *caps, "--calibration", tmp_path / "clocks.json", "-o", out)
    assert code == 0, err
    merged = json.loads(out.read_text())
    assert (
        merged["meta"]["skew"]["status"] == "known"
        and merged["meta"]["skew"]["uncertainty_ns"] == 5
    )
    program = load_program(out)
    assert program.skew_known
    skew = program.members.set_index(["occ", "rank"])["skew_ns"]
    rank1 = skew.xs(1, level="rank").to_numpy()
    assert np.all(np.abs(rank1 - 50) <= 5), rank1


def test_merge_refuses_calibration_that_does_not_cover_a_rank(tmp_path, run_cli):
    caps = _write_captures(tmp_path, _per_rank(small_trace()))
    write_json(
        tmp_path / "clocks.json",
        _calibration([{"clock": "host0", "offset_ns": 0, "drift_ppb": 0, "uncertainty_ns": 0}]),
    )
    out = tmp_path / "m.json"
    code, _, err = run_cli("merge", *caps, "--calibration", tmp_path / "clocks.json", "-o", out)
    assert code == 2 and "does not cover rank 1" in err and "clocks.json" in err
    assert not out.exists()


def _merge_refusal(tmp_path, run_cli, docs):
    caps = _write_captures(tmp_path, docs)
    out = tmp_path / "m.json"
    code, _, err = run_cli("merge", *caps, "-o", out)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()
    return err


def test_merge_refuses_two_contributions_for_the_same_rank(tmp_path, run_cli):
    docs = _per_rank(small_trace())
    err = _merge_refusal(tmp_path, run_cli, [docs[0], docs[1], copy.deepcopy(docs[1])])
    assert (
        "two contributions for rank 1" in err
        and "field rank" in err
        and "collective world#0" in err
    )


@pytest.mark.parametrize(
    "field,value",
    [("bytes", 8192), ("dtype", "bfloat16"), ("op", "all_gather"), ("root", 1)],
)
def test_merge_refuses_conflicting_metadata_for_one_collective(tmp_path, run_cli, field, value):
    docs = _per_rank(small_trace())
    target = 1 if field == "root" else 0  # event 1 is the broadcast (rooted), event 0 all_reduce
    docs[1]["events"][target][field] = value
    err = _merge_refusal(tmp_path, run_cli, docs)
    assert f"field {field}" in err and "conflicting" in err and "ranks 0,1" in err


def test_merge_refuses_partially_measured_latency(tmp_path, run_cli):
    docs = _per_rank(small_trace())
    docs[0]["events"][3]["latency_ns"] = 1200
    err = _merge_refusal(tmp_path, run_cli, docs)
    assert "field latency_ns" in err and "partially measured" in err and "rank(s) 1" in err


def test_merge_refuses_a_rank_missing_a_collective_its_peers_recorded(tmp_path, run_cli):
    docs = _per_rank(small_trace())
    docs[1]["events"] = [e for e in docs[1]["events"] if e["seq"] != 7]  # its last world collective
    err = _merge_refusal(tmp_path, run_cli, docs)
    assert "field rank" in err and "did not record" in err and "world#5" in err


def test_merge_refuses_send_without_matching_recv(tmp_path, run_cli):
    docs = _per_rank(small_trace())
    docs[1]["events"] = [e for e in docs[1]["events"] if not (e["op"] == "recv" and e["seq"] == 8)]
    err = _merge_refusal(tmp_path, run_cli, docs)
    assert "field peer" in err and "do not pair" in err


def test_same_host_capture_declared_in_calibration_gives_known_skew(tmp_path, run_cli):
    caps = _write_captures(tmp_path, _per_rank(small_trace()))
    write_json(
        tmp_path / "clocks.json",
        _calibration([{"ranks": [0, 1], "offset_ns": 0, "drift_ppb": 0, "uncertainty_ns": 0}]),
    )
    out = tmp_path / "m.json"
    assert run_cli("merge", *caps, "--calibration", tmp_path / "clocks.json", "-o", out)[0] == 0
    program = load_program(out)
    assert program.skew_known and program.n == 9
    assert set(program.occurrences["op"]) == {"all_reduce", "broadcast", "send"}


def test_merge_refuses_a_capture_set_missing_a_rank_of_the_declared_world(tmp_path, run_cli):
    """One of two per-rank captures given: merge names the missing rank, not a later
    stage (exit 2, nothing written)."""
    caps = _write_captures(tmp_path, _per_rank(small_trace()))
    out = tmp_path / "m.json"
    code, _, err = run_cli("merge", caps[0], "-o", out)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "rank 1: no capture" in err and "world_size 2" in err
    assert not out.exists()


@pytest.mark.parametrize("calibrated", [False, True])
def test_merge_keeps_epoch_arrival_times_exact_when_some_events_lack_one(
    tmp_path, run_cli, calibrated
):
    """pandas holds an int64 column with gaps as float64, which rounds epoch nanoseconds
    (~1.8e18) to multiples of 256 ns; merged arrival times must stay exact to 1 ns."""
    epoch = 1_800_000_000_000_000_000
    doc = small_trace()
    for e in doc["events"]:
        e["ts_ns"] += epoch
        if e["seq"] == 0:  # only the first collective records an arrival time
            e["arrival_ns"] = e["ts_ns"] + 7
    caps = _write_captures(tmp_path, _per_rank(doc))
    out = tmp_path / "m.json"
    argv = ["merge", *caps, "-o", out]
    if calibrated:
        write_json(
            tmp_path / "clocks.json",
            _calibration([{"ranks": [0, 1], "offset_ns": 0, "drift_ppb": 0, "uncertainty_ns": 0}]),
        )
        argv[1:1] = ["--calibration", tmp_path / "clocks.json"]
    code, _, err = run_cli(*argv)
    assert code == 0, err
    merged = json.loads(out.read_text())["events"]
    want = {(e["rank"], e["seq"]): e["arrival_ns"] for e in doc["events"] if "arrival_ns" in e}
    got = {(e["rank"], e["seq"]): e["arrival_ns"] for e in merged if "arrival_ns" in e}
    assert got == want
