"""A physical campaign without hand-chosen ladders: rule sweep_derived derives, per physical
source, the ladders its exports' replays use (derive-ladders) and sweeps them, and
calibrate_backends prices both programs from them (real Snakemake, real gloo). A ladder the
user lists in physical.sweeps overrides the derived one."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import REPO, make_tiny_campaign, run_snakemake

from tracecanary.synth.decode import DecodeSpec

SPEC = DecodeSpec(events_per_rank=120, layers=2, hidden=1024, requests=1, prompt_tokens=512,
                  tail_windows=1, ranks=2, ranks_per_host=1)  # fmt: skip


def _campaign(tmp_path, **physical):
    make_tiny_campaign(tmp_path, with_alphabeta=False, spec=SPEC)
    config_file = tmp_path / "config" / "tiny.yaml"
    config = yaml.safe_load(config_file.read_text())
    config["physical"] = {
        "sources": ["decode"], "configs": ["native"], "nproc": SPEC.ranks, "repetitions": 1,
        "warmup": 0, "iters": 1, "timeout": 300,
        "derive_sweeps": {"warmup": 0, "iters": 1, "cycles": 1}, **physical,
    }  # fmt: skip
    config_file.write_text(yaml.safe_dump(config))
    (tmp_path / "config" / "physical.yaml").write_bytes(
        (REPO / "config/physical.yaml").read_bytes()
    )
    return tmp_path


@pytest.mark.slow
def test_campaign_derives_its_ladders_from_the_exports_and_calibrates_from_them(tmp_path):
    workdir = _campaign(tmp_path)
    target = "results/tiny/backends/decode/calibrated.yaml"
    run = run_snakemake(workdir, "--nolock", target)
    assert run.returncode == 0, run.stderr[-3000:]
    derived = workdir / "results/tiny/sweeps_derived/decode"
    doc = json.loads((derived / "ladders.json").read_text())
    keys = {(x["collective"], x["dtype"]) for x in doc["ladders"]}
    # the decode program's collectives (synth.decode): bf16 all_reduce / all_gather, int64 broadcast
    assert keys == {("all_reduce", "bfloat16"), ("all_gather", "bfloat16"), ("broadcast", "int64")}
    for ladder in doc["ladders"]:
        attempt = json.loads((derived / ladder["id"] / "attempt.json").read_text())
        assert attempt["kind"] == "sweep" and attempt["status"] == "complete"
    backends = yaml.safe_load((workdir / target).read_text())
    curves = backends["configs"]["native"]["measured"]["costs"]
    assert {(c["collective"], c["dtype"]) for c in curves} == keys
    prov = json.loads((workdir / "results/tiny/provenance/sweep_derived/decode.json").read_text())
    assert prov["predicate"]["deterministic"] is False  # swept ladders are evidence


@pytest.mark.slow
def test_a_listed_ladder_overrides_the_derived_one(tmp_path):
    listed = {"id": "mine", "collective": "broadcast", "dtype": "int64", "min_bytes": 8,
              "max_bytes": "1K", "factor": 4, "warmup": 0, "iters": 1, "cycles": 1}  # fmt: skip
    workdir = _campaign(tmp_path, sweeps=[listed])
    target = "results/tiny/sweeps_derived/decode"
    run = run_snakemake(workdir, "--nolock", target)
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads((workdir / target / "ladders.json").read_text())
    assert doc["covered"] == [["broadcast", "int64", 2]]
    assert {x["collective"] for x in doc["ladders"]} == {"all_reduce", "all_gather"}
