"""The physical canary-vs-full report: aggregation rules, ranking agreement, exclusions.

Archives here are written in the attempt format with chosen numbers so that every figure
can be checked by hand; the real replays that produce such archives are exercised in
tests/test_physical_replay.py and by the campaign."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from tracecanary.parquet_io import write_parquet
from tracecanary.physical.report import build_physical_report


def _archive(
    root, program, config, rep, latencies_us, *, weight=1.0, status="complete", pass_ns=1_000_000
):
    """rows: 2 ranks x 2 iterations; rank 1 is slower by 10 us (the slowest rank counts)."""
    d = root / program / config / f"rep{rep}"
    d.mkdir(parents=True)
    rows = {
        k: []
        for k in (
            "occ",
            "iteration",
            "rank",
            "start_ns",
            "end_ns",
            "latency_ns",
            "weight",
            "correct",
        )
    }
    for it in range(2):
        t = it * 10 * pass_ns
        for occ, lat in enumerate(latencies_us):
            for rank in (0, 1):
                ns = int((lat + 10 * rank + it) * 1000)
                rows["occ"].append(occ)
                rows["iteration"].append(it)
                rows["rank"].append(rank)
                rows["start_ns"].append(t)
                rows["end_ns"].append(t + pass_ns)
                rows["latency_ns"].append(ns)
                rows["weight"].append(weight)
                rows["correct"].append(True)
    write_parquet(pa.table(rows), d / "rows.parquet")
    (d / "attempt.json").write_text(
        json.dumps({"status": status, "reason": None if status == "complete" else "rank 1 died"})
    )
    return str(d)


def test_physical_report_aggregates_slowest_rank_median_and_weights(tmp_path):
    attempts = [
        _archive(tmp_path, "canary", "a", 1, [100, 200], weight=5.0, pass_ns=1_000_000),
        _archive(
            tmp_path,
            "full",
            "a",
            1,
            [100, 200, 100, 200, 100, 200, 100, 200, 100, 200],
            pass_ns=4_000_000,
        ),
    ]
    report = build_physical_report(attempts)
    canary, full = report["configs"]["a"]["canary"], report["configs"]["a"]["full"]
    # per occurrence: slowest rank (+10 us), median over iterations (+0.5 us)
    assert canary["p50"] == pytest.approx(110.5) and canary["max"] == pytest.approx(210.5)
    assert canary["mean"] == pytest.approx(full["mean"]) == pytest.approx(160.5)
    assert canary["weight_total"] == 10.0 and canary["occurrences_executed"] == 2
    assert report["configs"]["a"]["runtime_reduction"] == pytest.approx(0.25)


def test_physical_report_ranking_agreement_and_kendall_tau(tmp_path):
    attempts = []
    for cfg, (c, f) in {"x": (100, 100), "y": (200, 210), "z": (300, 150)}.items():
        attempts.append(_archive(tmp_path, "canary", cfg, 1, [c]))
        attempts.append(_archive(tmp_path, "full", cfg, 1, [f]))
    agreement = build_physical_report(attempts)["ranking_agreement"]["mean"]
    assert agreement["pairs"] == 3 and agreement["agreeing_pairs"] == 2  # only (y, z) flips
    assert agreement["canary_order"] == ["x", "y", "z"] and agreement["full_order"] == [
        "x",
        "z",
        "y",
    ]
    assert agreement["kendall_tau_b"] == pytest.approx(1 / 3)


def test_failed_attempts_are_excluded_and_listed(tmp_path):
    attempts = [
        _archive(tmp_path, "canary", "a", 1, [100]),
        _archive(tmp_path, "full", "a", 1, [100]),
        _archive(tmp_path, "full", "a", 2, [999], status="failed"),
    ]
    report = build_physical_report(attempts)
    assert report["configs"]["a"]["full"]["repetitions"] == 1
    assert (
        len(report["excluded_attempts"]) == 1
        and report["excluded_attempts"][0]["reason"] == "rank 1 died"
    )
    assert report["simulator_agreement"]["status"] == "not_computed"


def _reps(tmp_path, program, config, means, **kw):
    return [_archive(tmp_path, program, config, k + 1, [m], **kw) for k, m in enumerate(means)]


def test_pairs_are_decided_only_when_bootstrap_intervals_separate(tmp_path):
    attempts = []
    # x clearly below y; y and z overlap
    for cfg, means in {"x": [100, 101, 99, 100, 102], "y": [200, 230, 190, 210, 205],
                       "z": [205, 195, 220, 200, 215]}.items():  # fmt: skip
        attempts += _reps(tmp_path, "canary", cfg, means)
        attempts += _reps(tmp_path, "full", cfg, means, pass_ns=4_000_000)
    report = build_physical_report(attempts)
    lo, hi = report["configs"]["x"]["full"]["interval"]["mean"]
    assert lo <= report["configs"]["x"]["full"]["mean"] <= hi
    a = report["ranking_agreement"]["mean"]
    assert a["decided_pairs"] == 2 and a["undetermined_pairs"] == 1
    assert a["agreeing_decided_pairs"] == 2 and a["flips"] == []
    assert report["gate"]["status"] == "pass"


def test_physical_gate_fails_when_a_decided_pair_flips_between_canary_and_full(tmp_path):
    attempts = []
    attempts += _reps(tmp_path, "canary", "a", [100, 101, 99, 100, 100])
    attempts += _reps(tmp_path, "canary", "b", [200, 201, 199, 200, 200])
    attempts += _reps(tmp_path, "full", "a", [200, 201, 199, 200, 200], pass_ns=4_000_000)
    attempts += _reps(tmp_path, "full", "b", [100, 101, 99, 100, 100], pass_ns=4_000_000)
    report = build_physical_report(attempts)
    assert report["ranking_agreement"]["mean"]["flips"] == [["a", "b"]]
    assert report["gate"]["status"] == "fail"
    assert any("flips" in r for r in report["gate"]["reasons"])
    from tracecanary.physical.report import gate_exit_code, physical_markdown

    assert gate_exit_code(report) == 1
    assert any("**Physical gate: FAIL**" in line for line in physical_markdown(report, "s"))


def test_physical_gate_fails_when_the_canary_is_not_cheaper_enough(tmp_path):
    attempts = []
    for cfg, m in {"a": 100, "b": 200}.items():
        attempts += _reps(tmp_path, "canary", cfg, [m] * 5, pass_ns=3_000_000)
        attempts += _reps(tmp_path, "full", cfg, [m] * 5, pass_ns=4_000_000)
    report = build_physical_report(attempts, max_runtime_ratio=0.5)
    assert report["gate"]["status"] == "fail"
    assert report["gate"]["reasons"][0].startswith("a: canary/full runtime ratio 0.750")
    assert build_physical_report(attempts, max_runtime_ratio=0.8)["gate"]["status"] == "pass"


def test_too_few_repetitions_is_a_warning_never_a_silent_pass(tmp_path):
    attempts = []
    for cfg, m in {"a": 100, "b": 200}.items():
        attempts += _reps(tmp_path, "canary", cfg, [m, m])
        attempts += _reps(tmp_path, "full", cfg, [m, m], pass_ns=4_000_000)
    report = build_physical_report(attempts)
    assert report["configs"]["a"]["full"]["interval"]["mean"] is None
    assert report["ranking_agreement"]["mean"]["undetermined_pairs"] == 1
    gate = report["gate"]
    assert gate["status"] == "warning" and "too few repetitions" in gate["warnings"][0]
    from tracecanary.physical.report import gate_exit_code, physical_markdown

    assert gate_exit_code(report) == 0
    assert any("**Physical gate: WARNING**" in line for line in physical_markdown(report, "s"))


def _calibrated(tmp_path, configs: dict[str, dict]):
    """A calibrated backends file: every float32 collective of the bench program on 2 ranks
    costs 10 us + 1 us per KB (points at 1 B and 16 MB, linear between)."""
    curves = [
        {
            "collective": c,
            "dtype": "float32",
            "group_size": 2,
            "placement": "unspecified",
            "points": [
                {
                    "bytes": b,
                    "median_us": 10.0 + b / 1000,
                    "monotone_us": 10.0 + b / 1000,
                    "n_cycles": 3,
                    "cv_pct": 1.0,
                }
                for b in (1, 16_000_000)
            ],
            "segments": [],
            "error": {"stated_error_pct": 1.0},
            "excluded_rungs": [],
            "ladders": [{"name": "x", "sha256": "0" * 64}],
            "notes": [],
        }  # fmt: skip
        for c in ("all_reduce", "all_gather", "reduce_scatter")
    ]
    doc = {"format": "tracecanary.backends/v1", "configs": {}}
    for name, replay in configs.items():
        doc["configs"][name] = {
            "overlap_efficiency": 0.0, "contention": 0.0,
            "measured": {"method": "tracecanary.calibrate-backends/v1", "evidence": "gloo",
                         "env": {}, "replay": replay, "costs": curves},
        }  # fmt: skip
    path = tmp_path / "calibrated.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_simulator_agreement_compares_the_twin_ranking_with_decided_machine_pairs(tmp_path):
    from tracecanary.physical.samples import bench_program, write_program

    prog = str(write_program(tmp_path / "prog", bench_program(2, motifs=1)))
    backends = _calibrated(
        tmp_path,
        {"native": {"mode": "native", "op_barrier": False},
         "chunked4": {"mode": "chunked", "op_barrier": False, "chunks": 4}},
    )  # fmt: skip
    attempts = []
    for cfg, m in {"native": 30.0, "chunked4": 70.0}.items():
        attempts += _reps(tmp_path / "a", "canary", cfg, [m, m + 1, m - 1, m, m])
        attempts += _reps(tmp_path / "a", "full", cfg, [m, m + 1, m - 1, m, m], pass_ns=4_000_000)
    report = build_physical_report(
        attempts, backends=backends, programs={"canary": prog, "full": prog}
    )
    sim = report["simulator_agreement"]
    assert sim["status"] == "computed"
    for program in ("canary", "full"):
        mean = sim["programs"][program]["metrics"]["mean"]
        assert mean["decided_pairs"] == 1 and mean["agreeing_pairs"] == 1
        assert mean["simulator_order"] == ["native", "chunked4"]
        predicted = sim["programs"][program]["predicted"]["native"]["mean"]
        measured = report["configs"]["native"][program]["mean"]
        assert sim["programs"][program]["prediction_error_pct"]["native"] == pytest.approx(
            (predicted - measured) / measured * 100.0
        )
    assert sim["agreement"] == 1.0


def test_simulator_agreement_not_computed_names_the_missing_evidence(tmp_path):
    from tracecanary.physical.samples import bench_program, write_program

    prog = str(write_program(tmp_path / "prog", bench_program(2, motifs=1)))
    backends = _calibrated(tmp_path, {"native": {"mode": "native", "op_barrier": False}})
    attempts = []
    for cfg in ("native", "fused64k"):
        attempts += _reps(tmp_path / "a", "canary", cfg, [10] * 3)
        attempts += _reps(tmp_path / "a", "full", cfg, [10] * 3)
    sim = build_physical_report(
        attempts, backends=backends, programs={"canary": prog, "full": prog}
    )["simulator_agreement"]
    assert sim["status"] == "not_computed" and sim["reason"].endswith("fused64k")
    no_backends = build_physical_report(attempts)["simulator_agreement"]
    assert "no calibrated backends file" in no_backends["reason"]


@pytest.mark.parametrize("repetitions", [1, 3])
def test_physical_report_validates_against_its_packaged_schema(tmp_path, repetitions):
    from tracecanary.formats.schemas import validate
    from tracecanary.physical.report import write_physical

    attempts = []
    for config in ("a", "b"):
        for rep in range(1, repetitions + 1):
            attempts.append(
                _archive(
                    tmp_path, "canary", config, rep, [100 + rep, 200], weight=5.0, pass_ns=1_000_000
                )
            )
            attempts.append(
                _archive(tmp_path, "full", config, rep, [100, 200 + rep] * 5, pass_ns=4_000_000)
            )
    report = write_physical(
        str(tmp_path / "physical.json"), str(tmp_path / "physical.md"), attempts, "src"
    )
    on_disk = json.loads((tmp_path / "physical.json").read_text())
    validate(on_disk, "physical-report", file="physical.json")
    assert on_disk["format"] == report["format"] == "tracecanary.physical-report/v1"
    bad = {**on_disk, "gate": {**on_disk["gate"], "status": "maybe"}}
    with pytest.raises(Exception, match="gate"):
        validate(bad, "physical-report", file="physical.json")
