"""summary.md and search.md tables: one row per searched budget, rejected checks
summarised, a physical verdict in words, one byte count per canary, the sampling baselines
per source, and a canary that is larger than its source said to be so."""

from __future__ import annotations

import json

import pytest
from conftest import REPO

from tracecanary.campaign.summary import (
    budget_table,
    canary_size,
    physical_verdict,
    rejected_checks,
    sampling_baselines_section,
    sources_table,
    write_search_summary,
)
from tracecanary.verify.baselines import baselines_table


def _candidate(stage, budget_ns, claim, size, *, chosen=False, failed=(), **settings):
    entry = {
        "stage": stage,
        "settings": {"budget_ns": budget_ns, **settings},
        "claim": claim,
        "bytes": size,
        "occurrences_executed": 100,
        "accepted": chosen,
        "failed_checks": list(failed),
        "reason": "smallest verified so far" if chosen else f"verification {claim}",
    }
    if chosen:
        entry["chosen"] = True
    return entry


SEARCH = [
    _candidate("budget", 0, "behaviorally_unverified", 5000),
    _candidate("budget", 8000, "verified", 4000),
    _candidate("budget", 32000, "verified", 3000),
    *[
        _candidate(
            "refine", 32000, "rejected", 2900, failed=["few_channels:latency.p99"], signature=i
        )
        for i in range(13)
    ],
    _candidate("refine", 32000, "verified", 2500, chosen=True, signature=13),
]


def test_search_table_has_one_row_per_budget_with_refinements_summarised():
    rows = budget_table(SEARCH)[2:]
    assert [r.split("|")[1].strip() for r in rows] == ["lossless", "8us", "32us"]
    row_32 = rows[2]
    assert "| 1 + 14 |" in row_32 and "| 2 of 15 |" in row_32
    assert "2.44 KiB" in row_32 and "**chosen**" in row_32


def test_rejected_checks_are_counted_per_metric_with_their_configurations():
    text = "\n".join(rejected_checks(SEARCH))
    assert "Rejected by verification: 14 candidates" in text
    assert "`latency.p99` (13; few_channels)" in text


def test_physical_verdict_says_agreed_or_names_the_metrics_that_disagree():
    agree = {"agreement": 1.0, "agreeing_pairs": 3, "pairs": 3}
    split = {"agreement": 1 / 3, "agreeing_pairs": 1, "pairs": 3}
    assert physical_verdict({"ranking_agreement": {"p50": agree, "mean": agree}}) == (
        "**agreed** (mean, p50: 3 of 3 pairs each)"
    )
    doc = {"ranking_agreement": {"p50": agree, "p99": split}}
    assert physical_verdict(doc).startswith("**disagreed** on p99")
    assert physical_verdict({"ranking_agreement": {}}).startswith("not judged")


def test_physical_verdict_counts_only_pairs_the_repetitions_decide():
    def metric(decided, agreeing, undetermined, point_agreeing):
        return {
            "pairs": 1,
            "agreeing_pairs": point_agreeing,
            "decided_pairs": decided,
            "agreeing_decided_pairs": agreeing,
            "undetermined_pairs": undetermined,
        }

    # the campaign's decode_small case: p50 decided and agreeing, p95/p99 point orders
    # differ but their intervals overlap (undetermined), the gate passes
    doc = {
        "ranking_agreement": {
            "p50": metric(1, 1, 0, 1),
            "p95": metric(0, 0, 1, 0),
            "p99": metric(0, 0, 1, 0),
            "mean": metric(0, 0, 1, 1),
        },
        "gate": {"status": "pass"},
    }
    assert physical_verdict(doc) == (
        "**agreed** (decided pairs agreeing: p50 1 of 1); undetermined (intervals overlap) "
        "on mean, p95, p99; physical gate **pass**"
    )
    doc["ranking_agreement"]["p50"] = metric(1, 0, 0, 0)
    doc["gate"] = {"status": "fail"}
    assert physical_verdict(doc).startswith("**disagreed** on decided pairs of p50")
    only_open = {"ranking_agreement": {"p95": metric(0, 0, 1, 0)}}
    assert physical_verdict(only_open).startswith("undetermined: no pair decided")


def test_canary_size_is_the_file_size_human_and_exact(tmp_path):
    path = tmp_path / "canary.json"
    path.write_bytes(b"x" * 33818)
    assert canary_size(path) == "33.0 KiB (33,818 B)"


