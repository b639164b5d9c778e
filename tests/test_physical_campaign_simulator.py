"""The campaign's physical path end to end with real Snakemake and real gloo collectives:
sweeps -> calibrate_backends -> replay_physical (rounds, rotated) -> physical_report with
the simulator's ranking computed from the calibrated twins, bootstrap intervals and gate."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import REPO, make_tiny_campaign, run_snakemake


@pytest.mark.slow
def test_campaign_reports_simulator_vs_machine_from_its_own_ladders(tmp_path):
    make_tiny_campaign(tmp_path, events_per_rank=80, with_alphabeta=False)
    config_file = tmp_path / "config" / "tiny.yaml"
    config = yaml.safe_load(config_file.read_text())
    ladder = {"factor": 4, "warmup": 1, "iters": 2, "cycles": 3}
    config["physical"] = {
        "source": "decode",
        "configs": ["native", "fused64k"],
        "repetitions": 3,
        "warmup": 0,
        "iters": 1,
        "timeout": 300,
        "sweeps": [
            {"id": "ar", "collective": "all_reduce", "dtype": "bfloat16", "min_bytes": "1K",
             "max_bytes": "1M", **ladder},
            {"id": "ag", "collective": "all_gather", "dtype": "bfloat16", "min_bytes": "1K",
             "max_bytes": "4M", **ladder},
            {"id": "bc", "collective": "broadcast", "dtype": "int64", "min_bytes": "8",
             "max_bytes": "1K", **ladder},
        ],
    }  # fmt: skip
    config_file.write_text(yaml.safe_dump(config))
    (tmp_path / "config" / "physical.yaml").write_bytes(
        (REPO / "config" / "physical.yaml").read_bytes()
    )
    run = run_snakemake(tmp_path, "--nolock", "results/tiny/physical.json")
    assert run.returncode == 0, run.stderr[-3000:]
    backends = yaml.safe_load((tmp_path / "results/tiny/backends/calibrated.yaml").read_text())
    assert sorted(backends["configs"]) == ["fused64k", "native"]
    assert backends["configs"]["fused64k"]["measured"]["replay"]["mode"] == "fused"
    report = json.loads((tmp_path / "results/tiny/physical.json").read_text())
    assert report["configs"]["native"]["full"]["repetitions"] == 3
    assert report["configs"]["native"]["full"]["interval"]["mean"] is not None
    sim = report["simulator_agreement"]
    assert sim["status"] == "computed", sim.get("reason")
    for program in ("canary", "full"):
        errors = sim["programs"][program]["prediction_error_pct"]
        assert sorted(errors) == ["fused64k", "native"]
        for metric in ("p50", "p95", "p99", "mean"):
            m = sim["programs"][program]["metrics"][metric]
            assert m["decided_pairs"] + m["undetermined_pairs"] == m["pairs"] == 1
    assert report["gate"]["status"] in ("pass", "fail", "warning")
    # rounds: each replay job after the previous one, the order rotated per round
    prov = tmp_path / "results/tiny/provenance/replay_physical/decode/native/rep2.json"
    inputs = json.dumps(json.loads(prov.read_text()))
    assert "replay_physical/decode/fused64k/rep1.json" in inputs
