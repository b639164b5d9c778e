"""``--diagnostics-json PATH``: a tracecanary.diagnostics/v1 document with the failed
checks, their numbers and the fix, written on exit 1 as on exit 0, never on exit 2.
Real CLI runs on the shipped adversarial trace, a real decode capture merged without
a calibration (skew unknown), and a real 2-rank gloo replay that loses a rank."""

from __future__ import annotations

import json

import pytest

from tracecanary.formats.ids import DIAGNOSTICS_FORMAT, FORMAT_SCHEMAS
from tracecanary.formats.schemas import validate
from tracecanary.synth.decode import DecodeSpec, build_decode
from tracecanary.trace_io import write_trace


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """adv.json, its lossless canary, a source it was not compiled from (bytes x8), and a
    merged decode trace whose skew is unknown."""
    from tracecanary.cli import main

    d = tmp_path_factory.mktemp("diag")
    assert main(["synth", "adversarial", "-o", str(d / "adv.json")]) == 0
    assert main(["compile", str(d / "adv.json"), "--lossless", "-o", str(d / "canary.json")]) == 0
    doc = json.loads((d / "adv.json").read_text())
    for event in doc["events"]:
        event["bytes"] *= 8
    (d / "other.json").write_text(json.dumps(doc))
    docs, _ = build_decode(DecodeSpec(events_per_rank=200))
    captures = []
    for rank, capture in enumerate(docs):
        path = d / f"rank{rank}.jsonl.gz"
        write_trace(capture, path)
        captures.append(str(path))
    assert main(["merge", *captures, "-o", str(d / "merged.jsonl.gz")]) == 0
    return d


def _diagnostics(path) -> dict:
    doc = json.loads(path.read_text())
    validate(doc, "diagnostics", file=str(path))
    return doc


def test_diagnostics_format_id_names_its_schema():
    assert FORMAT_SCHEMAS[DIAGNOSTICS_FORMAT] == "diagnostics"


def test_verify_behavior_failure_writes_failed_checks_with_numbers_and_fixes(work, run_cli):
    out = work / "vb.json"
    code, _, err = run_cli(
        "verify-behavior",
        work / "other.json",
        work / "canary.json",
        "-o",
        work / "v.json",
        "--diagnostics-json",
        out,
    )
    assert code == 1
    doc = _diagnostics(out)
    assert doc["command"] == "verify-behavior" and doc["exit_code"] == 1
    assert doc["claim_held"] is False
    checks = {c["check"] for c in doc["failed_checks"]}
    assert "commitments" in checks and "latency.p50" in checks
    latency = next(c for c in doc["failed_checks"] if c["check"] == "latency.p50")
    verification = json.loads((work / "v.json").read_text())
    source_check = next(
        c
        for c in verification["checks"]
        if c["metric"] == "latency.p50" and c["config"] == latency["config"]
    )
    assert latency["observed"] == source_check["canary"]
    assert latency["expected"] == source_check["source"]
    assert latency["limit"] == source_check["tolerance"]
    assert all(c["fix"] for c in doc["failed_checks"])
    assert "recompile it from this source" in err  # the console names the fix too


def test_verify_behavior_success_writes_a_document_with_no_failed_checks(work, run_cli):
    out = work / "ok.json"
    code, _, _ = run_cli(
        "verify-behavior",
        work / "adv.json",
        work / "canary.json",
        "-o",
        work / "v_ok.json",
        "--diagnostics-json",
        out,
    )
    assert code == 0
    doc = _diagnostics(out)
    assert doc["claim_held"] is True and doc["failed_checks"] == [] and doc["exit_code"] == 0


def test_search_with_unknown_skew_names_the_calibration_fix(work, run_cli):
    out = work / "search_diag.json"
    code, _, err = run_cli(
        "search",
        work / "merged.jsonl.gz",
        "--budgets",
        "0,4",
        "-o",
        work / "c.json",
        "--log",
        work / "s.json",
        "--diagnostics-json",
        out,
    )
    assert code == 1
    assert "calibrate-clocks" in err and "--calibration" in err
    doc = _diagnostics(out)
    assert doc["failed_checks"][0]["check"] == "skew"
    assert "calibrate-clocks" in doc["failed_checks"][0]["fix"]
    assert not (work / "c.json").exists()


