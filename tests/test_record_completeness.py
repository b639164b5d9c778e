"""Real torch.distributed programs recorded unmodified (``tracecanary capture -- CMD``):
DDP, tensor parallel x FSDP2 (DTensor), pipelining; every operation a gloo group ran is
recorded or the recording is refused (``tracecanary.record_completeness``)."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import REPO

from tracecanary.errors import InputError
from tracecanary.record import broadcast_buckets, record
from tracecanary.record_completeness import (
    GroupState,
    IncompleteRecording,
    compare,
    gloo_operations,
)

CLI = [sys.executable, "-m", "tracecanary"]
USER_PROGRAMS = REPO / "examples" / "user_programs"

_PROGRAM = '''"""{doc}"""
import os, sys
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = {world}


def work(rank, world, port, steps):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    for _ in range(steps):
        {step}
    {after}
    dist.destroy_process_group()


if __name__ == "__main__":
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(work, args=(WORLD, port, int(sys.argv[1])), nprocs=WORLD)
'''
LIST_REDUCE_SCATTER_PROGRAM = _PROGRAM.format(
    doc="A reduce_scatter of a list of tensors, which gloo runs as one reduce per member.",
    world=4,
    step="dist.reduce_scatter(torch.empty(4), [torch.ones(4) for _ in range(world)]); "
    "dist.all_reduce(torch.ones(8))",
    after="pass",
)
UNSEEN_PROGRAM = _PROGRAM.format(
    doc="A collective the recorder cannot see (monitored_barrier) after recorded ones.",
    world=2,
    step="dist.all_reduce(torch.ones(8))",
    after="dist.monitored_barrier()",
)


def _capture(tmp_path, program: str, steps: int) -> subprocess.CompletedProcess:
    """``tracecanary capture`` of ``program``: a file of ``examples/user_programs`` or
    the source of a program (``_PROGRAM``)."""
    if program.endswith(".py"):
        source = USER_PROGRAMS / program
    else:
        source = tmp_path / "user_program.py"
        source.write_text(program)
    cmd = [sys.executable, str(source), str(steps)]
    return subprocess.run(
        [*CLI, "capture", "-o", str(tmp_path / "out"), "--timeout", "240", "--", *cmd],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _events(out_dir) -> list[dict]:
    with gzip.open(out_dir / "merged.jsonl.gz", "rt") as lines:
        return [json.loads(line) for line in list(lines)[1:]]


@pytest.mark.slow
def test_a_ddp_program_records_every_gradient_bucket_and_names_ddps_unsized_startup(tmp_path):
    steps = 5
    run = _capture(tmp_path, "ddp_train.py", steps)
    assert run.returncode == 0, run.stderr[-3000:]
    rank0 = json.loads((tmp_path / "out" / "rank0.json").read_text())
    events = rank0["events"]
    parameter_bytes = 16 * (64 * 64 + 64) * 4
    all_reduced = sum(e["bytes"] for e in events if e["op"] == "all_reduce")
    assert all_reduced == steps * parameter_bytes  # every gradient, once per step
    first = events[0]  # DDP's parameter sync at construction, one coalesced bucket
    assert (first["op"], first["bytes"], first["root"]) == ("broadcast", parameter_bytes, 0)
    notes = " ".join(rank0["meta"]["notes"])
    assert "completeness: every operation the gloo backend numbered on every group" in notes
    summary = json.loads((tmp_path / "out" / "capture.json").read_text())["completeness"]
    assert len(summary) == 3 and all(f"  {note}" in run.stdout for note in summary)
    assert "run by DDP's parameter-shape check at construction" in notes
    assert "run by DDP's bucket-order sync after its first iteration" in notes


@pytest.mark.slow
def test_a_tensor_parallel_x_fsdp2_program_is_recorded_completely(tmp_path):
    run = _capture(tmp_path, "tp_fsdp2_train.py", 2)
    assert run.returncode == 0, run.stderr[-3000:]
    events = _events(tmp_path / "out")
    merged = json.loads(gzip.open(tmp_path / "out" / "merged.jsonl.gz", "rt").readline())
    sizes = {g["id"]: len(g["ranks"]) for g in merged["groups"]}
    by_op = Counter((e["op"], sizes[e["group"]]) for e in events)
    # TP (groups of 2): the row-parallel outputs' all_reduce (functional collectives) and
    # the parameter distribution (scatter of shards, broadcast of replicated biases);
    # DP (groups of 2): FSDP2's all_gather and reduce_scatter
    for op in ("all_reduce", "all_gather", "reduce_scatter", "custom:scatter", "broadcast"):
        assert by_op[(op, 2)] > 0, by_op
    table = tmp_path / "t.parquet"
    ingest = subprocess.run(
        [*CLI, "ingest", str(tmp_path / "out" / "merged.jsonl.gz"), "-o", str(table)],
        capture_output=True,
        text=True,
    )
    assert ingest.returncode == 0, ingest.stderr


@pytest.mark.slow
def test_a_pipelining_program_is_recorded_completely(tmp_path):
    run = _capture(tmp_path, "pipeline_train.py", 2)
    assert run.returncode == 0, run.stderr[-3000:]
    ops = Counter(e["op"] for e in _events(tmp_path / "out"))
    # 2 steps x 4 microbatches, forward activations and backward gradients
    assert ops["send"] >= 16 and ops["send"] == ops["recv"]


@pytest.mark.slow
def test_a_list_reduce_scatter_is_counted_as_gloo_runs_it_and_the_capture_passes(tmp_path):
    run = _capture(tmp_path, LIST_REDUCE_SCATTER_PROGRAM, 3)
    assert run.returncode == 0, run.stderr[-3000:]
    ops = Counter(e["op"] for e in _events(tmp_path / "out"))
    assert ops["reduce_scatter"] == ops["all_reduce"] == 3 * 4


@pytest.mark.slow
def test_a_collective_the_recorder_cannot_see_refuses_the_capture_and_leaves_nothing(tmp_path):
    run = _capture(tmp_path, UNSEEN_PROGRAM, 3)
    assert run.returncode == 2
    line = run.stderr.strip().splitlines()[-1]
    assert "field completeness" in line
    assert "group world: the backend ran" in line and "the recording saw 3" in line
    assert "import-kineto" in line
    assert not (tmp_path / "out").exists()
    kept = Path(line.split("the per-rank recordings are kept in ", 1)[1].split()[0])
    try:  # what each rank did record, beside its reason (issue 41 item 8)
        refused = sorted(p.name for p in kept.glob("rank*.refused.txt"))
        incomplete = sorted(p.name for p in kept.glob("rank*.incomplete.json"))
        assert refused and incomplete == [
            n.replace(".refused.txt", ".incomplete.json") for n in refused
        ]
        assert json.loads((kept / "rank0.incomplete.json").read_text())["events"]
    finally:
        shutil.rmtree(kept)


def test_a_function_held_from_before_recording_is_caught_and_nothing_is_written(
    single_rank_world, tmp_path
):
    import torch

    held = single_rank_world.all_reduce  # a local: no module binding to replace
    with pytest.raises(
        IncompleteRecording, match="the backend ran 2 operations, the recording saw 1"
    ):
        with record(tmp_path / "out"):
            single_rank_world.all_reduce(torch.ones(2))
            held(torch.ones(2))
    assert not (tmp_path / "out").exists()
    assert issubclass(IncompleteRecording, InputError)  # exit 2 from the CLI


def test_a_module_level_name_bound_before_recording_is_recorded(single_rank_world, tmp_path):
    import types

    import torch

    user_module = types.ModuleType("tracecanary_test_user_module")
    user_module.all_reduce = single_rank_world.all_reduce  # from torch.distributed import ...
    sys.modules[user_module.__name__] = user_module
    try:
        with record(tmp_path / "out"):
            user_module.all_reduce(torch.ones(3))
        assert user_module.all_reduce is single_rank_world.all_reduce  # restored
    finally:
        del sys.modules[user_module.__name__]
    doc = json.loads((tmp_path / "out" / "rank0.json").read_text())
    assert [(e["op"], e["bytes"]) for e in doc["events"]] == [("all_reduce", 12)]


def test_broadcast_buckets_split_by_dtype_and_size_ordered_by_first_tensor():
    import torch

    tensors = [
        torch.zeros(4),  # float32, 16 B
        torch.zeros(2, dtype=torch.int64),  # 16 B
        torch.zeros(8),  # 32 B: the float32 bucket reaches 48 >= 40 and closes
        torch.zeros(1),
    ]
    assert broadcast_buckets(tensors, 40) == [[0, 2], [1], [3]]
    assert broadcast_buckets(tensors, 1 << 20) == [[0, 2, 3], [1]]


def test_a_list_reduce_scatter_counts_one_gloo_operation_per_member():
    assert gloo_operations("reduce_scatter", "reduce_scatter", 4) == 4
    assert gloo_operations("reduce_scatter", "reduce_scatter_tensor", 4) == 1
    assert gloo_operations("all_reduce", "all_reduce", 4) == 1


def test_groups_on_other_backends_or_destroyed_are_named_unchecked_never_counted_as_checked():
    world, nccl, gone = object(), object(), object()
    start = {
        world: GroupState("world", "gloo", 10),
        nccl: GroupState("pg:1", "nccl", 0),
        gone: GroupState("pg:2", "gloo", 3),
    }
    end = {world: GroupState("world", "gloo", 14), nccl: GroupState("pg:1", "nccl", 99)}
    differences, unchecked = compare(start, end, Counter({world: 4, nccl: 1}))
    assert differences == []
    assert unchecked == ["pg:1 (nccl)", "pg:2 (destroyed before the end)"]
    differences, _ = compare(start, end, Counter({world: 3}))
    assert differences == ["group world: the backend ran 4 operations, the recording saw 3"]
