"""Campaign sources of ``kind: kineto``: per-rank PyTorch profiler traces of an ordinary
TP x DP gloo program (captured here, 4 ranks) run through a real Snakemake campaign,
import -> same-host calibration -> merge (groups resolved across ranks) -> ingest ->
search; raw Kineto given where native captures belong is refused naming the kind."""

from __future__ import annotations

import gzip
import json

import pytest
import yaml
from conftest import REPO, run_snakemake
from gloo_programs import capture_program

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def kineto_workdir(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("kineto-campaign")
    traces = capture_program("tp_dp", workdir / "resources" / "kineto")
    (workdir / "config").mkdir()
    for name in ("backends.yaml", "tolerances.yaml"):
        (workdir / "config" / name).write_bytes((REPO / "config" / name).read_bytes())
    config = {
        "campaign": "kt",
        "sources": [
            {
                "id": "tpdp",
                "kind": "kineto",
                "traces": [str(t.relative_to(workdir)) for t in traces],
                "same_host": True,
            }
        ],
        "backends": "config/backends.yaml",
        "tolerances": "config/tolerances.yaml",
        "compile": {"budgets": ["8us"]},
        "search": {"budgets": "0,8,64"},
    }
    (workdir / "config" / "kt.yaml").write_text(yaml.safe_dump(config))
    return workdir, traces


def test_kineto_source_runs_import_calibration_merge_ingest_and_search_in_snakemake(
    kineto_workdir,
):
    workdir, _ = kineto_workdir
    targets = [
        "results/kt/provenance/merge/tpdp.json",
        "results/kt/provenance/same_host_calibration/tpdp.json",
        "results/kt/search/tpdp/canary.json",
    ]
    # an option before the targets ends --quiet's optional list
    run = run_snakemake(workdir, "--cores", "1", *targets, configfile="config/kt.yaml")
    assert run.returncode == 0, run.stderr[-3000:]
    calibration = json.loads((workdir / "results/kt/calibration/tpdp.json").read_text())
    assert calibration["method"] == "same-host"
    assert "same_host: true" in calibration["notes"][0]
    assert calibration["clocks"][0]["ranks"] == [0, 1, 2, 3]
    imported = sorted(p.name for p in (workdir / "results/kt/kineto_import/tpdp").glob("rank*"))
    assert imported == [f"rank{r}.json" for r in range(4)]
    lines = gzip.decompress((workdir / "results/kt/merge/tpdp.jsonl.gz").read_bytes())
    header, *events = (json.loads(line) for line in lines.splitlines())
    assert header["meta"]["skew"]["status"] == "known"
    assert not any(e["group"].startswith("unknown:") for e in events)
    notes = " ".join(header["meta"]["notes"])
    assert "resolved at merge by cross-rank matching" in notes and "same-host" in notes
    assert (workdir / "results/kt/search/tpdp/canary.json").is_file()
    prov = json.loads(
        (workdir / "results/kt/provenance/import_kineto_traces/tpdp.json").read_text()
    )
    assert prov["predicate"]["deterministic"] is True


def test_raw_kineto_given_as_captures_is_refused_naming_the_kind(kineto_workdir, run_cli):
    workdir, traces = kineto_workdir
    out = workdir / "raw-merged.json"
    code, _, err = run_cli("merge", *traces, "-o", out)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "rank0.json" in err and "kind: kineto" in err and "Traceback" not in err
    assert not out.exists()
