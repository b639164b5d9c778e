"""The skew decision as a datum (decided once, declared in the merged trace, the ingest
sidecar and the program) and the claims that follow it: unknown skew, or a skew less
certain than the compile skew budget, makes a canary ``behaviorally_unverified``, and
every message that says so names the cause and both ways out."""

from __future__ import annotations

import json

import pytest
from conftest import REPO

from tracecanary.clocks.status import WAYS_OUT
from tracecanary.formats.schemas import validate
from tracecanary.ingest import sidecar_path
from tracecanary.load import load_program
from tracecanary.synth.decode import DecodeSpec, build_decode
from tracecanary.trace_io import write_trace

ADVERSARIAL = REPO / "resources/traces/adversarial.json"
BACKENDS = REPO / "config/backends.yaml"
SMALL = dict(layers=2, hidden=256, requests=2, prompt_tokens=64, tail_windows=1)


@pytest.fixture()
def unknown_skew_trace(tmp_path):
    doc = json.loads(ADVERSARIAL.read_text())
    doc["meta"]["clock_domains"] = [{"id": f"host{r}", "ranks": [r]} for r in range(4)]
    path = tmp_path / "unknown_skew.json"
    path.write_text(json.dumps(doc))
    return path


def _assert_names_cause_and_ways_out(text: str) -> None:
    assert "cross-rank skew unknown (ranks read 4 different clocks" in text
    assert "merge --calibration" in text and "calibrate-clocks" in text
    assert "docs/calibration.md" in text


def test_strict_refusal_for_unknown_skew_names_the_cause_and_both_ways_out(
    tmp_path, run_cli, unknown_skew_trace
):
    out = tmp_path / "c.json"
    code, _, err = run_cli(
        "compile", unknown_skew_trace, "--lossless", "--strict", "--backends", BACKENDS, "-o", out
    )
    assert code == 1 and not out.exists()
    last = err.strip().splitlines()[-1]
    assert "claim behaviorally_unverified" in last
    _assert_names_cause_and_ways_out(last)


def test_search_failure_for_unknown_skew_names_the_cause_and_both_ways_out(
    tmp_path, run_cli, unknown_skew_trace
):
    out, log = tmp_path / "c.json", tmp_path / "search.json"
    code, _, err = run_cli(
        "search",
        unknown_skew_trace,
        "--budgets",
        "0,8",
        "--backends",
        BACKENDS,
        "-o",
        out,
        "--log",
        log,
    )
    assert code == 1 and not out.exists()
    last = err.strip().splitlines()[-1]
    assert "no candidate passed verification" in last
    _assert_names_cause_and_ways_out(last)


def test_merge_without_calibration_says_skew_unknown_with_both_ways_out(tmp_path, run_cli):
    docs, _ = build_decode(DecodeSpec(events_per_rank=120, **SMALL))
    paths = []
    for rank, doc in enumerate(docs):
        paths.append(tmp_path / f"rank{rank}.json")
        write_trace(doc, paths[-1])
    merged = tmp_path / "merged.json"
    code, _, err = run_cli("merge", *paths, "-o", merged)
    assert code == 0
    assert "skew UNKNOWN" in err and WAYS_OUT in err
    skew = json.loads(merged.read_text())["meta"]["skew"]
    assert skew == {
        "status": "unknown",
        "reason": "ranks read 2 different clocks and no clock calibration was given",
    }


@pytest.fixture(scope="module")
def uncertain_merge(tmp_path_factory):
    """A decode capture set merged through its true offsets stated with +-3 us: the
    merged skew is known with uncertainty 3000 ns (reference clock exact)."""
    tmp = tmp_path_factory.mktemp("uncertain")
    docs, calibration = build_decode(DecodeSpec(events_per_rank=300, **SMALL))
    paths = []
    for rank, doc in enumerate(docs):
        paths.append(tmp / f"rank{rank}.json")
        write_trace(doc, paths[-1])
    for clock in calibration["clocks"]:
        if clock["offset_ns"] != 0:
            clock["uncertainty_ns"] = 3000
    cal = tmp / "clocks.json"
    cal.write_text(json.dumps(calibration))
    from tracecanary.cli import main

    merged = tmp / "merged.json"
    assert main(["merge", *map(str, paths), "--calibration", str(cal), "-o", str(merged)]) == 0
    return merged


