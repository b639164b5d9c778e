"""Messages a user reads name the cause and the fix: a directory given as a file says so,
a trace with no collectives says "no collectives found", import-kineto takes
``--world-size`` where a trace lacks it, a failed claim names what failed most and how to
fix it, and the console ranking prints ties as the JSON states them."""

from __future__ import annotations

import json

import pytest
from test_kineto_synthetic import kineto, nccl_call, write

from tracecanary.diagnostics import FIX_BEHAVIOR, search_cause


@pytest.mark.parametrize(
    "argv",
    [
        ("ingest", "{d}", "-o", "{o}/x.parquet"),
        ("merge", "{d}", "-o", "{o}/m.jsonl.gz"),
        ("compile", "{d}", "--lossless", "-o", "{o}/c.json"),
        ("expand", "{d}", "-o", "{o}/t.json"),
        ("import-kineto", "{d}", "-o", "{o}/k.json"),
        ("replay", "{d}", "-o", "{o}/r.json"),
        ("verify-behavior", "{d}", "{d}", "-o", "{o}/v.json"),
        ("search", "{d}", "-o", "{o}/c.json", "--log", "{o}/s.json"),
        ("export-param", "{d}", "-o", "{o}/e"),
        ("calibrate-clocks", "{d}", "-o", "{o}/cal.json"),
        ("replay", "{f}", "--backends", "{d}", "-o", "{o}/r.json"),
    ],
    ids=lambda argv: argv[0] + ("-backends" if "--backends" in argv else ""),
)
def test_a_directory_given_as_an_input_file_is_named_as_a_directory(tmp_path, run_cli, argv):
    directory = tmp_path / "captures"
    directory.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    trace = tmp_path / "adv.json"
    assert run_cli("synth", "adversarial", "-o", trace)[0] == 0
    code, _, err = run_cli(*(a.format(d=directory, o=out, f=trace) for a in argv))
    assert code == 2
    assert f"{directory}: is a directory" in err and "no such file" not in err
    assert len(err.strip().splitlines()) == 1
    assert list(out.iterdir()) == []


def test_a_native_trace_without_events_is_refused_as_having_no_collectives(tmp_path, run_cli):
    doc = {
        "format": "tracecanary.trace/v1",
        "meta": {
            "world_size": 2,
            "source": "empty",
            "clock_domains": [{"id": "h", "ranks": [0, 1], "host": "h"}],
        },
        "groups": [{"id": "world", "ranks": [0, 1]}],
        "events": [],
    }
    path = tmp_path / "empty.json"
    path.write_text(json.dumps(doc))
    for argv in (
        ("ingest", path, "-o", tmp_path / "x.parquet"),
        ("compile", path, "--lossless", "-o", tmp_path / "c.json"),
    ):
        code, _, err = run_cli(*argv)
        assert code == 2
        assert "no collectives found" in err and "field events" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.json"]


def test_a_kineto_trace_without_collectives_says_so_before_asking_for_rank(tmp_path, run_cli):
    compute_only = {
        "ph": "X",
        "cat": "cpu_op",
        "name": "aten::mm",
        "ts": 1,
        "dur": 2,
        "pid": 1,
        "tid": 1,
    }
    path = write(tmp_path, {"schemaVersion": 1, "traceEvents": [compute_only]})
    code, _, err = run_cli("import-kineto", path, "-o", tmp_path / "k.json")
    assert code == 2
    assert "no collectives found" in err and "pass --rank" not in err
    assert not (tmp_path / "k.json").exists()


def test_import_kineto_world_size_option_supplies_a_missing_world_size(tmp_path, run_cli):
    doc = kineto(nccl_call(10.0, ext=4), rank=1)
    del doc["distributedInfo"]["world_size"]
    path = write(tmp_path, doc)
    code, _, err = run_cli("import-kineto", path, "-o", tmp_path / "no.json")
    assert code == 2 and "pass --world-size" in err
    code, _, err = run_cli("import-kineto", path, "--world-size", "4", "-o", tmp_path / "k.json")
    assert code == 0, err
    assert json.loads((tmp_path / "k.json").read_text())["meta"]["world_size"] == 4


def test_import_kineto_refuses_a_world_size_that_contradicts_the_trace(tmp_path, run_cli):
    path = write(tmp_path, kineto(nccl_call(10.0, ext=4), rank=0, world=2))
    code, _, err = run_cli("import-kineto", path, "--world-size", "8", "-o", tmp_path / "k.json")
    assert code == 2
    assert "--world-size 8 contradicts distributedInfo.world_size 2" in err


def test_search_cause_names_the_checks_that_failed_most_and_the_fix():
    log = {
        "candidates": [
            {"settings": {"budget_ns": 0}, "failed_checks": ["a:latency.p99", "b:latency.p99"]},
            {"settings": {"budget_ns": 4000}, "failed_checks": ["a:latency.p99", "a:mean"]},
        ]
    }
    cause = search_cause(log, None)
    assert cause.startswith("checks that failed most: latency.p99 (3), mean (1)")
    assert FIX_BEHAVIOR in cause
    skew = "cross-rank skew unknown (x): give a clock calibration"
    assert search_cause(log, skew) == f"behavior not judged: {skew}"


def test_console_ranking_prints_ties_as_the_json_states_them(tmp_path, run_cli):
    trace = tmp_path / "adv.json"
    assert run_cli("synth", "adversarial", "-o", trace)[0] == 0
    for tolerance in ("0.99", "0"):
        report_path = tmp_path / f"r{tolerance}.json"
        code, out, _ = run_cli("replay", trace, "--tie-tolerance", tolerance, "-o", report_path)
        assert code == 0
        ranking = json.loads(report_path.read_text())["rankings"]["metrics"]["mean"]
        line = next(x for x in out.splitlines() if x.startswith("# workload ranking"))
        names = ranking["order"]
        tied = {frozenset(p) for p in ranking["ties"]}
        text = line.split(": ", 1)[1]
        expected = names[0]
        for left, right in zip(names, names[1:], strict=False):
            expected += (" = " if frozenset((left, right)) in tied else " < ") + right
        assert text == expected
        if tolerance == "0.99":  # every pair a tie in the JSON: no strict order printed
            assert "<" not in text and len(tied) == len(names) * (len(names) - 1) // 2
