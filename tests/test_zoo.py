"""The workload zoo, captured live here (``tracecanary capture --workload NAME``, 4 gloo
ranks, short runs): every workload's traces import and merge with every group known,
and carry the collectives its PyTorch code path issues."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from tracecanary.formats.schemas import validate

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

SHORT_STEPS = {"ddp": 2, "fsdp2_tp": 2, "tp_decode": 3, "pp": 2, "moe": 3}


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


def test_moe_workload_dispatches_by_all_to_allv_read_from_its_kineto_traces(tmp_path, run_cli):
    """The Kineto import reads each all_to_all_single's split sizes (the c10d op's
    Concrete Inputs: gloo writes no record_param_comms); merge settles the expert- and
    data-parallel groups (an all_to_allv's bytes differ by design: not compared) and
    checks the splits across ranks; the merged trace searches to a verified canary,
    exports as all_to_allv and replays on 4 gloo ranks with every row correct, and in
    upstream PARAM where its snapshot is present."""
    header, events = _capture_and_merge("moe", tmp_path, run_cli)
    ranks = {g["id"]: g["ranks"] for g in header["groups"]}
    rank0 = [e for e in events if e["rank"] == 0]
    # counts, dispatch, combine, 2 in backward; 4 expert gradients over dp, 2 router ones
    per_step = ["all_to_all"] * 5 + ["all_reduce"] * 6
    assert [e["op"] for e in rank0] == per_step * SHORT_STEPS["moe"]
    assert {ranks[e["group"]][-1] for e in rank0 if e["op"] == "all_to_all"} == {1}  # ep [0, 1]
    assert [ranks[e["group"]] for e in rank0 if e["op"] == "all_reduce"][:6] == (
        [[0, 2]] * 4 + [[0, 1, 2, 3]] * 2
    )
    uneven = [e for e in rank0 if "send_splits" in e]
    assert len(uneven) == 4 * SHORT_STEPS["moe"]
    assert all(sum(e["send_splits"]) * 4 == e["bytes"] for e in uneven)
    dispatches = [tuple(e["send_splits"]) for e in uneven[::4]]
    assert len(set(dispatches)) > 1  # routing changes the splits from step to step
    merged = tmp_path / "moe.jsonl.gz"
    backends = REPO / "config" / "backends.yaml"
    canary, log = tmp_path / "canary.json", tmp_path / "search.json"
    code, _, err = run_cli(
        "search", merged, "--budgets", "0,2,8", "--backends", backends, "-o", canary, "--log", log
    )
    assert code == 0, err
    export = tmp_path / "export"
    assert run_cli("export-param", canary, "-o", export)[0] == 0
    entries = json.loads((export / "0.json").read_text())
    assert sum(e["comms"] == "all_to_allv" for e in entries) >= 4
    attempt = tmp_path / "attempt"
    code, _, err = run_cli(
        "replay-physical", export, "--backend", "gloo", "--nproc", "4", "--iters", "1",
        "--warmup", "1", "-o", attempt,
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads((attempt / "attempt.json").read_text())
    assert doc["status"] == "complete" and doc["correctness"]["incorrect_rows"] == 0
    param = REPO.parent / "shared" / "param_upstream"
    if not (param / "train/comms/pt/commsTraceReplay.py").is_file():
        return  # upstream PARAM is optional evidence (tests/test_param_upstream.py)
    upstream = tmp_path / "upstream"
    target = ["--target", "param-1e115ff"]
    assert run_cli("export-param", canary, "-o", upstream, *target)[0] == 0
    code, _, err = run_cli(
        "replay-param", upstream, "--param", param, "--nproc", "4", "--iters", "1",
        "-o", tmp_path / "upstream-attempt",
    )  # fmt: skip
    assert code == 0, err
    rows = json.loads((tmp_path / "upstream-attempt" / "attempt.json").read_text())
    assert rows["status"] == "complete"
