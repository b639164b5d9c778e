"""The recording API (tracecanary.record) inside real torch.distributed gloo programs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tracecanary.cli import main
from tracecanary.errors import InputError
from tracecanary.kineto.sources import write_same_host_calibration
from tracecanary.record import RECORDED_CALLS, record

USER_PROGRAM = textwrap.dedent(
    '''
    """A user's own 4-process gloo program, recorded with tracecanary.record."""
    import os, socket, sys

    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp

    from tracecanary.record import record


    def step(rank, world, pair):
        x = torch.ones(1024) * rank
        dist.broadcast(x, src=0)
        dist.all_reduce(x)
        dist.all_gather([torch.empty(256) for _ in range(world)], torch.ones(256))
        dist.reduce_scatter_single(
            torch.empty(128, dtype=torch.bfloat16), torch.ones(128 * world, dtype=torch.bfloat16)
        )
        dist.all_reduce(torch.ones(64, dtype=torch.int64), group=pair)
        if rank % 2 == 0:
            dist.send(torch.ones(32), dst=rank + 1)
        else:
            dist.recv(torch.empty(32), src=rank - 1)
        dist.all_reduce(torch.ones(16), async_op=True).wait()


    def worker(rank, world, port, out):
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world)
        pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])]
        pair = pairs[rank // 2]
        with record(os.path.join(out, "context")) as rec:
            with rec.phase("prefill"):
                step(rank, world, pair)
            with rec.phase("decode"):
                for _ in range(3):
                    step(rank, world, pair)
            dist.barrier()

        @record(os.path.join(out, "decorated"), phase="train")
        def train_step():
            step(rank, world, pair)

        train_step()
        dist.destroy_process_group()


    if __name__ == "__main__":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.spawn(worker, args=(4, port, sys.argv[1]), nprocs=4, join=True)
    '''
)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    work = tmp_path_factory.mktemp("record")
    program = work / "user_program.py"
    program.write_text(USER_PROGRAM)
    run = subprocess.run(
        [sys.executable, str(program), str(work / "out")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return work / "out"


def _merge_and_ingest(capture_dir, tmp_path):
    calibration = tmp_path / "calibration.json"
    write_same_host_calibration(capture_dir, calibration)
    captures = sorted(str(p) for p in capture_dir.glob("rank*.json"))
    merged, table = tmp_path / "merged.jsonl.gz", tmp_path / "t.parquet"
    assert main(["merge", *captures, "--calibration", str(calibration), "-o", str(merged)]) == 0
    assert main(["ingest", str(merged), "-o", str(table)]) == 0
    return table


@pytest.mark.slow
def test_a_recorded_4_rank_gloo_program_merges_and_ingests_with_same_host_calibration(
    recorded, tmp_path
):
    from tracecanary.load import load_program

    table = _merge_and_ingest(recorded / "context", tmp_path)
    sidecar = json.loads(table.with_suffix(".meta.json").read_text())
    assert sidecar["skew"]["status"] == "known" and sidecar["skew"]["method"] == "same-host"
    program = load_program(table)
    occ = program.occurrences
    # per step: broadcast, all_reduce, all_gather, reduce_scatter, 2 pair all_reduces,
    # 2 send/recv pairs, async all_reduce; 4 steps and one barrier
    assert program.n == 4 * 9 + 1
    assert occ.groupby("phase").size().to_dict() == {"": 1, "decode": 27, "prefill": 9}
    assert set(occ["op"]) == {
        "broadcast", "all_reduce", "all_gather", "reduce_scatter", "send", "barrier",
    }  # fmt: skip
    assert set(occ["group"]) >= {"world", "pg:1", "pg:2", "p2p:0->1", "p2p:2->3"}


@pytest.mark.slow
def test_recorded_events_follow_the_nccl_tests_byte_convention_and_declare_the_clock(recorded):
    doc = json.loads((recorded / "context" / "rank1.json").read_text())
    domain = doc["meta"]["clock_domains"][0]
    assert domain["ranks"] == [1] and domain["clock"] == "CLOCK_MONOTONIC" and domain["host"]
    first = {e["op"]: e for e in reversed(doc["events"])}
    assert first["broadcast"]["bytes"] == 4096 and first["broadcast"]["root"] == 0
    assert first["all_gather"]["bytes"] == 4 * 256 * 4  # the gathered output
    assert first["reduce_scatter"]["bytes"] == 128 * 4 * 2  # the input, bfloat16
    assert first["recv"]["peer"] == 0 and first["recv"]["bytes"] == 128
    world_all_reduces = [e for e in doc["events"] if e["op"] == "all_reduce" and e["bytes"] == 64]
    assert world_all_reduces and all("latency_ns" not in e for e in world_all_reduces)  # async
    assert all(e["latency_ns"] >= 0 for e in doc["events"] if e["op"] == "broadcast")
    assert [e["seq"] for e in doc["events"]] == list(range(len(doc["events"])))


@pytest.mark.slow
def test_a_decorated_function_is_one_recording_that_merges(recorded, tmp_path):
    table = _merge_and_ingest(recorded / "decorated", tmp_path)
    assert table.is_file()
    doc = json.loads((recorded / "decorated" / "rank0.json").read_text())
    assert {e["phase"] for e in doc["events"]} == {"train"} and len(doc["events"]) == 7  # one step


def test_record_restores_every_wrapped_function_on_exit(single_rank_world, tmp_path):
    import torch

    dist = single_rank_world
    before = {name: getattr(dist, name, None) for name in RECORDED_CALLS}
    with record(tmp_path / "out"):
        assert dist.all_reduce is not before["all_reduce"]
        dist.all_reduce(torch.ones(4))
    assert {name: getattr(dist, name, None) for name in RECORDED_CALLS} == before
    doc = json.loads((tmp_path / "out" / "rank0.json").read_text())
    assert [(e["op"], e["bytes"], e["dtype"]) for e in doc["events"]] == [
        ("all_reduce", 16, "float32")
    ]


def test_an_exception_inside_restores_and_leaves_no_capture(single_rank_world, tmp_path):
    import torch

    dist = single_rank_world
    original = dist.broadcast
    with pytest.raises(RuntimeError, match="user failure"):
        with record(tmp_path / "out"):
            dist.broadcast(torch.ones(2), src=0)
            raise RuntimeError("user failure")
    assert dist.broadcast is original
    assert not (tmp_path / "out" / "rank0.json").exists()


def test_a_dtype_outside_the_vocabulary_is_refused_before_the_collective(
    single_rank_world, tmp_path
):
    import torch

    dist = single_rank_world
    with pytest.raises(InputError, match="complex64"):
        with record(tmp_path / "out"):
            dist.all_reduce(torch.ones(2, dtype=torch.complex64))


def test_nested_recordings_are_refused(single_rank_world, tmp_path):
    with record(tmp_path / "a"):
        with pytest.raises(InputError, match="already active"):
            with record(tmp_path / "b"):
                pass


def test_record_refuses_an_uninitialized_process_group(tmp_path):
    with pytest.raises(InputError, match="not initialized"):
        with record(tmp_path / "out"):
            pass
    assert not (tmp_path / "out").exists()
