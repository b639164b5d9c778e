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
