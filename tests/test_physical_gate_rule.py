"""The physical gate as a Snakemake rule: a real Snakemake run of the project workflow fails
(exit 1) when the physical report's gate failed and passes when it held.

A failed gate is a verdict, not a crashed job: the rule writes ``physical gate: fail`` and
the Snakefile's ``onsuccess`` handler prints one ``error:`` line per failed gate and exits 1.
The tests read everything Snakemake prints (no ``--quiet``, as the README's command runs):
one line for the gate, no traceback, no "Error in rule" block; and the failed verdict is not
left behind as up to date, so running again fails again.

The physical report here is written by ``build_physical_report`` from attempt archives with
chosen numbers (a forced flip between canary and full program, and a clean run); the real
replays that produce such archives are exercised in tests/test_physical_replay.py."""

from __future__ import annotations

import json

import yaml
from conftest import make_tiny_campaign, run_snakemake
from test_physical_report import _reps

from tracecanary.physical.report import write_physical


def _campaign_with_report(
    tmp_path, canary_means: dict, full_means: dict, *, canary_pass_ns: int = 1_000_000
):
    make_tiny_campaign(tmp_path, with_alphabeta=False)
    config_file = tmp_path / "config" / "tiny.yaml"
    config = yaml.safe_load(config_file.read_text())
    config["physical"] = {"sources": ["decode"], "configs": ["a", "b"], "repetitions": 5}
    config_file.write_text(yaml.safe_dump(config))
    physical = {"format": "tracecanary.physical/v1",
                "configs": {c: {"mode": "native", "env": {}} for c in ("a", "b")}}  # fmt: skip
    (tmp_path / "config" / "physical.yaml").write_text(yaml.safe_dump(physical))
    attempts = []
    for cfg in ("a", "b"):
        attempts += _reps(
            tmp_path / "archives", "canary", cfg, canary_means[cfg], pass_ns=canary_pass_ns
        )
        attempts += _reps(tmp_path / "archives", "full", cfg, full_means[cfg], pass_ns=4_000_000)
    results = tmp_path / "results" / "tiny"
    (results / "physical").mkdir(parents=True)
    report = write_physical(
        str(results / "physical" / "decode.json"),
        str(results / "physical" / "decode.md"),
        attempts,
        "decode",
    )
    (results / "summary.md").write_text("\n".join(report["summary_lines"]))
    return _run_gate(tmp_path)


def _run_gate(tmp_path):
    # only the gate may run: the report and summary written above are its inputs
    only_gate = ("--allowed-rules", "physical_gate", "--nolock")
    return run_snakemake(tmp_path, *only_gate, VERDICT, quiet=False)


VERDICT = "results/tiny/physical_gate/decode.txt"


def _gate_lines(run) -> list[str]:
    return [ln for ln in (run.stdout + run.stderr).splitlines() if "physical gate" in ln]


def _assert_one_line_and_no_error_block(run, expected: str) -> None:
    """Exit 1; of everything Snakemake printed, the gate's one line and no traceback, no
    "Error in rule" block, no other error."""
    printed = run.stdout + run.stderr
    assert run.returncode == 1, printed[-3000:]
    assert _gate_lines(run) == [expected], printed[-3000:]
    assert [ln for ln in printed.splitlines() if "error" in ln.lower()] == [expected], printed
    assert "Traceback" not in printed
    assert "Error in rule" not in printed
    assert "Exception" not in printed


def test_physical_gate_rule_fails_the_run_on_a_forced_flip_in_one_line(tmp_path):
    low, high = [100, 101, 99, 100, 100], [200, 201, 199, 200, 200]
    run = _campaign_with_report(tmp_path, {"a": low, "b": high}, {"a": high, "b": low})
    # one line on the terminal, naming the gate, the figures and the pair
    expected = (
        "error: physical gate failed for source decode: the pair (a, b) is ranked one way "
        "by the canary and the other by the full program on p50, p95, p99, mean"
    )
    _assert_one_line_and_no_error_block(run, expected)
    log = (tmp_path / "logs" / "tiny" / "physical_gate" / "decode.log").read_text()
    assert log.splitlines() == ["physical gate: fail", expected.removeprefix("error: ")]
    # no verdict is left to claim the gate is up to date; the summary says it failed
    assert not (tmp_path / VERDICT).exists()
    summary = (tmp_path / "results" / "tiny" / "summary.md").read_text()
    assert "**Physical gate: FAIL**" in summary
    report = json.loads((tmp_path / "results" / "tiny" / "physical" / "decode.json").read_text())
    assert report["gate"]["status"] == "fail"
    # running again runs the gate again and fails again: a failed gate never turns into
    # "Nothing to be done" and exit 0
    again = _run_gate(tmp_path)
    _assert_one_line_and_no_error_block(again, expected)
    assert "Nothing to be done" not in again.stdout + again.stderr


def test_physical_gate_rule_passes_a_clean_run(tmp_path):
    low, high = [100, 101, 99, 100, 100], [200, 201, 199, 200, 200]
    run = _campaign_with_report(tmp_path, {"a": low, "b": high}, {"a": low, "b": high})
    assert run.returncode == 0, run.stderr[-2000:]
    assert _gate_lines(run) == []
    verdict = (tmp_path / VERDICT).read_text()
    assert verdict.startswith("physical gate: pass")
    report = json.loads((tmp_path / "results" / "tiny" / "physical" / "decode.json").read_text())
    assert report["gate"]["decided_pairs"] == 4  # one pair, decided on p50, p95, p99, mean


def test_physical_gate_rule_names_the_runtime_ratio_and_its_threshold_in_one_line(tmp_path):
    low, high = [100, 101, 99, 100, 100], [200, 201, 199, 200, 200]
    # canary pass 3.6 ms against the full program's 4 ms: 0.9, above the default 0.5
    run = _campaign_with_report(
        tmp_path, {"a": low, "b": high}, {"a": low, "b": high}, canary_pass_ns=3_600_000
    )
    _assert_one_line_and_no_error_block(
        run,
        "error: physical gate failed for source decode: canary/full pass-time ratio 0.900 "
        "(a), 0.900 (b) exceeds max_runtime_ratio 0.5",
    )
    assert not (tmp_path / VERDICT).exists()
