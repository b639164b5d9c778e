"""Campaign sources of ``kind: captures`` with ``calibration: derived``: a real Snakemake run
derives the clocks from the captures' own happens-before order (calibrate.smk ->
calibrate-clocks) and merges through that calibration, with no clock measurement given."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
import yaml
from conftest import REPO, run_snakemake

pytestmark = pytest.mark.slow


def test_derived_calibration_source_merges_with_known_skew_and_the_true_offsets_inside(tmp_path):
    captures = sorted((REPO / "resources" / "decode-small").glob("rank*.jsonl.gz"))
    (tmp_path / "captures").mkdir()
    for path in captures:
        shutil.copy(path, tmp_path / "captures" / path.name)
    (tmp_path / "config").mkdir()
    for name in ("backends.yaml", "tolerances.yaml"):
        shutil.copy(REPO / "config" / name, tmp_path / "config" / name)
    config = {
        "campaign": "dc",
        "sources": [
            {
                "id": "small",
                "kind": "captures",
                "captures": [f"captures/{p.name}" for p in captures],
                "calibration": "derived",
            }
        ],
        "backends": "config/backends.yaml",
        "tolerances": "config/tolerances.yaml",
        "compile": {"budgets": ["8us"]},
        "search": {"budgets": "0,8,64"},
    }
    (tmp_path / "config" / "dc.yaml").write_text(yaml.safe_dump(config))
    targets = ["results/dc/provenance/merge/small.json"]
    run = run_snakemake(tmp_path, "--cores", "1", *targets, configfile="config/dc.yaml")
    assert run.returncode == 0, run.stderr[-3000:]

    derived = json.loads((tmp_path / "results/dc/calibration/derived/small.json").read_text())
    assert derived["format"] == "tracecanary.calibration/v1"
    assert derived["method"] == "derived-causality"
    truth = json.loads((REPO / "resources" / "decode-small" / "calibration.json").read_text())
    true_offset = {c["clock"]: c["offset_ns"] for c in truth["clocks"]}
    for clock in derived["clocks"]:
        low, high = clock["offset_interval_ns"]
        assert low <= true_offset[clock["clock"]] <= high, clock
    with gzip.open(tmp_path / "results/dc/merge/small.jsonl.gz", "rt") as f:
        header = json.loads(f.readline())
    assert header["meta"]["skew"]["status"] == "known"
    assert (tmp_path / "results/dc/provenance/calibrate_clocks/small.json").is_file()
