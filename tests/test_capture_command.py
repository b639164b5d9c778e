"""``tracecanary capture -o DIR -- CMD...``: a user's unmodified torch.distributed program
(no tracecanary import in it) run with recording active, its rank captures merged."""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import sys
import textwrap

import pytest

from tracecanary.formats.schemas import validate

CLI = [sys.executable, "-m", "tracecanary"]

USER_PROGRAM = textwrap.dedent(
    '''
    """A user's own 2-process gloo program: it imports nothing of tracecanary."""
    import sys

    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp


    def work(rank, world, port):
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
        )
        x = torch.ones(256)
        for _ in range(3):
            dist.all_reduce(x)
            dist.broadcast(x, src=0)
        if rank == 0:
            dist.send(x, dst=1)
        else:
            dist.recv(x, src=0)
        dist.barrier()
        dist.destroy_process_group()


    if __name__ == "__main__":
        mp.spawn(work, args=(2, int(sys.argv[1])), nprocs=2)
    '''
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_capture_records_a_users_two_process_gloo_program_and_merges_it(tmp_path):
    program = tmp_path / "user_prog.py"
    program.write_text(USER_PROGRAM)
    assert "import tracecanary" not in USER_PROGRAM and "from tracecanary" not in USER_PROGRAM
    out = tmp_path / "out"
    run = subprocess.run(
        [
            *CLI,
            "capture",
            "-o",
            out,
            "--timeout",
            "120",
            "--",
            sys.executable,
            program,
            str(_free_port()),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "capture.json",
        "merged.jsonl.gz",
        "rank0.json",
        "rank1.json",
    ]
    doc = json.loads((out / "capture.json").read_text())
    validate(doc, "recorded-run", file="capture.json")
    header, *lines = gzip.decompress((out / "merged.jsonl.gz").read_bytes()).splitlines()
    events = [json.loads(line) for line in lines]
    assert json.loads(header)["meta"]["world_size"] == 2
    ops = [e["op"] for e in events if e["rank"] == 0]
    assert ops == ["all_reduce", "broadcast"] * 3 + ["send", "barrier"]
    assert {e["bytes"] for e in events if e["op"] == "all_reduce"} == {1024}
    assert doc["merged"]["collectives"] == 8 and doc["merged"]["skew"]["status"] == "known"


def test_capture_of_a_failing_command_exits_1_and_keeps_nothing(tmp_path, run_cli):
    out = tmp_path / "out"
    code, _, err = run_cli(
        "capture", "-o", out, "--", sys.executable, "-c", "import sys; sys.exit('boom')"
    )
    assert code == 1
    assert "the command exited 1" in err and "boom" in err
    assert not out.exists()


def test_capture_of_a_command_without_collectives_says_it_recorded_none(tmp_path, run_cli):
    out = tmp_path / "out"
    code, _, err = run_cli("capture", "-o", out, "--", sys.executable, "-c", "print('hi')")
    assert code == 1
    assert "recorded no collectives" in err and "init_process_group" in err
    assert not out.exists()


def test_capture_refuses_a_workload_together_with_a_command(tmp_path, run_cli):
    code, _, err = run_cli(
        "capture", "-o", tmp_path / "o", "--workload", "ddp", "--", sys.executable, "-c", "1"
    )
    assert code == 2 and "exclude each other" in err