@pytest.fixture(scope="module")
def searched_sources(tmp_path_factory):
    """Two real searched sources: the shipped 100-occurrence adversarial trace, and the same
    trace cut to its first 3 collectives (too short: its canary is larger than the source);
    each with its search log and its sampling baselines document, as the campaign lays them
    out (``search/<source>/``, ``baselines/<source>.json``)."""
    from tracecanary.cli import main

    work = tmp_path_factory.mktemp("searched")
    shipped_adversarial = REPO / "resources" / "traces" / "adversarial.json"
    full = json.loads(shipped_adversarial.read_text())
    short = {**full, "events": [e for e in full["events"] if e["seq"] < 3]}
    (work / "short.json").write_text(json.dumps(short))
    traces = {"adversarial": shipped_adversarial, "short": work / "short.json"}
    for source, trace in traces.items():
        out = work / "search" / source
        out.mkdir(parents=True)
        argv = ["search", trace, "-o", out / "canary.json", "--log", out / "search.json"]
        assert main([str(a) for a in argv]) == 0
        (work / "baselines").mkdir(exist_ok=True)
        argv = [
            "baselines",
            trace,
            out / "canary.json",
            "-o",
            work / "baselines" / f"{source}.json",
        ]
        assert main([str(a) for a in argv]) == 0
    return work


def test_summary_shows_each_sources_sampling_baselines_with_the_canary_verdict(searched_sources):
    paths = [searched_sources / "baselines" / f"{s}.json" for s in ("adversarial", "short")]
    text = "\n".join(sampling_baselines_section(paths))
    for path in paths:
        doc = json.loads(path.read_text())
        assert doc["canary_fares_best"] is True
        heading = (
            f"### {path.stem}: sampling baselines at the canary's executed size "
            f"({doc['size']:,} of {doc['source']['occurrences']:,})"
        )
        assert heading in text
        assert baselines_table(doc).rstrip("\n") in text
    assert text.count("canary fares at least as well as every baseline: **yes**") == 2


def test_summary_says_no_when_a_baseline_fares_better_than_the_canary(searched_sources):
    # the flag itself is computed (and tested) in verify.baselines; here: how it reads
    doc = json.loads((searched_sources / "baselines" / "adversarial.json").read_text())
    path = searched_sources / "worse.json"
    path.write_text(json.dumps({**doc, "canary_fares_best": False}))
    text = "\n".join(sampling_baselines_section([path]))
    assert "canary fares at least as well as every baseline: **no**" in text
    assert sampling_baselines_section([]) == []


def test_search_page_shows_the_sampling_baselines_under_each_source(searched_sources):
    work = searched_sources
    sources = ("adversarial", "short")
    out = work / "search.md"
    write_search_summary(
        out,
        [work / "search" / s / "search.json" for s in sources],
        [],
        [],
        [],
        [work / "search" / s / "canary.json" for s in sources],
        sampling_baselines=[work / "baselines" / f"{s}.json" for s in sources],
    )
    text = out.read_text()
    for source in sources:
        section = text.split(f"## {source}\n", 1)[1].split("\n## ", 1)[0]
        assert f"### {source}: sampling baselines at the canary's executed size" in section
        assert "| canary |" in section and "| stratified |" in section
        assert "canary fares at least as well as every baseline: **yes**" in section


def test_sources_table_says_not_compressed_for_a_canary_larger_than_its_short_source(
    searched_sources,
):
    canaries = [searched_sources / "search" / s / "canary.json" for s in ("adversarial", "short")]
    stats = {c.parent.name: json.loads(c.read_text())["stats"] for c in canaries}
    assert stats["short"]["compressed"] is False and stats["adversarial"]["compressed"] is True
    rows = {
        row.split("|")[1].strip(): row for row in sources_table(canaries, {}, {}, {})[2:]
    }
    assert "**not compressed** (canary larger)" in rows["short"]
    assert "not compressed" not in rows["adversarial"]


def test_rollout_gate_row_names_the_compared_pair_even_when_nothing_tripped(tmp_path):
    from tracecanary.campaign.summary import verdicts_section

    verdict = {
        "verdict": "pass",
        "tripped": [],
        "comparisons": [{"baseline_config": "baseline", "candidate_config": "upgrade"}],
    }
    (tmp_path / "src.json").write_text(json.dumps(verdict))
    row = [line for line in verdicts_section([tmp_path / "src.json"]) if line.startswith("| src")]
    assert row == ["| src | baseline -> upgrade | **pass** | none |"]
