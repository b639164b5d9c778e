"""The campaign as a reader sees it: same bytes on every run, a one-page summary, and a
Snakemake HTML report that renders in a real headless browser."""

from __future__ import annotations

import json

import pytest
from conftest import make_tiny_campaign, run_snakemake
from report_browser import chromium, probe_report

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
    controls = json.loads((tiny_campaign / "results/tiny/controls/decode.json").read_text())
    verdict = "yes" if controls["tracks_every_control"] else "no"
    assert "## Simulator controls (ablations and noise)" in text
    assert f"canary tracks its source under every control: **{verdict}**" in text
    assert any(d["path"].endswith("controls/decode.json") for d in manifest["derived"])


def test_snakemake_html_report_shows_summary_verdicts_and_wide_plots_in_headless_chromium(
    tiny_campaign, tmp_path
):
    browser = chromium()
    if browser is None:
        pytest.skip("no chromium on this machine (.ci/run installs Debian's chromium)")
    report = tmp_path / "report.html"
    run = run_snakemake(tiny_campaign, "--report", str(report))
    assert run.returncode == 0, run.stderr[-2000:]
    html = report.read_text(encoding="utf-8")
    assert "ingest \\u00b7 decode" in html  # rule-graph nodes say rule and source
    seen = probe_report(browser, report, tmp_path)
    assert "error" not in seen, seen
    # the landing page is the campaign summary: its table and verdicts inside the window
    landing = seen["landing"]
    assert landing is not None and landing["visible"], landing
    assert "canary size" in landing["text"] and "decode" in landing["text"]
    canary = json.loads((tiny_campaign / "results/tiny/search/decode/canary.json").read_text())
    assert f"{canary['stats']['bytes_canary']:,} B" in landing["text"]
    claims = [v for v in seen["verdicts"] if v["text"] == canary["claim"]]
    assert claims and all(v["visible"] for v in claims), seen["verdicts"]
    # every plot of the report (the timeline, alpha/beta when ../shared has a ladder)
    plots = seen["plots"]
    assert "results/tiny/timeline/decode.png" in plots
    if (tiny_campaign / "results/tiny/alphabeta").exists():
        assert any("/alphabeta/" in p for p in plots)
    for path, img in plots.items():
        assert img is not None and img["loaded"], path
        assert img["width"] >= 800, (path, img)
