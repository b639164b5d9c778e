"""One machine's ranks forked from one interpreter (``physical.local_ranks``), through the
launcher every single-node physical run uses (``physical.launch.launch``): each rank a
process of its own with torchrun's variables; the first failure stops the peers and is
named with its exit code, as torchrun names it. Real processes, no torch.distributed (the
physical replay tests run real gloo through the same path)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tracecanary.physical.launch import Topology, launch

TESTS = Path(__file__).resolve().parent


def probes_alive() -> list[int]:
    """The pids of processes still running this probe (none once a launch returned)."""
    alive = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and b"local_rank_probe" in (proc / "cmdline").read_bytes():
                if (proc / "stat").read_text().split(")")[-1].split()[0] != "Z":
                    alive.append(int(proc.name))
        except OSError:
            continue
    return alive


def run(tmp_path, *args: str, nproc: int = 3, timeout_s: float = 60):
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}
    started = time.monotonic()
    result = launch(list(args), Topology(nproc=nproc), tmp_path / "staging",
                    timeout_s=timeout_s, env=env, module="local_rank_probe")  # fmt: skip
    return result, time.monotonic() - started


def test_every_rank_is_its_own_process_with_torchruns_variables_and_torch_already_imported(
    tmp_path,
):
    result, _ = run(tmp_path, "env", str(tmp_path))
    assert result.returncode == 0 and not result.timed_out, result.log
    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(3)]
    assert len({r["pid"] for r in records}) == 3
    assert all(r["torch"] for r in records)  # preloaded before the fork: not imported per rank
    for rank, record in enumerate(records):
        assert record["RANK"] == record["LOCAL_RANK"] == str(rank)
        assert record["WORLD_SIZE"] == record["LOCAL_WORLD_SIZE"] == "3"
        assert record["MASTER_ADDR"] == "127.0.0.1" and int(record["MASTER_PORT"]) > 0
        assert record["GROUP_RANK"] == "0" and record["TORCHELASTIC_MAX_RESTARTS"] == "0"
    assert len({r["MASTER_PORT"] for r in records}) == 1


@pytest.mark.parametrize(
    ("args", "code"),
    [(("exit", "1", "86"), 86), (("signal", "2"), -9), (("raise", "0"), 1)],
    ids=["exit-code", "killed-by-a-signal", "exception"],
)
def test_a_failed_rank_stops_its_peers_and_is_named_with_its_exit_code(tmp_path, args, code):
    result, took = run(tmp_path, *args)
    rank = int(args[1])
    assert result.returncode == 1 and not result.ok and not result.timed_out
    assert took < 60  # the peers sleep 120 s: they were stopped, not waited for
    assert result.reason.startswith(f"rank {rank} exited with code {code}"), result.reason
    assert result.reason.count("exited with code") == 1  # the stopped peers are not failures
    assert probes_alive() == []
    if args[0] == "raise":
        assert "RuntimeError: rank 0 was told to raise" in result.log


def test_a_rank_that_never_ends_is_killed_with_its_peers_at_the_timeout(tmp_path):
    result, took = run(tmp_path, "exit", "9", "0", nproc=2, timeout_s=3)  # no rank 9: all wait
    assert result.timed_out and not result.ok
    assert took < 30
    assert result.reason.startswith("timeout after 3 s")
    assert probes_alive() == []
