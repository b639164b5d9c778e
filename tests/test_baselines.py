"""Sampling baselines at the canary's executed size, judged by verify-behavior's checks."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracecanary.canonical import write_json
from tracecanary.formats.schemas import validate
from tracecanary.synth.decode import DecodeSpec, build_decode
from tracecanary.trace_io import write_trace
from tracecanary.verify.baselines import (
    BASELINE_METHODS,
    Sample,
    allocate,
    baselines_table,
    draw_baselines,
    judge_sample,
)


@pytest.fixture(scope="module")
def decode_pair(tmp_path_factory):
    """A calibrated 4-rank decode trace (2,000 events per rank) and its searched canary,
    which executes about half of the occurrences."""
    from tracecanary.cli import main

    work = tmp_path_factory.mktemp("baselines")
    docs, calibration = build_decode(DecodeSpec(events_per_rank=2000))
    captures = []
    for rank, doc in enumerate(docs):
        captures.append(str(work / f"rank{rank}.jsonl.gz"))
        write_trace(doc, captures[-1])
    write_json(work / "calibration.json", calibration)
    merged, canary = work / "merged.jsonl.gz", work / "canary.json"
    argv = ["merge", *captures, "--calibration", str(work / "calibration.json"), "-o", str(merged)]
    assert main(argv) == 0
    assert main(["search", str(merged), "-o", str(canary), "--log", str(work / "s.json")]) == 0
    return merged, canary


@pytest.fixture(scope="module")
def baselines_doc(decode_pair, tmp_path_factory):
    from tracecanary.cli import main

    out = tmp_path_factory.mktemp("out") / "baselines.json"
    assert main(["baselines", str(decode_pair[0]), str(decode_pair[1]), "-o", str(out)]) == 0
    return out, json.loads(out.read_text())


def test_every_method_draws_the_canarys_executed_size_and_validates(baselines_doc, decode_pair):
    _, doc = baselines_doc
    validate(doc, "baselines", file="baselines.json")
    canary = json.loads(decode_pair[1].read_text())
    executed = canary["execution"]["occurrences_executed"]
    assert executed < doc["source"]["occurrences"], "the fixture canary must reduce execution"
    assert doc["size"] == executed
    assert [e["name"] for e in doc["entries"]] == ["canary", *BASELINE_METHODS]
    for entry in doc["entries"]:
        assert entry["occurrences_executed"] == executed, entry["name"]
        assert entry["checks"]["total"] == doc["entries"][0]["checks"]["total"]
    by_name = {e["name"]: e for e in doc["entries"]}
    for name in ("random", "cluster", "stratified"):  # weights stand for every occurrence
        assert by_name[name]["weight_sum"] == pytest.approx(doc["source"]["occurrences"])


def test_searched_canary_beats_every_sampling_baseline_at_equal_size(baselines_doc):
    """The essay's argument on a decode trace: samples lose the queueing context and
    the tail windows that the canary keeps whole."""
    _, doc = baselines_doc
    canary, *baselines = doc["entries"]
    assert canary["behavior"] == "pass" and canary["claim"] == "verified"
    assert doc["canary_fares_best"] is True
    for entry in baselines:
        assert entry["behavior"] == "fail", entry["name"]
        assert entry["checks"]["failed"] > canary["checks"]["failed"], entry["name"]
        assert entry["worst_check"]["pass"] is False


def test_baselines_are_deterministic_for_a_seed_and_differ_across_seeds(decode_pair):
    from tracecanary.load import load_program

    source = load_program(decode_pair[0], executed=False)
    first = draw_baselines(source, 500, seed=7)
    again = draw_baselines(source, 500, seed=7)
    other = draw_baselines(source, 500, seed=8)
    assert [s.selection_sha256() for s in first] == [s.selection_sha256() for s in again]
    assert first[0].selection_sha256() != other[0].selection_sha256()
    for sample in first:
        assert len(np.unique(sample.idx)) == len(sample.idx) == 500
        assert np.all(np.diff(sample.idx) > 0), sample.method


def test_rerunning_baselines_gives_byte_identical_output(
    baselines_doc, decode_pair, run_cli, tmp_path
):
    again = tmp_path / "again.json"
    code, _, err = run_cli("baselines", *decode_pair, "-o", again)
    assert code == 0, err
    assert again.read_bytes() == baselines_doc[0].read_bytes()


def test_a_baseline_that_samples_every_occurrence_passes_every_check(decode_pair):
    """Judged by the same machinery, the whole source at weight 1 is the source."""
    from tracecanary.load import load_program
    from tracecanary.sim.backends import load_backends
    from tracecanary.verify.behavior import load_tolerances, replay_program

    source = load_program(decode_pair[0], executed=False)
    backends, tolerances = load_backends(None), load_tolerances(None)
    whole = Sample("random", np.arange(source.n), np.ones(source.n))
    entry = judge_sample(
        source, whole, replay_program(source, backends), backends, tolerances, None, None
    )
    assert entry["behavior"] == "pass" and entry["checks"]["failed"] == 0
    assert entry["worst_check"] is None and entry["ranking"]["changed"] == 0


def test_markdown_table_lists_the_canary_first_then_each_baseline(baselines_doc):
    _, doc = baselines_doc
    lines = baselines_table(doc).splitlines()
    assert lines[0].startswith("| sample | executed | behavior | checks passed")
    assert [line.split("|")[1].strip() for line in lines[2:]] == ["canary", *BASELINE_METHODS]


def test_a_non_canary_is_refused_with_one_line_and_no_output(run_cli, decode_pair, tmp_path):
    out = tmp_path / "b.json"
    code, _, err = run_cli("baselines", decode_pair[0], decode_pair[0], "-o", out)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert str(decode_pair[0]) in err and not out.exists()


def test_a_negative_seed_is_refused_with_exit_2(run_cli, decode_pair, tmp_path):
    out = tmp_path / "b.json"
    code, _, err = run_cli("baselines", *decode_pair, "--seed", "-1", "-o", out)
    assert code == 2 and "--seed" in err and not out.exists()


@given(
    counts=st.lists(st.integers(0, 50), min_size=1, max_size=12),
    k=st.integers(1, 300),
    at_least_one=st.booleans(),
)
def test_allocation_fills_min_k_total_within_each_groups_count(counts, k, at_least_one):
    counts = np.array(counts)
    quota = allocate(counts, k, at_least_one=at_least_one)
    assert quota.sum() == min(k, counts.sum())
    assert np.all(quota >= 0) and np.all(quota <= counts)
    if at_least_one and k >= np.count_nonzero(counts):
        assert np.all(quota[counts > 0] >= 1)


@pytest.mark.slow
def test_campaign_writes_a_valid_baselines_document_per_source(tiny_campaign):
    """The real Snakemake rule, run by the tiny campaign, with its provenance record."""
    doc = json.loads((tiny_campaign / "results/tiny/baselines/decode.json").read_text())
    validate(doc, "baselines", file="baselines/decode.json")
    table = (tiny_campaign / "results/tiny/baselines/decode.md").read_text()
    assert table == baselines_table(doc)
    assert (tiny_campaign / "results/tiny/provenance/baselines/decode.json").is_file()
