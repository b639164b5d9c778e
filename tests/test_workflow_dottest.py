"""The committed tiny campaign under .test/ (as the snakemake-workflows keep one): lint-clean,
a dry run that plans every stage, and a real run whose manifest verifies."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from conftest import REPO, run_snakemake

from tracecanary.cli import main as tracecanary_main

CONFIG = "config/config.yaml"
RESULTS = "results/test"


SHIPPED_COPIES = {
    "resources/adversarial.json": "resources/traces/adversarial.json",
    "config/backends.yaml": "config/backends.yaml",
    "config/tolerances.yaml": "config/tolerances.yaml",
}


def copy_dottest(target):
    """.test/ copied into ``target`` (without any results), so the campaign runs outside
    the checkout."""
    shutil.copytree(REPO / ".test", target, dirs_exist_ok=True)
    for generated in ("results", "logs", "benchmarks", ".snakemake"):
        shutil.rmtree(target / generated, ignore_errors=True)
    return target


@pytest.fixture
def dottest(tmp_path):
    return copy_dottest(tmp_path / "dottest")


def test_dottest_inputs_are_equal_copies_of_the_shipped_files():
    for copy, shipped in SHIPPED_COPIES.items():
        path = REPO / ".test" / copy
        assert not path.is_symlink(), copy  # a manifest refuses symlinked evidence
        assert path.read_bytes() == (REPO / shipped).read_bytes(), copy


def test_dottest_campaign_is_lint_clean(dottest):
    run = run_snakemake(dottest, "--lint", configfile=CONFIG)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "Congratulations" in run.stdout + run.stderr


def job_counts(dry_run_output: str) -> dict[str, int]:
    """``{rule: jobs}`` from the "Job stats" table of a dry run."""
    table = dry_run_output.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    rows = [line.split() for line in table.splitlines()[3:]]
    return {row[0]: int(row[1]) for row in rows if len(row) == 2}


def test_dottest_dry_run_plans_every_stage_of_the_campaign(dottest):
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile")]
    cmd += ["--directory", str(dottest), "--configfile", CONFIG, "--cores", "1", "--dry-run"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=dottest)
    assert run.returncode == 0, run.stderr[-3000:]
    jobs = job_counts(run.stdout + run.stderr)
    budgets = 2  # lossless + 8us
    assert jobs == {
        "ingest": 1,
        "compile": budgets,
        "verify": budgets,
        "search": 1,
        "reduce_baseline": 1,
        "baselines": 1,
        "controls": 1,
        "replay": 2,  # source (isolated) and canary
        "compare": 1,
        "timeline": 1,
        "perfetto": 1,
        "search_summary": 1,
        "manifest": 1,
        "summary": 1,
        "all": 1,
        "total": 18,
    }


@pytest.mark.slow
def test_dottest_campaign_runs_and_its_manifest_verifies(dottest, capsys):
    run = run_snakemake(dottest, configfile=CONFIG)
    assert run.returncode == 0, run.stderr[-3000:]
    results = dottest / RESULTS
    manifest = json.loads((results / "manifest.json").read_text())
    derived = {d["path"] for d in manifest["derived"]}
    assert f"{RESULTS}/timeline/adversarial.png" in derived
    assert f"{RESULTS}/perfetto/adversarial.json" in derived
    assert f"{RESULTS}/search.html" in derived and f"{RESULTS}/reduce/adversarial/canary.json" in (
        derived
    )
    # every rule, the summary included, keeps its provenance under provenance/
    assert (results / "provenance/summary.json").is_file()
    assert not (results / "provenance-summary.json").exists()
    assert tracecanary_main(["manifest", "verify", str(results / "manifest.json")]) == 0
    capsys.readouterr()
    # the summary is made after the manifest, from it: its record is beside the others but
    # not in the manifest
    assert "provenance/summary.json" not in json.dumps(manifest["provenance"])
    summary = (results / "summary.md").read_text()
    row = next(line for line in summary.splitlines() if line.startswith("| adversarial |"))
    canary = json.loads((results / "search/adversarial/canary.json").read_text())
    assert f"{canary['stats']['bytes_canary']:,} B" in row  # how big
    assert f"of {canary['stats']['occurrences_logical']:,} (" in row  # what fraction runs
    assert f"**{canary['claim']}**" in row  # whether verified
    assert row.rstrip().endswith("| not run |")  # no physical replay in this campaign


@pytest.mark.slow
def test_dottest_summary_links_each_sources_perfetto_trace_beside_its_timeline(dottest):
    from test_chrome_trace import check_trace_event_format

    run = run_snakemake(dottest, configfile=CONFIG)
    assert run.returncode == 0, run.stderr[-3000:]
    results = dottest / RESULTS
    line = next(
        ln for ln in (results / "summary.md").read_text().splitlines()
        if ln.startswith("- adversarial: `timeline/adversarial.png`")
    )  # fmt: skip
    assert line.endswith(" · Perfetto: `perfetto/adversarial.json`")
    doc = json.loads((results / "perfetto/adversarial.json").read_text())
    check_trace_event_format(doc)
    assert doc["otherData"]["source"] == "adversarial"
