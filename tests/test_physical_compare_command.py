"""`tracecanary compare-physical CANARY FULL -o REPORT`: the physical campaign's report and
gate (physical_report + physical_gate rules) for archives a user replayed by hand.

Archives are written in the attempt format with chosen numbers (tests/test_physical_report.py
``_archive``); a real replay of a zoo program compared this way is in
tests/test_physical_zoo_compare.py."""

from __future__ import annotations

import json

from test_physical_report import _archive, _reps

from tracecanary.formats.schemas import validate
from tracecanary.physical.report import write_physical

LOW, HIGH = [100, 101, 99, 100, 100], [200, 201, 199, 200, 200]


def _trees(root, canary_means: dict, full_means: dict) -> list[str]:
    attempts = []
    for cfg in canary_means:
        attempts += _reps(root, "canary", cfg, canary_means[cfg])
        attempts += _reps(root, "full", cfg, full_means[cfg], pass_ns=4_000_000)
    return attempts


def test_compare_physical_gives_the_rule_report_and_fails_in_one_line_on_a_flip(run_cli, tmp_path):
    attempts = _trees(tmp_path / "runs", {"a": LOW, "b": HIGH}, {"a": HIGH, "b": LOW})
    out = tmp_path / "out"
    code, stdout, err = run_cli(
        "compare-physical", tmp_path / "runs" / "canary", tmp_path / "runs" / "full",
        "-o", out / "report.json", "--markdown", out / "report.md",
    )  # fmt: skip
    assert code == 1
    canary, full = tmp_path / "runs" / "canary", tmp_path / "runs" / "full"
    assert err.splitlines() == [
        f"tracecanary compare-physical: error: physical gate failed for {canary} vs {full}: "
        "the pair (a, b) is ranked one way by the canary and the other by the full program on p50, p95, p99, mean"
    ]
    report = json.loads((out / "report.json").read_text())
    validate(report, "physical-report", file="report.json")
    rule = write_physical(str(tmp_path / "r.json"), str(tmp_path / "r.md"), attempts, "s")
    assert report["gate"] == rule["gate"] and report["configs"] == rule["configs"]
    assert "**Physical gate: FAIL**" in (out / "report.md").read_text()


def test_compare_physical_of_two_archives_states_the_runtime_ratio_and_warns(run_cli, tmp_path):
    canary = _archive(tmp_path, "canary", "native", 1, [100], pass_ns=1_000_000)
    full = _archive(tmp_path, "full", "native", 1, [100], pass_ns=4_000_000)
    code, stdout, err = run_cli("compare-physical", canary, full, "-o", tmp_path / "r.json")
    assert code == 0, err
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["runtime_reduction"] == {"native": 0.25}
    assert report["gate"]["status"] == "warning"
    assert "canary/full pass time native: 0.25" in stdout
    assert "physical gate: warning" in stdout and "too few repetitions" in stdout


def test_compare_physical_gate_threshold_is_the_max_runtime_ratio_option(run_cli, tmp_path):
    canary = _archive(tmp_path, "canary", "native", 1, [100], pass_ns=3_000_000)
    full = _archive(tmp_path, "full", "native", 1, [100], pass_ns=4_000_000)
    code, _, err = run_cli("compare-physical", canary, full, "-o", tmp_path / "r.json")
    assert code == 1
    assert err.strip().endswith(
        "canary/full pass-time ratio 0.750 (native) exceeds max_runtime_ratio 0.5"
    )
    argv = ["compare-physical", canary, full, "--max-runtime-ratio", "0.8"]
    assert run_cli(*argv, "-o", tmp_path / "r2.json")[0] == 0


def test_compare_physical_refuses_a_directory_without_attempts_and_writes_nothing(
    run_cli, tmp_path
):
    canary = _archive(tmp_path, "canary", "native", 1, [100])
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_cli("compare-physical", canary, empty, "-o", tmp_path / "r.json")
    assert code == 2
    assert err.splitlines() == [
        f"tracecanary compare-physical: error: {empty}: field attempt.json: no attempt archive here (attempt.json) nor "
        "under <config>/rep<k>/"
    ]
    assert not (tmp_path / "r.json").exists()


def test_compare_physical_refuses_archives_of_different_configurations(run_cli, tmp_path):
    canary = _archive(tmp_path, "canary", "native", 1, [100])
    full = _archive(tmp_path, "full", "fused64k", 1, [100])
    code, _, err = run_cli("compare-physical", canary, full, "-o", tmp_path / "r.json")
    assert code == 2
    assert "configurations differ: canary native, full fused64k" in err
    assert not (tmp_path / "r.json").exists()


def test_compare_physical_exits_1_when_an_archive_failed(run_cli, tmp_path):
    canary = _archive(tmp_path, "canary", "native", 1, [100], status="failed")
    full = _archive(tmp_path, "full", "native", 1, [100])
    code, _, err = run_cli("compare-physical", canary, full, "-o", tmp_path / "r.json")
    assert code == 1
    assert err.splitlines() == [
        f"tracecanary compare-physical: error: {canary}: field status: attempt failed (rank 1 died): nothing to compare"
    ]
    assert not (tmp_path / "r.json").exists()
