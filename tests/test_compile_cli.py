"""The compile / expand / verify-commitments commands, in process: exit codes, one-line
errors, no output left behind on failure, lossless round trip through real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracecanary.canonical import canonical_json_bytes, sha256_file
from tracecanary.cli import main
from tracecanary.compile import source_digest
from tracecanary.compile.document import validate_canary
from tracecanary.compile.tracefile import trace_meta, write_program_trace
from tracecanary.load import load_program
from tracecanary.synth.examples import decode_like_program, random_program

REPO = Path(__file__).resolve().parents[1]
DECODE = REPO / "resources" / "decode"


def _trace(tmp_path: Path, program, name="source.jsonl") -> Path:
    path = tmp_path / name
    meta = trace_meta(program, source="tests/test_compile_cli.py", notes=[])
    write_program_trace(program, meta, path)
    return path


@pytest.fixture
def decode_trace(tmp_path):
    return _trace(tmp_path, decode_like_program(60, layers=4, world_size=4, jitter_ns=3_000))


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_lossless_compile_then_expand_round_trips_the_source_digest(tmp_path, decode_trace, capsys):
    canary = tmp_path / "lossless.json"
    assert main(["compile", str(decode_trace), "--lossless", "-o", str(canary)]) == 0
    out = capsys.readouterr().out
    assert (
        "timing_mode: lossless" in out and "byte_compression:" in out and "records_canary:" in out
    )
    doc = json.loads(canary.read_text())
    validate_canary(doc)
    assert canary.read_bytes() == canonical_json_bytes(doc)
    assert doc["stats"]["bytes_canary"] == canary.stat().st_size
    expanded = tmp_path / "expanded.jsonl"
    assert main(["expand", str(canary), "-o", str(expanded)]) == 0
    assert (
        source_digest(load_program(expanded))
        == source_digest(load_program(decode_trace))
        == doc["source"]["digest"]
    )


def test_compile_is_deterministic_across_runs(tmp_path, decode_trace):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    spec = "skew=2us,overlap=5us,gap=5us,latency=5us"
    assert main(["compile", str(decode_trace), "--budget", spec, "-o", str(a)]) == 0
    assert main(["compile", str(decode_trace), "--budget", spec, "-o", str(b)]) == 0
    assert sha256_file(a) == sha256_file(b)


def test_budget_too_tight_exits_1_names_field_and_range_and_writes_nothing(
    tmp_path, decode_trace, capsys
):
    out = tmp_path / "tight.json"
    code = main(
        [
            "compile",
            str(decode_trace),
            "--budget",
            "gap=100ns",
            "--max-records",
            "10",
            "-o",
            str(out),
        ]
    )
    assert code == 1
    line = _one_error_line(capsys)
    assert "field gap" in line and "record [" in line
    assert not out.exists()
    assert not list(tmp_path.glob(".tight.json.tmp-*"))


def test_bad_budget_exits_2_with_one_line(tmp_path, decode_trace, capsys):
    out = tmp_path / "bad.json"
    assert main(["compile", str(decode_trace), "--budget", "skew=fast", "-o", str(out)]) == 2
    assert "budget.skew" in _one_error_line(capsys)
    assert not out.exists()


def test_strict_without_backends_is_refused(tmp_path, decode_trace, capsys):
    out = tmp_path / "strict.json"
    assert main(["compile", str(decode_trace), "--lossless", "--strict", "-o", str(out)]) == 2
    assert "backends" in _one_error_line(capsys)
    assert not out.exists()


def test_prefix_and_reduced_execution_from_the_command_line(tmp_path, decode_trace, capsys):
    out = tmp_path / "c.json"
    code = main(
        [
            "compile",
            str(decode_trace),
            "--budget",
            "gap=5us,overlap=5us,latency=5us,skew=5us",
            "--prefix",
            "200",
            "--max-executed-repeats",
            "3",
            "-o",
            str(out),
        ]
    )
    assert code == 0
    doc = json.loads(out.read_text())
    assert doc["coverage"] == "partial" and doc["claim"] == "partial"
    assert doc["stats"]["occurrences_executed"] < doc["stats"]["occurrences_logical"] == 200
    executed = tmp_path / "executed.jsonl"
    assert main(["expand", str(out), "--executed", "-o", str(executed)]) == 0
    header = json.loads(executed.read_text().splitlines()[0])
    weights = header["meta"]["execution"]["weights"]
    assert len(weights) == doc["stats"]["occurrences_executed"]
    assert abs(sum(weights) - 200) < 1e-9


def test_verify_commitments_passes_then_names_a_tampered_segment(tmp_path, decode_trace, capsys):
    canary = tmp_path / "c.json"
    assert (
        main(
            [
                "compile",
                str(decode_trace),
                "--budget",
                "gap=5us,overlap=5us,latency=5us,skew=2us",
                "-o",
                str(canary),
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["verify-commitments", str(decode_trace), str(canary)]) == 0
    assert capsys.readouterr().out.startswith("ok:")
    doc = json.loads(canary.read_text())
    name, stream = next(
        (n, s) for n, s in doc["timing"].items() if s and s["encoding"] == "bounded_intervals"
    )
    stream["intervals"][0]["commitment"] = "f" * 64
    tampered = tmp_path / "tampered.json"
    tampered.write_bytes(canonical_json_bytes(doc))
    assert main(["verify-commitments", str(decode_trace), str(tampered)]) == 1
    captured = capsys.readouterr()
    itv = stream["intervals"][0]
    assert f"mismatch: timing.{name}.intervals[0] [{itv['start']}, {itv['stop']})" in captured.out
    assert len(captured.err.strip().splitlines()) == 1


def test_verify_commitments_against_a_tampered_source_exits_1(tmp_path, capsys):
    program = random_program(7, 120, p_tail=0.0)
    source = _trace(tmp_path, program)
    canary = tmp_path / "c.json"
    assert (
        main(
            [
                "compile",
                str(source),
                "--budget",
                "gap=20,overlap=20,latency=20,skew=20",
                "-o",
                str(canary),
            ]
        )
        == 0
    )
    lines = source.read_text().splitlines()
    event = json.loads(lines[40])
    event["bytes"] += 1
    lines[40] = json.dumps(event, sort_keys=True, separators=(",", ":"))
    # the paired event of the same occurrence changes too, so the source stays valid
    for j, line in enumerate(lines[1:], start=1):
        other = json.loads(line)
        if (
            j != 40
            and other["group"] == event["group"]
            and other.get("instance") == event.get("instance")
        ):
            other["bytes"] += 1
            lines[j] = json.dumps(other, sort_keys=True, separators=(",", ":"))
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["verify-commitments", str(tampered), str(canary)]) == 1
    out = capsys.readouterr().out
    assert "mismatch: source:" in out


def test_expand_refuses_a_malformed_canary_with_one_line(tmp_path, decode_trace, capsys):
    canary = tmp_path / "c.json"
    assert main(["compile", str(decode_trace), "--lossless", "-o", str(canary)]) == 0
    doc = json.loads(canary.read_text())
    doc["structure"]["records"][0]["repeat"] = -3
    bad = tmp_path / "bad.json"
    bad.write_bytes(canonical_json_bytes(doc))
    capsys.readouterr()
    out = tmp_path / "never.jsonl"
    assert main(["expand", str(bad), "-o", str(out)]) == 2
    assert "structure/records/0" in _one_error_line(capsys)
    assert not out.exists()
    doc = json.loads(canary.read_text())
    doc["structure"]["occurrences"] += 1
    bad.write_bytes(canonical_json_bytes(doc))
    assert main(["expand", str(bad), "-o", str(out)]) == 2
    assert "structure" in _one_error_line(capsys)
    assert not out.exists()


@pytest.mark.slow
def test_shipped_decode_capture_set_lossless_canary_has_10x_fewer_records(tmp_path, capsys):
    if not (DECODE / "calibration.json").exists():
        pytest.skip("resources/decode (the shipped decode capture set) is absent")
    merged = tmp_path / "merged.jsonl.gz"
    ranks = sorted(str(p) for p in DECODE.glob("rank*.jsonl.gz"))
    assert (
        main(
            ["merge", "--calibration", str(DECODE / "calibration.json"), "-o", str(merged), *ranks]
        )
        == 0
    )
    canary = tmp_path / "lossless.json"
    assert main(["compile", str(merged), "--lossless", "-o", str(canary)]) == 0
    stats = json.loads(canary.read_text())["stats"]
    assert stats["events_source"] >= 10 * stats["records_canary"]
    assert stats["compressed"] is True
    assert main(["verify-commitments", str(merged), str(canary)]) == 0
