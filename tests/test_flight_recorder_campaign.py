"""Campaign sources of ``kind: flight_recorder``: the committed torch 2.13 gloo dumps
(tests/data/flight_recorder/) run through a real Snakemake campaign, import -> same-host
calibration -> merge -> ingest -> search; the config schema's rules for the kind."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
import yaml
from conftest import REPO, run_snakemake

from tracecanary.errors import SchemaError
from tracecanary.formats.schemas import validate

DATA = REPO / "tests" / "data" / "flight_recorder"


def _config(source: dict) -> dict:
    return {"campaign": "fr", "sources": [{"id": "job", **source}]}


@pytest.mark.slow
def test_flight_recorder_source_runs_import_calibration_merge_ingest_and_search(tmp_path):
    workdir = tmp_path
    (workdir / "dumps").mkdir()
    (workdir / "config").mkdir()
    for name in ("rank0.pkl", "rank1.pkl"):
        shutil.copy(DATA / name, workdir / "dumps" / name)
    for name in ("backends.yaml", "tolerances.yaml"):
        (workdir / "config" / name).write_bytes((REPO / "config" / name).read_bytes())
    config = {
        **_config(
            {
                "kind": "flight_recorder",
                "dumps": ["dumps/rank0.pkl", "dumps/rank1.pkl"],
                "declare_root": 0,
                "declare_even_all_to_all": True,
                "same_host": True,
            }
        ),
        "backends": "config/backends.yaml",
        "tolerances": "config/tolerances.yaml",
        "compile": {"budgets": ["8us"]},
        "search": {"budgets": "0,8,64"},
    }
    (workdir / "config" / "fr.yaml").write_text(yaml.safe_dump(config))
    targets = [
        "results/fr/provenance/merge/job.json",
        "results/fr/provenance/same_host_calibration/job.json",
        "results/fr/search/job/canary.json",
    ]
    run = run_snakemake(workdir, "--cores", "1", *targets, configfile="config/fr.yaml")
    assert run.returncode == 0, run.stderr[-3000:]
    imported = sorted(
        p.name for p in (workdir / "results/fr/flight_recorder_import/job").glob("rank*")
    )
    assert imported == ["rank0.json", "rank1.json"]
    calibration = json.loads((workdir / "results/fr/calibration/job.json").read_text())
    assert calibration["method"] == "same-host" and calibration["clocks"][0]["ranks"] == [0, 1]
    lines = gzip.decompress((workdir / "results/fr/merge/job.jsonl.gz").read_bytes())
    header, *events = (json.loads(line) for line in lines.splitlines())
    assert header["meta"]["skew"]["status"] == "known"
    assert len(events) == 26
    assert (workdir / "results/fr/search/job/canary.json").is_file()
    prov = json.loads(
        (workdir / "results/fr/provenance/import_flight_recorder/job.json").read_text()
    )
    assert prov["predicate"]["deterministic"] is True


def test_config_accepts_a_flight_recorder_source_with_dumps_and_a_clock():
    source = {"kind": "flight_recorder", "dumps": ["a/rank0.pkl"], "same_host": True}
    validate(_config(source), "config", file="fr.yaml")
    declared = {"declare_root": 0, "declare_even_all_to_all": True}
    validate(_config({**source, **declared}), "config", file="fr.yaml")


@pytest.mark.parametrize(
    "source",
    [
        {"kind": "flight_recorder", "same_host": True},  # no dumps
        {"kind": "flight_recorder", "dumps": ["a/rank0.pkl"]},  # no clock statement
        {"kind": "kineto", "traces": ["t0.json"], "dumps": ["d0"], "same_host": True},
        {"kind": "kineto", "traces": ["t0.json"], "declare_root": 0, "same_host": True},
        {
            "kind": "kineto",
            "traces": ["t0.json"],
            "declare_even_all_to_all": True,
            "same_host": True,
        },
    ],
)
def test_config_refuses_a_flight_recorder_source_without_its_fields_or_them_elsewhere(source):
    with pytest.raises(SchemaError):
        validate(_config(source), "config", file="fr.yaml")
