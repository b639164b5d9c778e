"""calibrate-backends: simulator configurations from measured ladders.

Real evidence: the nccl-tests logs in ../shared/nccltests_samples (real A100 runs; the
tests skip, saying why, where they are absent) and gloo ladders swept here with
``tracecanary sweep`` (tests/test_sim_twin.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from tracecanary.cli import main
from tracecanary.sim.backends import load_backends
from tracecanary.sim.costs import CostCurve, monotone_values

SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "nccltests_samples"
A100 = {
    "all_reduce": SAMPLES / "polaris_a100_8rank_all_reduce.txt",
    "all_gather": SAMPLES / "polaris_a100_8rank_all_gather.txt",
    "all_to_all": SAMPLES / "polaris_a100_8rank_alltoall.txt",
}
needs_samples = pytest.mark.skipif(
    not all(p.exists() for p in A100.values()),
    reason="../shared/nccltests_samples (real nccl-tests logs) is absent on this machine",
)


def _trace(tmp_path: Path, ops: list[tuple[str, int, str]], ranks: int) -> Path:
    """A native trace: each (op, bytes, dtype) once on every rank, 1 ms apart."""
    path = tmp_path / "trace.jsonl"
    lines = [
        {
            "format": "tracecanary.trace/v1",
            "groups": [{"id": "world", "ranks": list(range(ranks))}],
            "meta": {"world_size": ranks, "source": "test"},
        }
    ]
    for seq, (op, nbytes, dtype) in enumerate(ops):
        for rank in range(ranks):
            event = {"op": op, "bytes": nbytes, "dtype": dtype, "group": "world", "rank": rank,
                     "seq": seq, "ts_ns": 1_000_000 * (seq + 1)}  # fmt: skip
            if op in ("broadcast", "reduce"):
                event["root"] = 0
            lines.append(event)
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def test_monotone_values_pool_adjacent_violators():
    got = monotone_values(np.array([5.0, 3.0, 4.0, 10.0]), np.array([1.0, 1.0, 2.0, 1.0]))
    # 5 and 3 pool to 4; then 4 (w 2) joins: (4*2 + 4*2)/4 = 4
    assert got.tolist() == [4.0, 4.0, 4.0, 10.0]


def test_cost_curve_prices_by_validated_segment_else_monotone_interpolation():
    curve = CostCurve.from_document(
        {
            "collective": "all_reduce",
            "dtype": "float32",
            "group_size": 4,
            "points": [
                {"bytes": 100, "monotone_us": 10.0},
                {"bytes": 200, "monotone_us": 20.0},
                {"bytes": 1000, "monotone_us": 100.0},
                {"bytes": 2000, "monotone_us": 190.0},
            ],
            # alpha 0, beta 0.01 GB/s = 0.1 us/B, over 1000..2000 B
            "segments": [
                {"min_bytes": 1000, "max_bytes": 2000, "alpha_us": 0.0, "beta_gbps": 0.01}
            ],
        }
    )
    cost, extrapolated = curve.cost_us(np.array([50, 150, 1500, 4000]))
    assert cost.tolist() == pytest.approx([10.0, 15.0, 150.0, 400.0])
    assert extrapolated.tolist() == [False, False, False, True]


@needs_samples
def test_calibrate_backends_from_real_nccltests_logs(tmp_path):
    out = tmp_path / "backends.yaml"
    args = [f"a100={p}" for p in A100.values()]
    assert main(["calibrate-backends", *args, "-o", str(out)]) == 0
    backends = load_backends(out)
    assert list(backends.configs) == ["a100"]
    doc = yaml.safe_load(out.read_text())["configs"]["a100"]["measured"]
    curves = {c["collective"]: c for c in doc["costs"]}
    assert set(curves) == {"all_reduce", "all_gather", "all_to_all"}
    for name, curve in curves.items():
        assert curve["group_size"] == 8 and curve["dtype"] == "float32"
        assert curve["placement"] == "out_of_place"
        digest = hashlib.sha256(A100[name].read_bytes()).hexdigest()
        assert curve["ladders"][0]["sha256"] == digest
        mono = [p["monotone_us"] for p in curve["points"]]
        assert mono == sorted(mono)
        assert curve["error"]["stated_error_pct"] is not None
        # size-0 rungs are harness overhead: excluded, with the reason
        assert all(p["bytes"] > 0 for p in curve["points"])
    ar = curves["all_reduce"]
    assert ar["segments"], "the A100 all_reduce large-message fit passes the trust gates"
    seg = ar["segments"][0]
    assert seg["r2"] >= 0.9 and seg["max_bytes"] == 1 << 30
    # priced from the curve: a measured rung inside no segment costs its monotone median
    rung = next(p for p in ar["points"] if p["bytes"] == 1 << 20)
    cost, _ = (
        backends.configs["a100"]
        .costs.curves[("all_reduce", "float32", 8)]
        .cost_us(np.array([1 << 20]))
    )
    assert cost[0] == pytest.approx(rung["monotone_us"])


@needs_samples
def test_replay_with_calibrated_backends_prices_ops_from_measured_curves(tmp_path):
    backends = tmp_path / "b.json"
    assert main(["calibrate-backends", f"a100={A100['all_reduce']}", "-o", str(backends)]) == 0
    trace = _trace(tmp_path, [("all_reduce", 1 << 20, "float32")], ranks=8)
    report = tmp_path / "r.json"
    assert main(["replay", str(trace), "--backends", str(backends), "-o", str(report)]) == 0
    doc = json.loads(report.read_text())
    curve = load_backends(backends).configs["a100"].costs.curves[("all_reduce", "float32", 8)]
    expected_ns = int(np.rint(curve.cost_us(np.array([1 << 20]))[0][0] * 1000.0))
    assert doc["configs"]["a100"]["service"]["max_ns"] == expected_ns


@needs_samples
def test_configuration_without_evidence_for_a_program_op_is_refused_by_name(tmp_path, capsys):
    backends = tmp_path / "b.json"
    assert main(["calibrate-backends", f"a100={A100['all_reduce']}", "-o", str(backends)]) == 0
    trace = _trace(
        tmp_path, [("all_reduce", 1024, "float32"), ("broadcast", 64, "float32")], ranks=8
    )
    report = tmp_path / "r.json"
    capsys.readouterr()
    assert main(["replay", str(trace), "--backends", str(backends), "-o", str(report)]) == 2
    err = capsys.readouterr().err
    assert "'a100'" in err and "broadcast float32 on 8 ranks" in err and "never filled" in err
    assert len(err.strip().splitlines()) == 1
    assert not report.exists()


@needs_samples
def test_calibrate_refuses_an_nccltests_log_without_a_named_setting(tmp_path, capsys):
    out = tmp_path / "b.yaml"
    assert main(["calibrate-backends", str(A100["all_reduce"]), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "NAME=PATH" in err and str(A100["all_reduce"]) in err
    assert not out.exists()


@needs_samples
def test_calibrate_refuses_two_ladders_of_one_op_under_one_name(tmp_path, capsys):
    out = tmp_path / "b.yaml"
    a = A100["all_reduce"]
    copy = tmp_path / "copy.txt"
    copy.write_bytes(a.read_bytes())
    assert main(["calibrate-backends", f"x={a}", f"x={copy}", "-o", str(out)]) == 2
    assert "never merged" in capsys.readouterr().err
    assert not out.exists()


def test_shipped_nvlink_example_stays_labelled_and_loads():
    from tracecanary.defaults import default_file

    text = Path(default_file("backends.yaml")).read_text()
    assert text.startswith("# EXAMPLE configurations")
    backends = load_backends(None)
    assert backends.configs and not any(c.measured for c in backends.configs.values())


def test_shipped_example_simulator_output_is_byte_identical_to_before_calibration(tmp_path):
    """The measured-cost path must not move the modelled one: the adversarial report under
    the shipped example has the digest it had before calibrate-backends existed (3693129)."""
    from tracecanary.canonical import sha256_file

    trace, report = tmp_path / "adv.json", tmp_path / "r.json"
    assert main(["synth", "adversarial", "-o", str(trace)]) == 0
    assert main(["replay", str(trace), "-o", str(report)]) == 0
    assert sha256_file(report) == "b4e8e4a2c46fc4e85442d3291c7569c957562db50657e8f4609e61881516f8b3"
