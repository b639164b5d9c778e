"""A real Snakemake run of a tiny campaign in a temporary directory."""

from __future__ import annotations

import json

import pytest

from tracecanary.canonical import digest_path


@pytest.mark.slow
def test_tiny_campaign_runs_and_manifest_lists_every_artifact_with_its_digest(tiny_campaign):
    tmp_path = tiny_campaign
    manifest = json.loads((tmp_path / "results/tiny/manifest.json").read_text())
    derived = {d["path"]: d for d in manifest["derived"]}
    assert {"results/tiny/ingest/decode.parquet", "results/tiny/merge/decode.jsonl.gz"} <= set(
        derived
    )
    for path, item in derived.items():
        assert digest_path(tmp_path / path) == item["sha256"]
        store = tmp_path / "results/cas/sha256" / item["sha256"][:2] / item["sha256"][2:]
        assert store.exists() and digest_path(store) == item["sha256"]
    evidence = {e["path"] for e in manifest["evidence"]}
    assert "resources/calibration.json" in evidence and "config/tiny.yaml" in evidence
    prov = json.loads((tmp_path / "results/tiny/provenance/ingest/decode.json").read_text())
    assert prov["_type"] == "https://in-toto.io/Statement/v1"
    assert prov["predicate"]["deterministic"] is True
    assert {"tracecanary", "python", "numpy", "pandas", "pyarrow", "snakemake"} <= set(
        prov["predicate"]["versions"]
    )
    assert prov["subject"][0]["digest"]["sha256"] == derived[prov["subject"][0]["name"]]["sha256"]
