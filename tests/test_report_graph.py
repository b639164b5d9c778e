"""The HTML report's rule graph names each node's sources, so a campaign of several
sources does not show "ingest" three times with nothing to tell the nodes apart."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from tracecanary.campaign.report_graph import label_report_rule_graph, node_label

TWO_STAGE_WORKFLOW = """
from tracecanary.campaign.report_graph import label_report_rule_graph
label_report_rule_graph()
SOURCES = ["alpha", "beta", "gamma", "delta"]
rule all:
    input: expand("out/{source}.b", source=SOURCES)
rule first:
    output: "out/{source}.a"
    shell: "echo {wildcards.source} > {output}"
rule second:
    input: "out/{source}.a"
    output: "out/{source}.b"
    shell: "cat {input} > {output}"
"""


def test_node_label_names_the_rule_and_up_to_three_sources():
    assert node_label("ingest", ["b", "a", "a"]) == "ingest · a, b"
    assert node_label("ingest", ["d", "c", "b", "a"]) == "ingest · a, b, c +1"
    assert node_label("manifest", []) == "manifest"


def test_labels_are_installed_only_when_a_report_is_asked_for():
    assert label_report_rule_graph(["snakemake", "--cores", "1"]) is False


def _rule_graph(html: str) -> dict:
    """The report's embedded rule-graph (Vega) spec."""
    start = html.index('{"$schema": "https://vega.github.io/schema/vega/v5.json"')
    spec, _ = json.JSONDecoder().raw_decode(html[start:])
    return spec


def test_a_real_snakemake_report_labels_rule_nodes_by_rule_and_source(tmp_path):
    (tmp_path / "Snakefile").write_text(TWO_STAGE_WORKFLOW)
    snakemake = [sys.executable, "-m", "snakemake", "--cores", "1", "--quiet"]
    run = subprocess.run(snakemake, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    report = subprocess.run(
        [*snakemake, "--report", "report.html"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.returncode == 0, report.stderr[-2000:]
    spec = _rule_graph((tmp_path / "report.html").read_text(encoding="utf-8"))
    nodes = next(d["values"] for d in spec["data"] if d["name"] == "node-data")
    labels = {n["rule"]: n["label"] for n in nodes}
    assert labels == {
        "all": "all",
        "first": "first · alpha, beta, delta +1",
        "second": "second · alpha, beta, delta +1",
    }
    texts = [m["encode"]["enter"]["text"] for m in spec["marks"] if m.get("name") == "labels"]
    assert texts == [{"field": "label"}]
    assert not re.search(r'"rule": "first ·', json.dumps(nodes))  # click-through keeps the rule
