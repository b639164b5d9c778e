"""The campaign's physical path end to end with real Snakemake and real gloo collectives:
sweeps -> calibrate_backends -> replay_physical (rounds, rotated) -> physical_report with
the simulator's ranking computed from the calibrated twins, bootstrap intervals and gate."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import make_physical_campaign, run_snakemake


@pytest.mark.slow
def test_campaign_reports_simulator_vs_machine_from_its_own_ladders(tmp_path):
    make_physical_campaign(tmp_path, configs=["native", "fused64k"], repetitions=3)
    run = run_snakemake(tmp_path, "--nolock", "results/tiny/physical/decode.json")
    assert run.returncode == 0, run.stderr[-3000:]
    backends = yaml.safe_load((tmp_path / "results/tiny/backends/decode/calibrated.yaml").read_text())
    assert sorted(backends["configs"]) == ["fused64k", "native"]
    assert backends["configs"]["fused64k"]["measured"]["replay"]["mode"] == "fused"
    # each configuration's dispatch lateness comes from its own calibration replay
    for name in ("fused64k", "native"):
        dispatch = backends["configs"][name]["measured"]["dispatch"]
        attempt = tmp_path / f"results/tiny/dispatch/decode/{name}/attempt/attempt.json"
        rows = json.loads(attempt.read_text())["files"]["rows.parquet"]
        assert [a["rows_sha256"] for a in dispatch["attempts"]] == [rows]
    report = json.loads((tmp_path / "results/tiny/physical/decode.json").read_text())
    assert report["configs"]["native"]["full"]["repetitions"] == 3
    assert report["configs"]["native"]["full"]["interval"]["mean"] is not None
    sim = report["simulator_agreement"]
    assert sim["status"] == "computed", sim.get("reason")
    for program in ("canary", "full"):
        errors = sim["programs"][program]["prediction_error_pct"]
        for predicted in sim["programs"][program]["predicted"].values():
            assert predicted["dispatch"] and predicted["unmatched_contexts"] == 0
        assert sorted(errors) == ["fused64k", "native"]
        for metric in ("p50", "p95", "p99", "mean"):
            m = sim["programs"][program]["metrics"][metric]
            assert m["decided_pairs"] + m["undetermined_pairs"] == m["pairs"] == 1
    assert report["gate"]["status"] in ("pass", "fail", "warning")

    # rounds, the order rotated per round: native fused64k | fused64k native | native ...
    def after(config: str, rep: int) -> list[str]:
        prov = tmp_path / f"results/tiny/provenance/replay_physical/decode/{config}/rep{rep}.json"
        inputs = json.loads(prov.read_text())["predicate"]["inputs"]
        return [i["path"].rsplit("decode/", 1)[1] for i in inputs if i["name"] == "after"]

    assert after("native", 1) == [] and after("fused64k", 1) == ["native/rep1.json"]
    assert after("fused64k", 2) == ["fused64k/rep1.json"]
    assert after("native", 2) == ["fused64k/rep2.json"]
    assert after("native", 3) == ["native/rep2.json"]