def test_merged_trace_and_sidecar_declare_the_skew_uncertainty(tmp_path, run_cli, uncertain_merge):
    doc = json.loads(uncertain_merge.read_text())
    validate(doc, "trace", file=str(uncertain_merge))
    assert doc["meta"]["skew"]["status"] == "known"
    assert doc["meta"]["skew"]["uncertainty_ns"] == 3000
    table = tmp_path / "t.parquet"
    code, _, err = run_cli("ingest", uncertain_merge, "-o", table)
    assert code == 0, err
    sidecar = json.loads(sidecar_path(table).read_text())
    assert sidecar["skew"] == doc["meta"]["skew"]
    program = load_program(table)
    assert program.skew_known and program.skew_uncertainty_ns == 3000


def test_loading_reads_the_declared_skew_instead_of_rederiving_it(tmp_path, run_cli):
    table = tmp_path / "t.parquet"
    assert run_cli("ingest", ADVERSARIAL, "-o", table)[0] == 0
    side = sidecar_path(table)
    sidecar = json.loads(side.read_text())
    assert sidecar["skew"] == {
        "status": "known",
        "uncertainty_ns": 0,
        "reference": "shared clock",
        "method": "one declared clock domain",
    }
    sidecar["skew"] = {"status": "unknown", "reason": "declared unknown by the sidecar"}
    side.write_text(json.dumps(sidecar))
    program = load_program(table)
    assert not program.skew_known and program.skew_reason == "declared unknown by the sidecar"
    del sidecar["skew"]
    side.write_text(json.dumps(sidecar))
    code, _, err = run_cli("compile", table, "--lossless", "-o", tmp_path / "c.json")
    assert code == 2 and "declares no skew status" in err and "re-run ingest" in err


def test_skew_uncertainty_above_the_budget_makes_the_canary_behaviorally_unverified(
    tmp_path, run_cli, uncertain_merge
):
    tight, loose = tmp_path / "tight.json", tmp_path / "loose.json"
    code, stdout, err = run_cli("compile", uncertain_merge, "--budget", "skew=2us", "-o", tight)
    assert code == 0, err
    assert "claim: behaviorally_unverified" in stdout
    assert "claim reason: skew uncertainty 3000 ns exceeds the skew budget 2000 ns" in stdout
    doc = json.loads(tight.read_text())
    assert doc["claim"] == "behaviorally_unverified"
    assert doc["source"]["skew_uncertainty_ns"] == 3000
    reason = doc["claim_reasons"][0]
    assert "skew uncertainty 3000 ns exceeds the skew budget 2000 ns" in reason
    assert WAYS_OUT in reason
    code, _, err = run_cli("compile", uncertain_merge, "--budget", "skew=4us", "-o", loose)
    assert code == 0, err
    assert json.loads(loose.read_text())["claim"] == "unverified"
    # the verifier applies the same rule
    report = tmp_path / "v.json"
    code, _, err = run_cli(
        "verify-behavior", uncertain_merge, tight, "--backends", BACKENDS, "-o", report
    )
    verification = json.loads(report.read_text())
    assert verification["claim"] == "behaviorally_unverified"
    assert verification["statuses"]["behavior"] == "unverified"
    assert "exceeds the skew budget 2000 ns" in verification["source"]["skew_obstacle"]
    assert "behavior not judged" in err
    code, _, err = run_cli(
        "verify-behavior", uncertain_merge, loose, "--backends", BACKENDS, "-o", report
    )
    verification = json.loads(report.read_text())
    assert verification["statuses"]["behavior"] in ("pass", "fail")
    assert "skew_obstacle" not in verification["source"]
    assert verification["source"]["skew_uncertainty_ns"] == 3000
