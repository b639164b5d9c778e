"""Real physical replays: torch.distributed (gloo), 2 processes, on this host.

One small program (every op kind, send/recv pairs both ways, a second world-sized
group and a subgroup) replayed in every mode with its data checked; a corrupted
contribution, a killed rank and a hung rank each give a failed archive and exit 1; a
two-"node" run on localhost exercises the multi-node (static rendezvous) path.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path

import jsonschema
import numpy as np
import pyarrow.parquet as pq
import pytest

from tracecanary.cli import main
from tracecanary.formats.schemas import load_schema
from tracecanary.param.program import load_program_dir
from tracecanary.physical.launch import Topology
from tracecanary.physical.rank_contract import KILL_EXIT_CODE, REPLAY_ROW_SCHEMA
from tracecanary.physical.replay import replay_physical
from tracecanary.physical.samples import sample_program, write_program

pytestmark = pytest.mark.slow

ITERS = 2
TIMESTAMP_GAP_NS = 20_000_000


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    return write_program(tmp_path_factory.mktemp("prog") / "param", sample_program(2))


@pytest.fixture(scope="module")
def timed_program(tmp_path_factory) -> Path:
    """The sample program with 20 ms between consecutive ops (for --use-timestamps)."""
    files = sample_program(2)
    for entries in files:
        ops = [e for e in entries if e["comms"] != "init"]
        starts = sorted({e["startTime_ns"] for e in ops})
        for e in ops:
            e["startTime_ns"] = starts.index(e["startTime_ns"]) * TIMESTAMP_GAP_NS
    return write_program(tmp_path_factory.mktemp("timed") / "param", files)


def replay(program: Path, out: Path, capsys, *extra: str) -> tuple[int, str]:
    argv = ["replay-physical", str(program), "--backend", "gloo", "--nproc", "2"]
    argv += ["--warmup", "1", "--iters", str(ITERS), "--timeout", "240", "-o", str(out)]
    code = main([*argv, *extra])
    return code, capsys.readouterr().err


def read_archive(out: Path, rows_file: str = "rows.parquet"):
    attempt = json.loads((out / "attempt.json").read_text())
    jsonschema.validate(attempt, load_schema("attempt"))
    environment = json.loads((out / "environment.json").read_text())
    jsonschema.validate(environment, load_schema("environment"))
    rows = pq.read_table(out / rows_file)
    return attempt, environment, rows


def assert_no_worker_alive(environment: dict) -> None:
    for r in environment["ranks"]:
        cmdline = Path(f"/proc/{r['pid']}/cmdline")
        if cmdline.exists():
            assert b"tracecanary.physical.worker" not in cmdline.read_bytes(), r["pid"]


def assert_issued_on_schedule(program: Path, rows) -> None:
    """Each op started no earlier than its startTime_ns after its pass began."""
    for (rank, _), g in rows.groupby(["rank", "iteration"]):
        entries = json.loads((program / f"{rank}.json").read_text())
        scheduled = np.array([entries[e]["startTime_ns"] for e in g["entry"]])
        actual = g["start_ns"].to_numpy() - g["start_ns"].to_numpy()[0]
        # never issued before its time (the first op may itself start up to 5 ms late)
        assert (actual >= scheduled - scheduled[0] - 5_000_000).all()
        assert actual[-1] >= scheduled[-1] - scheduled[0] - 5_000_000 > 400_000_000


@pytest.mark.parametrize("config", ["native+timestamps", "decomposed", "chunked4", "fused64k"])
def test_replay_checks_every_op_kind_in_every_mode(
    program, timed_program, tmp_path, capsys, config
):
    out = tmp_path / "attempt"
    timed = config.endswith("+timestamps")
    config = config.removesuffix("+timestamps")
    extra = ["--use-timestamps"] if timed else []
    code, err = replay(
        timed_program if timed else program, out, capsys, "--physical-config", config, *extra
    )
    assert code == 0, err
    attempt, environment, table = read_archive(out)
    assert attempt["use_timestamps"] is timed
    assert attempt["status"] == "complete" and attempt["reason"] is None
    assert attempt["physical_config"]["name"] == config
    assert attempt["physical_config"]["mode"] == config.rstrip("0123456789k")
    assert table.schema.names == REPLAY_ROW_SCHEMA.names
    assert table.schema.equals(REPLAY_ROW_SCHEMA)
    rows = table.to_pandas()
    assert rows["correct"].all()
    assert attempt["correctness"] == {"checked_rows": len(rows), "incorrect_rows": 0}

    programs = load_program_dir(program)
    for rank, prog in enumerate(programs):
        executed = prog.executed()
        mine = rows[rows["rank"] == rank]
        assert len(mine) == ITERS * len(executed)
        for it in range(ITERS):
            assert list(mine[mine["iteration"] == it]["entry"]) == list(executed["entry"])
    assert set(rows["op"]) == {
        "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "all_to_allv",
        "broadcast", "reduce", "barrier", "send", "recv",
    }  # fmt: skip
    assert set(rows[rows["pg_id"] == 2]["rank"]) == {1}  # the subgroup {1}
    sends = rows[(rows["op"] == "send") & (rows["iteration"] == 0)]
    recvs = rows[(rows["op"] == "recv") & (rows["iteration"] == 0)]
    assert sorted(sends["occ"]) == sorted(recvs["occ"]) and set(sends["rank"]) == {0, 1}
    assert (rows["latency_ns"] == rows["end_ns"] - rows["start_ns"]).all()
    assert (rows["latency_ns"] >= 0).all() and (rows["start_ns"] > 0).all()

    decode = rows[rows["phase"] == "decode"]
    assert set(decode[decode["op"] == "all_reduce"]["weight"]) == {4.0}
    if config == "fused64k":
        fused = rows[rows["fused_bucket"] >= 0]
        assert len(fused) == 2 * ITERS * 8  # the 8 consecutive small all_reduces, 2 ranks
        for (_, _, bucket), b in fused.groupby(["rank", "iteration", "fused_bucket"]):
            assert bucket == b["occ"].min()
            spans = b.sort_values("start_ns")
            # consecutive shares of one bucket's time
            assert (spans["start_ns"].to_numpy()[1:] == spans["end_ns"].to_numpy()[:-1]).all()
    else:
        assert (rows["fused_bucket"] == -1).all()
    if timed:
        assert_issued_on_schedule(timed_program, rows)

    assert environment["backend"] == "gloo" and environment["missing_ranks"] == []
    assert [r["rank"] for r in environment["ranks"]] == [0, 1]
    assert environment["hosts"] == [socket.gethostname()]
    assert all(r["device"]["type"] == "cpu" for r in environment["ranks"])
    assert environment["tracecanary"]["version"]
    assert attempt["input"]["digest"] and attempt["files"]["rows.parquet"]
    assert "[tracecanary] replay: pass 2/2" in err  # progress lines on stderr
    assert not list(tmp_path.glob(".attempt.staging-*"))


def test_corrupted_contribution_is_detected_and_the_attempt_fails(program, tmp_path, capsys):
    out = tmp_path / "attempt"
    code, err = replay(program, out, capsys, "--fault", "corrupt-rank=1")
    assert code == 1
    assert len([line for line in err.splitlines() if "error:" in line]) == 1
    attempt, _, table = read_archive(out)
    assert attempt["status"] == "failed" and attempt["fault"] == "corrupt-rank=1"
    assert "data correctness check failed" in attempt["reason"]
    rows = table.to_pandas()
    assert attempt["correctness"]["incorrect_rows"] == int((~rows["correct"]).sum()) > 0

    def verdict(op, rank, pg=0):
        sel = rows[(rows["op"] == op) & (rows["rank"] == rank) & (rows["pg_id"] == pg)]
        return set(sel["correct"])

    # rank 1's bad payload travels through the real collective to both ranks
    assert verdict("all_reduce", 0) == {False} and verdict("all_reduce", 1) == {False}
    assert verdict("all_gather", 0) == {False}
    assert verdict("recv", 0, pg=-1) == {False}  # rank 0 receives rank 1's corrupted send
    assert verdict("recv", 1, pg=-1) == {True}  # rank 0 sent clean data
    assert verdict("reduce", 0) == {False}  # root 0 sums rank 1's contribution
    assert verdict("barrier", 0) == {True}


def test_killed_rank_gives_a_failed_archive_with_partial_rows(program, tmp_path, capsys):
    out = tmp_path / "attempt"
    code, err = replay(program, out, capsys, "--fault", "kill-rank=1", "--iters", "3")
    assert code == 1 and "attempt failed" in err
    attempt, environment, table = read_archive(out, "partial/rows.parquet")
    assert attempt["status"] == "failed" and attempt["rows_file"] == "partial/rows.parquet"
    assert f"rank 1 exited with code {KILL_EXIT_CODE}" in attempt["reason"]
    assert not (out / "rows.parquet").exists()
    rows = table.to_pandas()
    # the kill came halfway through the last pass: the two earlier passes survive
    assert sorted(set(rows["iteration"])) == [0, 1] and set(rows["rank"]) == {0, 1}
    assert attempt["rows"] == len(rows) and rows["correct"].all()
    assert "launch.log" in attempt["files"]
    assert_no_worker_alive(environment)
    assert not list(tmp_path.glob(".attempt.staging-*"))


def test_hung_rank_is_killed_at_the_timeout(program, tmp_path, capsys):
    out = tmp_path / "attempt"
    code, err = replay(program, out, capsys, "--fault", "hang-rank=1", "--timeout", "10")
    assert code == 1
    attempt = json.loads((out / "attempt.json").read_text())
    jsonschema.validate(attempt, load_schema("attempt"))
    environment = json.loads((out / "environment.json").read_text())
    assert attempt["status"] == "failed" and "timeout after 10 s" in attempt["reason"]
    assert attempt["rows_file"] in ("partial/rows.parquet", None)
    assert_no_worker_alive(environment)
    assert not list(tmp_path.glob(".attempt.staging-*"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_nodes_with_static_rendezvous_assemble_one_archive(program, tmp_path):
    out = tmp_path / "attempt"
    endpoint = f"127.0.0.1:{_free_port()}"
    results: dict[int, object] = {}

    def node(rank: int) -> None:
        topology = Topology(nproc=1, nnodes=2, node_rank=rank, rdzv_endpoint=endpoint)
        try:
            results[rank] = replay_physical(
                program,
                out,
                backend="gloo",
                topology=topology,
                warmup=1,
                iters=ITERS,
                configs_path=Path(__file__).resolve().parents[1] / "config" / "physical.yaml",
                timeout_s=240,
            )
        except Exception as err:  # noqa: BLE001 - reported by the assertion below
            results[rank] = err

    threads = [threading.Thread(target=node, args=(r,)) for r in (1, 0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert results[1] is None  # node 1 runs its ranks; node 0 assembles
    attempt = results[0]
    assert isinstance(attempt, dict), attempt
    assert attempt["status"] == "complete" and attempt["nnodes"] == 2 and attempt["nproc"] == 1
    _, environment, table = read_archive(out)
    assert set(table.column("rank").to_pylist()) == {0, 1}
    assert all(table.column("correct").to_pylist())
    assert [r["local_rank"] for r in environment["ranks"]] == [0, 0]
    assert environment["ranks"][1]["env"]["WORLD_SIZE"] == "2"
    assert not list(tmp_path.glob(".attempt.staging-*"))
    assert os.listdir(tmp_path) == ["attempt"]
