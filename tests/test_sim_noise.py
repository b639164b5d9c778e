"""Seeded noise replays (``replay --iterations N --seed S``): deterministic, seed-sensitive,
noise-free at zero jitter, intervals that cover the noise-free value, verifiable."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tracecanary.canonical import canonical_json_bytes, write_json
from tracecanary.cli import main
from tracecanary.errors import InputError
from tracecanary.formats.schemas import validate
from tracecanary.program import make_program
from tracecanary.sim import samples
from tracecanary.sim.backends import load_backends
from tracecanary.sim.noise import noise_settings
from tracecanary.sim.report import build_report
from tracecanary.synth.adversarial import build_adversarial

REPO = Path(__file__).resolve().parents[1]
BACKENDS = REPO / "config" / "backends.yaml"


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("noise") / "adversarial.json"
    write_json(path, build_adversarial())
    return path


def _replay(trace: Path, out: Path, *extra: str) -> dict:
    args = ["replay", str(trace), "--backends", str(BACKENDS), "-o", str(out), *extra]
    assert main(args) == 0
    return json.loads(out.read_text())


def _values(report: dict, config: str, metric: str) -> np.ndarray:
    return samples.decode(report["noise"]["configs"][config][metric]["samples"])


def test_same_seed_gives_identical_report_bytes(trace, tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    opts = ("--iterations", "4", "--seed", "7", "--arrival-jitter-ns", "2000")
    _replay(trace, a, *opts)
    _replay(trace, b, *opts)
    assert a.read_bytes() == b.read_bytes()
    validate(json.loads(a.read_text()), "report", file=str(a))


def test_different_seed_gives_different_samples(trace, tmp_path):
    opts = ("--iterations", "4", "--arrival-jitter-ns", "2000")
    a = _replay(trace, tmp_path / "a.json", *opts, "--seed", "1")
    b = _replay(trace, tmp_path / "b.json", *opts, "--seed", "2")
    config = next(iter(a["configs"]))
    assert not np.array_equal(
        _values(a, config, "latency.mean_ns"), _values(b, config, "latency.mean_ns")
    )
    # the noise-free part of the report does not depend on the seed
    assert a["configs"] == b["configs"]


def test_one_iteration_without_noise_equals_the_plain_replay(trace, tmp_path):
    plain = _replay(trace, tmp_path / "plain.json")
    noisy = _replay(trace, tmp_path / "noisy.json", "--iterations", "1", "--service-jitter", "0")
    assert "noise" not in plain and "noise" not in plain["protocol"]
    assert {k: v for k, v in noisy.items() if k != "noise"} | {
        "protocol": {k: v for k, v in noisy["protocol"].items() if k != "noise"}
    } == plain
    for name, block in plain["configs"].items():
        for metric in ("latency", "queue_wait"):
            for key, value in block[metric].items():
                got = _values(noisy, name, f"{metric}.{key}")
                assert got.tolist() == [value], (name, metric, key)


def test_interval_contains_the_noise_free_value_for_symmetric_jitter():
    # idle gaps far longer than any service: no queueing, so the mean latency is
    # linear in the symmetric service multiplier and its expectation is the noise-free one
    n = 200
    occ = {
        "op": ["all_reduce"] * n,
        "bytes": [1 << 20] * n,
        "dtype": ["bf16"] * n,
        "group": ["g"] * n,
        "group_size": [4] * n,
        "gap_ns": [10**9] * n,
    }
    program = make_program(
        occ, {"occ": [], "rank": [], "skew_ns": []}, world_size=4, skew_known=True
    )
    backends = load_backends(BACKENDS)
    report = build_report(
        program,
        backends,
        input_sha256="0" * 64,
        noise=noise_settings(40, 3, 0.2, 0),
    )
    for name, block in report["configs"].items():
        interval = report["noise"]["configs"][name]["latency.mean_ns"]
        assert interval["sd"] > 0
        assert interval["ci_low"] <= block["latency"]["mean_ns"] <= interval["ci_high"], name


def test_verify_report_replays_the_noise_and_detects_an_edited_noisy_report(
    trace, tmp_path, capsys
):
    out = tmp_path / "noisy.json"
    report = _replay(trace, out, "--iterations", "3", "--seed", "11", "--arrival-jitter-ns", "500")
    assert main(["verify-report", str(out), "--input", str(trace)]) == 0
    config = next(iter(report["noise"]["configs"]))
    report["noise"]["configs"][config]["latency.p99_ns"]["ci_high"] += 1.0
    edited = tmp_path / "edited.json"
    edited.write_bytes(canonical_json_bytes(report))
    capsys.readouterr()
    assert main(["verify-report", str(edited), "--input", str(trace)]) == 1
    assert f"noise.configs.{config}.latency.p99_ns.ci_high" in capsys.readouterr().err


def test_verify_report_detects_a_changed_seed(trace, tmp_path, capsys):
    out = tmp_path / "noisy.json"
    report = _replay(trace, out, "--iterations", "2", "--seed", "5", "--arrival-jitter-ns", "500")
    report["protocol"]["noise"]["seed"] = 6
    edited = tmp_path / "edited.json"
    edited.write_bytes(canonical_json_bytes(report))
    capsys.readouterr()
    assert main(["verify-report", str(edited), "--input", str(trace)]) == 1


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("--iterations", "0"), "iterations"),
        (("--iterations", "2", "--service-jitter", "1.5"), "service_jitter"),
        (("--iterations", "2", "--arrival-jitter-ns", "-1"), "arrival_jitter_ns"),
        (("--seed", "3"), "seed"),
    ],
)
def test_bad_noise_options_exit_2_naming_the_field_and_write_nothing(
    trace, tmp_path, capsys, args, field
):
    out = tmp_path / "r.json"
    code = main(["replay", str(trace), "--backends", str(BACKENDS), "-o", str(out), *args])
    assert code == 2
    assert field in capsys.readouterr().err
    assert not out.exists()


def test_noise_settings_refuse_a_boolean_iteration_count():
    with pytest.raises(InputError, match="iterations"):
        noise_settings(True, 0)
