"""Simulator controls: the canary replayed under each ablation and under seeded noise,
judged against its source under the same control (tracecanary.verify.controls)."""

from __future__ import annotations

import json

import pytest

from tracecanary.canonical import write_json
from tracecanary.formats.schemas import validate
from tracecanary.sim.engine import ALL_ABLATIONS
from tracecanary.synth.decode import DecodeSpec, build_decode
from tracecanary.trace_io import write_trace


def _merged_decode(work, seed: int, events_per_rank: int = 2000):
    """A calibrated 4-rank decode trace, merged."""
    from tracecanary.cli import main

    docs, calibration = build_decode(DecodeSpec(events_per_rank=events_per_rank, seed=seed))
    captures = []
    for rank, doc in enumerate(docs):
        captures.append(str(work / f"rank{rank}.jsonl.gz"))
        write_trace(doc, captures[-1])
    write_json(work / "calibration.json", calibration)
    merged = work / "merged.jsonl.gz"
    argv = ["merge", *captures, "--calibration", str(work / "calibration.json"), "-o", str(merged)]
    assert main(argv) == 0
    return merged


@pytest.fixture(scope="module")
def decode_pair(tmp_path_factory):
    """A decode trace and its searched (reduced-execution) canary."""
    from tracecanary.cli import main

    work = tmp_path_factory.mktemp("controls")
    merged = _merged_decode(work, seed=20261130)
    canary = work / "canary.json"
    assert main(["search", str(merged), "-o", str(canary), "--log", str(work / "s.json")]) == 0
    return merged, canary


def _controls(source, canary, out, *extra) -> tuple[int, dict]:
    from tracecanary.cli import main

    code = main(["controls", str(source), str(canary), "-o", str(out), *extra])
    return code, (json.loads(out.read_text()) if out.exists() else {})


def test_a_lossless_canary_tracks_every_ablation_and_the_noise_exactly(decode_pair, tmp_path):
    from tracecanary.cli import main

    lossless = tmp_path / "lossless.json"
    assert main(["compile", str(decode_pair[0]), "--lossless", "-o", str(lossless)]) == 0
    code, doc = _controls(decode_pair[0], lossless, tmp_path / "c.json", "--iterations", "8")
    assert code == 0
    validate(doc, "controls", file="c.json")
    assert [e["ablation"] for e in doc["ablations"]] == list(ALL_ABLATIONS)
    assert doc["tracks_every_control"], [e for e in doc["ablations"] if not e.get("tracks")]
    assert doc["noise"]["protocol"]["iterations"] == 8
    assert doc["noise"]["ranking_agreement"] == 1.0
    shifts = [c for e in doc["ablations"] for c in e["configs"].values()]
    assert all(c["canary_shift"] == c["source_shift"] for c in shifts)
    assert any(abs(c["source_shift"]) > 0.05 for c in shifts)  # some mechanism matters


def test_a_reduced_canary_names_each_control_it_does_not_track(decode_pair, tmp_path):
    code, doc = _controls(*decode_pair, tmp_path / "c.json", "--iterations", "8")
    assert code == 0
    validate(doc, "controls", file="c.json")
    assert doc["canary"]["occurrences_executed"] < doc["source"]["occurrences"]
    for e in doc["ablations"]:
        failed = e["checks"]["failed"] > 0 or bool(e["ranking_changed"])
        assert e["tracks"] is (not failed), e["ablation"]
    computed = [e for e in doc["ablations"] if e["status"] == "computed"]
    assert doc["tracks_every_control"] is (
        all(e["tracks"] for e in computed) and doc["noise"]["tracks"]
    )
    table = (tmp_path / "c.json").parent / "table.md"
    from tracecanary.verify.controls import controls_table

    table.write_text(controls_table(doc))
    for e in computed:
        row = next(
            line
            for line in table.read_text().splitlines()
            if line.startswith(f"| {e['ablation']} ")
        )
        assert row.endswith("| yes |" if e["tracks"] else "| **no** |")


def test_a_canary_of_another_trace_is_reported_as_not_tracking(decode_pair, tmp_path):
    other = _merged_decode(tmp_path, seed=7, events_per_rank=1000)
    code, doc = _controls(other, decode_pair[1], tmp_path / "c.json", "--iterations", "4")
    assert code == 0  # a measurement: written, exit 0
    assert not doc["tracks_every_control"]
    assert any(e["checks"]["failed"] > 0 for e in doc["ablations"] if e["status"] == "computed")
    noisy = doc["noise"]
    assert not noisy["tracks"]
    assert any(c["mean_check_passed"] < 4 for c in noisy["configs"].values())


def test_controls_are_deterministic_bytes(decode_pair, tmp_path):
    _controls(*decode_pair, tmp_path / "a.json", "--iterations", "3", "--seed", "5")
    _controls(*decode_pair, tmp_path / "b.json", "--iterations", "3", "--seed", "5")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_zero_iterations_is_refused_naming_the_field_and_writes_nothing(
    decode_pair, tmp_path, capsys
):
    code, doc = _controls(*decode_pair, tmp_path / "c.json", "--iterations", "0")
    assert code == 2 and doc == {}
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "iterations" in err[0]
