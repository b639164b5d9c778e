"""A real Snakemake run of a tiny campaign in a temporary directory."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from conftest import REPO

from tracecanary.canonical import sha256_file, write_json
from tracecanary.synth.decode import DecodeSpec, build_decode
from tracecanary.trace_io import write_trace


def _tiny_campaign(workdir):
    docs, calibration = build_decode(DecodeSpec(events_per_rank=300))
    captures = []
    for rank, doc in enumerate(docs):
        path = workdir / "resources" / f"rank{rank}.jsonl.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_trace(doc, path)
        captures.append(f"resources/rank{rank}.jsonl.gz")
    write_json(workdir / "resources" / "calibration.json", calibration)
    config = {
        "campaign": "tiny",
        "sources": [
            {
                "id": "decode",
                "kind": "captures",
                "captures": captures,
                "calibration": "resources/calibration.json",
            }
        ],
    }
    (workdir / "config").mkdir()
    (workdir / "config" / "tiny.yaml").write_text(yaml.safe_dump(config))


def _snakemake(workdir, *extra):
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        "config/tiny.yaml",
        "--cores",
        "1",
        "--quiet",
        *extra,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=workdir)


@pytest.mark.slow
def test_tiny_campaign_runs_and_manifest_lists_every_artifact_with_its_digest(tmp_path):
    _tiny_campaign(tmp_path)
    run = _snakemake(tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    manifest = json.loads((tmp_path / "results/tiny/manifest.json").read_text())
    derived = {d["path"]: d for d in manifest["derived"]}
    assert {"results/tiny/ingest/decode.parquet", "results/tiny/merge/decode.jsonl.gz"} <= set(
        derived
    )
    for path, item in derived.items():
        assert sha256_file(tmp_path / path) == item["sha256"]
        store = tmp_path / "results/cas/sha256" / item["sha256"][:2] / item["sha256"][2:]
        assert store.is_file()
    evidence = {e["path"] for e in manifest["evidence"]}
    assert "resources/calibration.json" in evidence and "config/tiny.yaml" in evidence
    prov = json.loads((tmp_path / "results/tiny/provenance/ingest/decode.json").read_text())
    assert prov["_type"] == "https://in-toto.io/Statement/v1"
    assert prov["predicate"]["deterministic"] is True
    assert {"tracecanary", "python", "numpy", "pandas", "pyarrow", "snakemake"} <= set(
        prov["predicate"]["versions"]
    )
    assert prov["subject"][0]["digest"]["sha256"] == derived[prov["subject"][0]["name"]]["sha256"]