def test_compile_strict_failure_writes_diagnostics_and_no_canary(work, run_cli):
    out = work / "strict_diag.json"
    code, _, err = run_cli(
        "compile",
        work / "merged.jsonl.gz",
        "--lossless",
        "--strict",
        "--backends",
        "config/backends.yaml",
        "-o",
        work / "strict.json",
        "--diagnostics-json",
        out,
    )
    assert code == 1
    assert "calibrate-clocks" in err
    assert not (work / "strict.json").exists()
    doc = _diagnostics(out)
    assert doc["command"] == "compile" and doc["failed_checks"][0]["check"] == "skew"


def test_verify_commitments_mismatch_lists_each_segment_with_found_and_expected(work, run_cli):
    out = work / "vc.json"
    code, _, err = run_cli(
        "verify-commitments", work / "other.json", work / "canary.json", "--diagnostics-json", out
    )
    assert code == 1
    assert "fix: the canary was not compiled from this source" in err
    doc = _diagnostics(out)
    assert doc["failed_checks"]
    assert all(c["observed"] != c["expected"] for c in doc["failed_checks"])


def test_compare_trip_records_the_metric_its_change_and_the_threshold(work, run_cli):
    reports = {}
    for name in ("adv", "other"):
        reports[name] = work / f"r_{name}.json"
        code, _, _ = run_cli(
            "replay", work / f"{name}.json", "--config", "baseline", "-o", reports[name]
        )
        assert code == 0
    out = work / "cmp.json"
    code, _, _ = run_cli(
        "compare",
        reports["adv"],
        reports["other"],
        "--allow-different-inputs",
        "-o",
        work / "verdict.json",
        "--diagnostics-json",
        out,
    )
    assert code == 1
    doc = _diagnostics(out)
    verdict = json.loads((work / "verdict.json").read_text())
    assert len(doc["failed_checks"]) == len(verdict["tripped"])
    first, trip = doc["failed_checks"][0], verdict["tripped"][0]
    assert first["check"] == trip["metric"] and first["limit"] == trip["threshold"]
    assert first["observed"] == {"relative": trip["relative"], "delta_ns": trip["delta_ns"]}


def test_verify_report_mismatch_names_the_field_and_the_fix(work, run_cli):
    report = work / "r_adv.json"
    if not report.exists():
        assert run_cli("replay", work / "adv.json", "-o", report)[0] == 0
    out = work / "vr.json"
    code, _, err = run_cli(
        "verify-report", report, "--input", work / "other.json", "--diagnostics-json", out
    )
    assert code == 1 and "fix:" in err
    doc = _diagnostics(out)
    assert doc["failed_checks"][0]["check"] == "protocol.input.sha256"


def test_bad_input_writes_no_diagnostics(work, run_cli):
    out = work / "never.json"
    code, _, _ = run_cli(
        "verify-behavior",
        work / "missing.json",
        work / "canary.json",
        "-o",
        work / "v2.json",
        "--diagnostics-json",
        out,
    )
    assert code == 2 and not out.exists()


def test_every_claim_checking_command_offers_diagnostics_json():
    from tracecanary.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in (
        "compile",
        "verify-behavior",
        "verify-commitments",
        "verify-report",
        "search",
        "compare",
        "replay-physical",
    ):
        options = {s for a in sub.choices[name]._actions for s in a.option_strings}
        assert "--diagnostics-json" in options, name


@pytest.mark.slow
def test_failed_physical_attempt_writes_diagnostics_naming_the_fix(tmp_path, run_cli):
    from tracecanary.physical.samples import sample_program, write_program

    # the smallest real replay that can lose a rank: the 2-rank sample program
    export = write_program(tmp_path / "param", sample_program(2))
    work = tmp_path
    out = work / "phys.json"
    code, _, err = run_cli(
        "replay-physical",
        export,
        "--nproc",
        "2",
        "--iters",
        "1",
        "--fault",
        "kill-rank=1",
        "--timeout",
        "60",
        "-o",
        work / "attempt",
        "--diagnostics-json",
        out,
    )
    assert code == 1
    doc = _diagnostics(out)
    assert doc["command"] == "replay-physical"
    assert doc["failed_checks"][0]["check"] == "physical_attempt"
    assert "rank logs" in doc["failed_checks"][0]["fix"]
    assert (work / "attempt" / "attempt.json").exists()  # the evidence is kept
