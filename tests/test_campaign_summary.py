"""summary.md and search.md tables: one row per searched budget, rejected checks
summarised, a physical verdict in words, one byte count per canary."""

from __future__ import annotations

from tracecanary.campaign.summary import (
    budget_table,
    canary_size,
    physical_verdict,
    rejected_checks,
)


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


def test_canary_size_is_the_file_size_human_and_exact(tmp_path):
    path = tmp_path / "canary.json"
    path.write_bytes(b"x" * 33818)
    assert canary_size(path) == "33.0 KiB (33,818 B)"
