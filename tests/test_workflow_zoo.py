"""Zoo workloads as campaign sources: ``kind: live_capture`` with ``workload:`` captures that
zoo program (``tracecanary capture --workload``), keeps the capture as evidence and runs it
through import -> merge -> ingest -> compile/verify -> search -> replay -> baselines ->
summary in a real Snakemake run; the config schema takes exactly the zoo's workloads."""

from __future__ import annotations

import copy
import json

import pytest
import yaml
from conftest import REPO, run_snakemake
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from tracecanary.formats.schemas import load_schema
from tracecanary.zoo import WORKLOADS

SCHEMA = str(REPO / "schemas" / "config.schema.json")
ZOO_SOURCE = {
    "id": "zoo",
    "kind": "live_capture",
    "workload": "pp",
    "steps": 2,
    "calibration": "resources/live/calibration.json",
}

PROBE_SOURCE = {  # without workload: the built-in probe program
    "id": "probe",
    "kind": "live_capture",
    "steps": 2,
    "calibration": "resources/live/calibration.json",
}


def validated(source: dict) -> dict:
    config = {"campaign": "c", "sources": [copy.deepcopy(source)]}
    validate(config, SCHEMA)  # what the Snakefile does, defaults filled in
    return config["sources"][0]


def test_config_schema_offers_exactly_the_zoo_workloads():
    source_schema = load_schema("config")["properties"]["sources"]["items"]
    assert sorted(source_schema["properties"]["workload"]["enum"]) == sorted(WORKLOADS)


def test_config_schema_accepts_a_live_capture_of_a_zoo_workload():
    assert validated(ZOO_SOURCE)["workload"] == "pp"
    assert validated(ZOO_SOURCE)["nproc"] == 4


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ({"workload": "resnet"}, "'resnet' is not one of"),
        ({"kind": "captures", "captures": ["r0.json"]}, "should not be valid"),
        ({"nproc": 6}, "6 is not one of"),
        ({"workload": "fsdp2_tp", "nproc": 2}, "4 was expected"),
    ],
    ids=[
        "unknown-workload",
        "workload-on-another-kind",
        "zoo-with-other-than-2-or-4-ranks",
        "a-2x2-mesh-on-2-ranks",
    ],
)
def test_config_schema_refuses_a_workload_it_cannot_capture(change, refusal):
    with pytest.raises(WorkflowError, match=refusal):
        validated({**ZOO_SOURCE, **change})


def test_config_schema_allows_each_workload_the_world_sizes_it_runs_on():
    for name, workload in WORKLOADS.items():
        for nproc in (2, 4):
            source = {**ZOO_SOURCE, "workload": name, "nproc": nproc}
            if nproc in workload.ranks:
                assert validated(source)["nproc"] == nproc
            else:
                with pytest.raises(WorkflowError):
                    validated(source)


def test_full_campaign_captures_every_zoo_workload_live_as_evidence():
    config = yaml.safe_load((REPO / "config" / "campaign.yaml").read_text())
    zoo = [s for s in config["sources"] if "workload" in s]
    assert sorted(s["workload"] for s in zoo) == sorted(WORKLOADS)
    for source in zoo:
        assert validated(source)["kind"] == "live_capture"
        assert (REPO / source["calibration"]).is_file()


@pytest.mark.slow
def test_zoo_source_runs_from_live_capture_to_the_campaign_summary_beside_the_probe(tmp_path):
    (tmp_path / "config").mkdir()
    for name in ("backends.yaml", "tolerances.yaml"):
        (tmp_path / "config" / name).write_bytes((REPO / "config" / name).read_bytes())
    calibration = tmp_path / ZOO_SOURCE["calibration"]
    calibration.parent.mkdir(parents=True)
    calibration.write_bytes((REPO / ZOO_SOURCE["calibration"]).read_bytes())
    config = {
        "campaign": "zc",
        "sources": [ZOO_SOURCE, {**PROBE_SOURCE}],
        "backends": "config/backends.yaml",
        "tolerances": "config/tolerances.yaml",
        "compile": {"budgets": ["8us"]},
        "search": {"budgets": "0,8,64"},
    }
    (tmp_path / "config" / "zc.yaml").write_text(yaml.safe_dump(config))
    run = run_snakemake(
        tmp_path, "--cores", "2", "results/zc/summary.md", configfile="config/zc.yaml"
    )
    assert run.returncode == 0, run.stderr[-3000:]
    results = tmp_path / "results" / "zc"

    capture = json.loads((results / "capture/zoo/capture.json").read_text())
    assert capture["settings"]["workload"] == "pp" and capture["settings"]["steps"] == 2
    assert capture["import_check"]["unknown_groups"] == 0
    probe = json.loads((results / "capture/probe/capture.json").read_text())
    assert "workload" not in probe["settings"] and probe["settings"]["steps"] == 2
    manifest = json.loads((results / "manifest.json").read_text())
    recorded = {e["path"]: e for e in manifest["evidence"] if e["kind"] == "recorded"}
    assert recorded["results/zc/capture/zoo"]["rule"] == "capture_kineto"
    assert recorded["results/zc/capture/zoo"]["deterministic"] is False

    canary = json.loads((results / "search/zoo/canary.json").read_text())
    summary = (results / "summary.md").read_text()
    search = (results / "search.md").read_text()
    heading = "### zoo: sampling baselines at the canary's executed size"
    assert heading in summary and heading in search
    assert "canary fares at least as well as every baseline: **" in summary
    row = next(line for line in summary.splitlines() if line.startswith("| zoo |"))
    assert ("**not compressed**" in row) is (not canary["stats"]["compressed"])
