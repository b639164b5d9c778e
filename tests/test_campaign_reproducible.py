"""The campaign as a reader sees it: same bytes on every run, a one-page summary, and a
Snakemake HTML report that renders in a real headless browser."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from conftest import make_tiny_campaign, run_snakemake

from tracecanary.canonical import digest_path

pytestmark = pytest.mark.slow
MANIFEST = "results/tiny/manifest.json"


def test_two_runs_in_separate_directories_give_identical_derived_digests(tiny_campaign, tmp_path):
    make_tiny_campaign(tmp_path)
    run = run_snakemake(tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    first = json.loads((tiny_campaign / MANIFEST).read_text())
    second = json.loads((tmp_path / MANIFEST).read_text())
    a = {d["path"]: d["sha256"] for d in first["derived"]}
    b = {d["path"]: d["sha256"] for d in second["derived"]}
    assert a == b
    assert any(p.endswith(".png") or "/plots" in p for p in a) or "alphabeta" not in json.dumps(
        first["config"]
    )
    assert first["root_sha256"] == second["root_sha256"]
    assert (tiny_campaign / "results/tiny/summary.md").read_bytes() == (
        tmp_path / "results/tiny/summary.md"
    ).read_bytes()


def test_summary_page_says_what_the_campaign_showed(tiny_campaign):
    text = (tiny_campaign / "results/tiny/summary.md").read_text()
    manifest = json.loads((tiny_campaign / MANIFEST).read_text())
    assert manifest["root_sha256"] in text
    assert "| decode |" in text and "byte compression" in text
    assert "Isolated vs workload ranking" in text
    canary = json.loads((tiny_campaign / "results/tiny/search/decode/canary.json").read_text())
    assert canary["claim"] == "verified" and f"{canary['stats']['bytes_canary']:,}" in text


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def test_snakemake_html_report_renders_plots_and_summary_in_headless_chromium(
    tiny_campaign, tmp_path
):
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium on this machine (.ci/run installs Debian's chromium)")
    report = tmp_path / "report.html"
    run = run_snakemake(tiny_campaign, "--report", str(report))
    assert run.returncode == 0, run.stderr[-2000:]
    dom = subprocess.run(
        [
            browser,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=20000",
            "--dump-dom",
            report.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    ).stdout
    assert "Snakemake Report" in dom or "snakemake" in dom.lower()
    assert "Summary" in dom and "summary.md" in dom
    assert "Canaries" in dom and "search.md" in dom
    if (tiny_campaign / "results/tiny/alphabeta").exists():
        assert "Alpha/beta" in dom and ".png" in dom
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            browser,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=20000",
            "--window-size=1400,900",
            f"--screenshot={shot}",
            report.as_uri(),
        ],
        capture_output=True,
        timeout=180,
    )
    assert shot.exists() and shot.stat().st_size > 10_000
    assert digest_path(report)  # the report itself is a readable file
