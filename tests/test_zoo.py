"""The workload zoo, captured live here (``tracecanary capture --workload NAME``, 4 gloo
ranks, short runs): every workload's traces import and merge with every group known,
and carry the collectives its PyTorch code path issues."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest

from tracecanary.formats.schemas import validate

pytestmark = pytest.mark.slow

SHORT_STEPS = {"ddp": 2, "fsdp2_tp": 2, "tp_decode": 3, "pp": 2}


def _capture_and_merge(name: str, tmp_path, run_cli) -> tuple[dict, list[dict]]:
    out = tmp_path / name
    code, stdout, err = run_cli(
        "capture", "--workload", name, "--steps", SHORT_STEPS[name], "-o", out
    )
    assert code == 0, err
    assert "groups settled" in stdout
    capture = json.loads((out / "capture.json").read_text())
    validate(capture, "capture", file="capture.json")
    assert capture["settings"]["workload"] == name
    assert capture["import_check"]["unknown_groups"] == 0
    traces = sorted(out.glob("rank*.json.gz"))
    assert len(traces) == 4
    imported = tmp_path / f"{name}-import"
    assert run_cli("import-kineto", *traces, "-o", imported)[0] == 0
    calibration = tmp_path / "same-host.json"
    calibration.write_text(
        json.dumps(
            {
                "format": "tracecanary.calibration/v1",
                "reference": "host",
                "method": "same-host",
                "clocks": [
                    {"ranks": [0, 1, 2, 3], "offset_ns": 0, "drift_ppb": 0, "uncertainty_ns": 0}
                ],
            }
        )
    )
    merged = tmp_path / f"{name}.jsonl.gz"
    captures = sorted(imported.glob("rank*.json"))
    code, _, err = run_cli("merge", *captures, "--calibration", calibration, "-o", merged)
    assert code == 0, err
    header, *events = (json.loads(x) for x in gzip.decompress(merged.read_bytes()).splitlines())
    assert not any(e["group"].startswith("unknown:") for e in events)
    return header, events


def test_ddp_workload_all_reduces_gradient_buckets_over_the_world(tmp_path, run_cli):
    header, events = _capture_and_merge("ddp", tmp_path, run_cli)
    world = [g["id"] for g in header["groups"] if g["ranks"] == [0, 1, 2, 3]]
    steady = [e for e in events if e["op"] == "all_reduce" and e["rank"] == 0]
    assert steady and {e["group"] for e in steady} <= set(world)
    sizes = Counter(e["bytes"] for e in steady)
    assert len(sizes) >= 2  # several gradient buckets of distinct sizes per step


def test_fsdp2_tp_workload_shards_over_dp_and_reduces_over_tp(tmp_path, run_cli):
    header, events = _capture_and_merge("fsdp2_tp", tmp_path, run_cli)
    ranks = {g["id"]: g["ranks"] for g in header["groups"]}
    for e in events:
        if e["op"] in ("all_gather", "reduce_scatter"):
            assert ranks[e["group"]] in ([0, 2], [1, 3]), e
        else:
            assert e["op"] == "all_reduce" and ranks[e["group"]] in ([0, 1], [2, 3]), e


def test_tp_decode_workload_issues_per_token_tensor_parallel_collectives(tmp_path, run_cli):
    _, events = _capture_and_merge("tp_decode", tmp_path, run_cli)
    rank0 = Counter(e["op"] for e in events if e["rank"] == 0)
    forwards = 1 + SHORT_STEPS["tp_decode"]  # prefill + decode tokens
    assert rank0 == {"all_reduce": 2 * 2 * forwards, "all_gather": forwards}


def test_pp_workload_hands_activations_between_stages_by_send_recv(tmp_path, run_cli):
    _, events = _capture_and_merge("pp", tmp_path, run_cli)
    pairs = {(e["rank"], e["peer"]) for e in events if e["op"] == "send"}
    assert {(0, 1), (1, 2), (2, 3)} <= pairs  # forward activations
    assert {(3, 2), (2, 1), (1, 0)} <= pairs  # backward gradients


@pytest.mark.parametrize("name", ["ddp", "tp_decode", "pp"])
def test_a_world_spanning_workload_runs_on_two_ranks_a_cpu_each_and_reports_its_noise(
    name, tmp_path, run_cli
):
    import os

    from tracecanary.zoo.programs import WORKLOADS

    out = tmp_path / name
    code, stdout, err = run_cli(
        "capture", "--workload", name, "--nproc", 2, "--steps", SHORT_STEPS[name], "-o", out
    )
    assert code == 0, err
    capture = json.loads((out / "capture.json").read_text())
    validate(capture, "capture", file="capture.json")
    assert capture["settings"]["nproc"] == 2
    assert sorted(p.name for p in out.glob("rank*.json.gz")) == ["rank0.json.gz", "rank1.json.gz"]
    assert capture["layout"] == WORKLOADS[name].layout_on(2)
    assert capture["layout"]["groups"] == [{"desc": "default_pg", "ranks": [0, 1]}]
    cpus = sorted(os.sched_getaffinity(0))
    assert capture["settings"]["cpus_per_rank"] == [[c] for c in cpus[:2]]
    noise = capture["noise"]
    assert noise["signatures"] >= 1 and noise["latency_cv_median"] >= 0
    assert f"median {noise['latency_cv_median']}" in stdout
    from tracecanary.campaign.summary import capture_noise_section

    row = f"| {name} | {name} | 2 | yes | {noise['latency_cv_median']} |"
    assert any(line.startswith(row) for line in capture_noise_section([out]))


def test_a_workload_is_refused_on_a_world_size_it_cannot_run_on(tmp_path, run_cli):
    code, _, err = run_cli("capture", "--workload", "fsdp2_tp", "--nproc", 2, "-o", tmp_path / "x")
    assert code == 2
    assert "fsdp2_tp runs on 4 ranks, not 2" in err
    assert not (tmp_path / "x").exists()
