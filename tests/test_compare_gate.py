"""The rollout gate: pass / warn / fail, breakdowns naming phase and op, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracecanary.canonical import write_json
from tracecanary.cli import main
from tracecanary.errors import InputError
from tracecanary.formats.schemas import validate
from tracecanary.gate.compare import parse_thresholds
from tracecanary.synth.adversarial import build_adversarial

pytest.importorskip(
    "tracecanary.load", reason="replay reads inputs with the lead's tracecanary.load"
)

REPO = Path(__file__).resolve().parents[1]
BACKENDS = REPO / "config" / "backends.yaml"


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("gate")
    trace = d / "adversarial.json"
    write_json(trace, build_adversarial())
    out = {"trace": trace}

    def replay(name, *args, backends=BACKENDS):
        path = d / f"{name}.json"
        assert (
            main(["replay", str(trace), "--backends", str(backends), *args, "-o", str(path)]) == 0
        )
        out[name] = path

    replay("baseline", "--config", "baseline")
    replay("upgrade", "--config", "upgrade")
    replay("no_ll128", "--config", "no_ll128")
    replay("all")
    replay("baseline_tail_ablated", "--config", "baseline", "--ablate", "tail")
    # a candidate backend file: same canary, the upgrade with less contention
    tuned = d / "tuned.yaml"
    tuned.write_text(BACKENDS.read_text().replace("contention: 0.8", "contention: 0.1"))
    replay("tuned", "--config", "upgrade", backends=tuned)
    other = build_adversarial()
    other["meta"]["source"] += " (copy)"  # same events, a different input file
    write_json(d / "other.json", other)
    path = d / "other_report.json"
    assert (
        main(
            [
                "replay",
                str(d / "other.json"),
                "--backends",
                str(BACKENDS),
                "--config",
                "baseline",
                "-o",
                str(path),
            ]
        )
        == 0
    )
    out["other"] = path
    return out


def _compare(tmp_path, capsys, baseline, candidate, *extra):
    verdict = tmp_path / "verdict.json"
    md = tmp_path / "verdict.md"
    rc = main(
        [
            "compare",
            str(baseline),
            str(candidate),
            *extra,
            "-o",
            str(verdict),
            "--markdown",
            str(md),
        ]
    )
    cap = capsys.readouterr()
    return rc, verdict, md, cap


def test_gate_passes_an_identical_candidate(reports, tmp_path, capsys):
    rc, verdict, md, _ = _compare(tmp_path, capsys, reports["baseline"], reports["baseline"])
    assert rc == 0
    doc = json.loads(verdict.read_text())
    validate(doc, "verdict", file=str(verdict))
    assert (
        doc["verdict"] == "pass"
        and doc["tripped"] == []
        and doc["same_input"]
        and doc["same_protocol"]
    )
    assert "PASS" in md.read_text()


def test_gate_fails_a_regressing_candidate_and_names_phase_and_op(reports, tmp_path, capsys):
    rc, verdict, md, cap = _compare(
        tmp_path, capsys, reports["baseline"], reports["upgrade"], "--threshold", "p50=3%,p99=5%"
    )
    assert rc == 1
    doc = json.loads(verdict.read_text())
    validate(doc, "verdict", file=str(verdict))
    assert doc["verdict"] == "fail"
    assert {t["metric"] for t in doc["tripped"]} == {"p50", "p99"}
    comp = doc["comparisons"][0]
    assert (comp["baseline_config"], comp["candidate_config"]) == ("baseline", "upgrade")
    phases = {r["phase"]: r for r in comp["by_phase"]}
    ops = {r["op"]: r for r in comp["by_op"]}
    assert phases["tail"]["status"] == "regressed" and phases["prefill"]["status"] == "ok"
    assert ops["reduce_scatter"]["status"] == "regressed" and ops["all_gather"]["status"] == "ok"
    text = md.read_text()
    assert "FAIL" in text and "| tail |" in text and "| reduce_scatter |" in text
    assert "tripped: baseline -> upgrade p99" in cap.out


def test_gate_warns_below_the_threshold_and_above_the_warn_level(reports, tmp_path, capsys):
    # no_ll128 is ~14% slower in mean and ~15% at p99 than the baseline on this trace
    rc, verdict, _, _ = _compare(
        tmp_path,
        capsys,
        reports["baseline"],
        reports["no_ll128"],
        "--threshold",
        "mean=20%,p99=50%",
        "--config",
        "baseline:no_ll128",
    )
    doc = json.loads(verdict.read_text())
    assert rc == 0 and doc["verdict"] == "warn"
    checks = {c["metric"]: c["status"] for c in doc["comparisons"][0]["checks"]}
    assert checks == {"mean": "warn", "p99": "pass"}
    assert [w["metric"] for w in doc["warnings"]] == ["mean"]


def test_gate_absolute_threshold_in_microseconds(reports, tmp_path, capsys):
    rc, verdict, _, _ = _compare(
        tmp_path,
        capsys,
        reports["baseline"],
        reports["no_ll128"],
        "--threshold",
        "p99=1us",
        "--config",
        "baseline:no_ll128",
    )
    doc = json.loads(verdict.read_text())
    assert (
        rc == 1
        and doc["thresholds"]["p99"]["kind"] == "absolute_ns"
        and doc["thresholds"]["p99"]["value"] == 1000.0
    )


def test_gate_compares_every_common_configuration_of_multi_config_reports(
    reports, tmp_path, capsys
):
    rc, verdict, _, _ = _compare(tmp_path, capsys, reports["all"], reports["all"])
    doc = json.loads(verdict.read_text())
    assert rc == 0 and [c["baseline_config"] for c in doc["comparisons"]] == [
        "baseline",
        "few_channels",
        "no_ll128",
        "ring_only",
        "upgrade",
    ]


def test_gate_allows_a_candidate_configuration_on_the_same_canary(reports, tmp_path, capsys):
    rc, verdict, _, _ = _compare(tmp_path, capsys, reports["upgrade"], reports["tuned"])
    doc = json.loads(verdict.read_text())
    assert (
        rc == 0
        and doc["same_input"]
        and doc["baseline"]["backends_sha256"] != doc["candidate"]["backends_sha256"]
    )
    assert doc["verdict"] == "pass"  # less contention cannot be slower


def test_gate_refuses_reports_of_different_inputs_unless_told(reports, tmp_path, capsys):
    rc, verdict, md, cap = _compare(tmp_path, capsys, reports["baseline"], reports["other"])
    assert rc == 2 and not verdict.exists() and not md.exists()
    assert len(cap.err.strip().splitlines()) == 1 and "protocol.input.sha256" in cap.err
    rc, verdict, _, _ = _compare(
        tmp_path, capsys, reports["baseline"], reports["other"], "--allow-different-inputs"
    )
    doc = json.loads(verdict.read_text())
    assert rc == 0 and doc["same_input"] is False and doc["allow_different_inputs"] is True


def test_gate_refuses_reports_of_different_protocols_unless_told(reports, tmp_path, capsys):
    rc, verdict, _, cap = _compare(
        tmp_path, capsys, reports["baseline"], reports["baseline_tail_ablated"]
    )
    assert rc == 2 and not verdict.exists() and "protocol.ablations" in cap.err
    rc, verdict, _, _ = _compare(
        tmp_path,
        capsys,
        reports["baseline"],
        reports["baseline_tail_ablated"],
        "--allow-different-inputs",
    )
    assert json.loads(verdict.read_text())["same_protocol"] is False


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--threshold", "p99=5"], "is not METRIC=NUMBER"),
        (["--threshold", "p42=5%"], "unknown threshold metric 'p42'"),
        (["--config", "nope"], "no configuration 'nope'"),
        (["--warn-fraction", "0"], "warn fraction"),
    ],
)
def test_gate_refuses_bad_usage_with_one_line(reports, tmp_path, capsys, extra, message):
    rc, verdict, _, cap = _compare(
        tmp_path, capsys, reports["baseline"], reports["upgrade"], *extra
    )
    assert rc == 2 and not verdict.exists()
    assert len(cap.err.strip().splitlines()) == 1 and message in cap.err


def test_gate_refuses_a_file_that_is_not_a_report(reports, tmp_path, capsys):
    rc, verdict, _, cap = _compare(tmp_path, capsys, reports["trace"], reports["upgrade"])
    assert (
        rc == 2
        and "not a tracecanary.report/v1 document" in cap.err
        and str(reports["trace"]) in cap.err
    )


def test_threshold_parser_accepts_units_and_refuses_empty():
    t = parse_thresholds("p50=3%, p99=2.5ms ,queue_mean=100ns")
    assert t["p50"].value == 0.03 and t["p99"].value == 2.5e6 and t["queue_mean"].value == 100.0
    assert t["p99"].exceeds(1_000_000.0, 3_500_001.0) and not t["p99"].exceeds(
        1_000_000.0, 3_500_000.0
    )
    with pytest.raises(InputError):
        parse_thresholds(" , ")
