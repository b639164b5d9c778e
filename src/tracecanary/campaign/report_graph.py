"""The HTML report's rule graph, labelled by rule and source.

Snakemake's report draws one node per rule and topological level and labels it with the
rule name only, so a campaign of several sources shows "ingest" three times with nothing
to tell the nodes apart. ``label_report_rule_graph()`` (called by the Snakefile when a
report is being written) wraps the two report functions that build and render that graph
so each node reads ``rule · source, source`` (the ``source`` wildcards of every job the
node stands for; ``+N`` past three). The node's ``rule`` field, which the report uses to
open the rule's details on a click, is unchanged.

Where Snakemake's report internals are not the ones this was written against (a newer
release moved them), the graph keeps Snakemake's own labels and nothing else changes.
"""

from __future__ import annotations

import json
import sys

SOURCES_SHOWN = 3
SEPARATOR = " · "


def node_label(rule: str, sources: list[str]) -> str:
    """``rule · a, b, c +N``: the rule and the distinct sources of its jobs, in order
    (the rule alone when its jobs have no ``source`` wildcard)."""
    distinct = sorted(set(sources))
    if not distinct:
        return rule
    shown = ", ".join(distinct[:SOURCES_SHOWN])
    more = len(distinct) - SOURCES_SHOWN
    return f"{rule}{SEPARATOR}{shown}" + (f" +{more}" if more > 0 else "")


def _labelled_spec(original_spec, get_representatives):
    def rulegraph_spec(dag):
        spec, xmax, ymax = original_spec(dag)
        representatives: dict = {}
        levels = [get_representatives(level, representatives) for level in dag.toposorted()]
        nodes_jobs = [job for level in levels for job in level]
        sources: dict = {job: [] for job in nodes_jobs}
        for job, representative in representatives.items():
            source = job.wildcards_dict.get("source")
            if source is not None and representative in sources:
                sources[representative].append(source)
        if len(nodes_jobs) != len(spec["nodes"]):
            return spec, xmax, ymax  # not the layout this was written against
        for node, job in zip(spec["nodes"], nodes_jobs, strict=True):
            node["label"] = node_label(node["rule"], sources[job])
        return spec, xmax, ymax

    return rulegraph_spec


def _labelled_render(original_render):
    def render_rulegraph(nodes, links, links_direct):
        rendered = original_render(nodes, links, links_direct)
        if not all("label" in node for node in nodes):
            return rendered
        spec = json.loads(rendered)
        for mark in spec.get("marks", []):
            if mark.get("name") == "labels":
                mark["encode"]["enter"]["text"] = {"field": "label"}
        return json.dumps(spec)

    return render_rulegraph


def label_report_rule_graph(argv: list[str] | None = None) -> bool:
    """When ``argv`` (default ``sys.argv``) asks Snakemake for a report, make its rule
    graph label nodes by rule and source; True when the labels were installed."""
    if "--report" not in (sys.argv if argv is None else argv):
        return False
    try:
        from snakemake.report import html_reporter
        from snakemake.report.html_reporter import data
        from snakemake.report.rulegraph_spec import get_representatives
    except ImportError:
        return False
    if getattr(html_reporter.rulegraph_spec, "tracecanary_labels", False):
        return True
    spec = _labelled_spec(html_reporter.rulegraph_spec, get_representatives)
    spec.tracecanary_labels = True
    html_reporter.rulegraph_spec = spec
    data.render_rulegraph = _labelled_render(data.render_rulegraph)
    return True
