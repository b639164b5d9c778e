"""Rank placement: CPU ranks pinned to one core each where the node has a core per rank,
torch's intra-op threads fixed to 1, and the record in the attempt's environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tracecanary.cli import main


def _place(local_rank: int, local_world_size: int) -> dict:
    """place_rank in a child process (it changes the calling process's affinity)."""
    code = (
        "import json; from tracecanary.physical.environment import place_rank; "
        f"print(json.dumps(place_rank({local_rank}, {local_world_size})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_rank_is_pinned_to_its_own_core_when_the_node_has_a_core_per_rank():
    allowed = sorted(os.sched_getaffinity(0))
    record = _place(len(allowed) - 1, len(allowed))
    assert record == {
        "pinned": True,
        "cpu_affinity": [allowed[-1]],
        "torch_threads": 1,
        "reason": None,
    }


def test_oversubscribed_ranks_are_left_to_the_os_and_say_why():
    allowed = sorted(os.sched_getaffinity(0))
    record = _place(0, len(allowed) + 2)
    assert record["pinned"] is False and record["cpu_affinity"] == allowed
    assert record["reason"] == f"{len(allowed) + 2} ranks on {len(allowed)} cores: not pinned"
    assert record["torch_threads"] == 1


def test_sweep_environment_records_each_rank_placement(tmp_path):
    out = tmp_path / "ladder"
    argv = ["sweep", "--collective", "all_reduce", "--min-bytes", "1K", "--max-bytes", "1K"]
    argv += ["--warmup", "0", "--iters", "1", "--backend", "gloo", "--nproc", "2", "-o", str(out)]
    assert main(argv) == 0
    ranks = json.loads((out / "environment.json").read_text())["ranks"]
    assert [r["placement"]["torch_threads"] for r in ranks] == [1, 1]
    for r in ranks:
        p = r["placement"]
        assert p["pinned"] == (p["reason"] is None)
