"""Cluster submission on a real SLURM: Snakemake's executor runs a 2-node, 4-rank replay,
and the campaign's per-rank jobs of a scattered capture set land on both nodes.

The cluster test installs Debian's slurm-wlm and munge when missing, starts a private
munge and a two-node Slurm cluster on localhost (tests/slurm/start-local-slurm.sh), runs
tests/slurm/Snakefile with ``snakemake --executor slurm --workflow-profile
workflow/profiles/slurm-local`` and checks the attempt archive the SLURM job wrote. It is
skipped with the reason where Slurm cannot be installed or started; every daemon it
started is stopped by PID in the fixture's teardown. The launcher's own refusals
(tracecanary.physical.slurm_launch) are checked without a cluster.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tracecanary.physical import slurm_launch

REPO = Path(__file__).resolve().parents[1]
SLURM_DIR = REPO / "tests" / "slurm"
PROFILE = REPO / "workflow" / "profiles" / "slurm-local"
INSTALL_TIMEOUT_S = 600
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 180
SNAKEMAKE_TIMEOUT_S = 600

STEP_ENV = {
    "SLURM_JOB_ID": "41",
    "SLURM_STEP_ID": "0",
    "SLURM_NODEID": "1",
    "SLURM_STEP_NUM_NODES": "2",
    "SLURM_STEP_NUM_TASKS": "2",
    "SLURM_STEP_NODELIST": "n[1-2]",
    "SLURMD_NODENAME": "n2",
}
REPLAY = ["replay-physical", "prog", "--nproc", "2", "-o", "out"]


# ---- the launcher's contract, no cluster needed ----


def test_slurm_launch_reads_node_rank_and_node_count_from_the_step():
    step = slurm_launch.step_from_env(STEP_ENV)
    assert (step.job_id, step.step_id, step.node_rank, step.nnodes) == (41, 0, 1, 2)
    assert step.nodename == "n2"
    args = slurm_launch.rendezvous_args(step, "10.0.0.5", 20123)
    assert args == [
        "--nnodes",
        "2",
        "--node-rank",
        "1",
        "--rdzv-endpoint",
        "10.0.0.5:20123",
        "--rdzv-id",
        "slurm-41.0",
    ]


def test_slurm_launch_port_is_the_same_on_every_node_and_differs_between_steps():
    port = slurm_launch.rendezvous_port(41, 0)
    assert port == slurm_launch.rendezvous_port(41, 0)
    assert slurm_launch.RDZV_PORT_BASE <= port < slurm_launch.RDZV_PORT_BASE + 10000
    assert len({slurm_launch.rendezvous_port(j, s) for j in range(40, 50) for s in range(3)}) == 30


@pytest.mark.parametrize(
    ("env_change", "field"),
    [
        ({"SLURM_JOB_ID": None}, "SLURM_JOB_ID"),
        ({"SLURM_NODEID": "x"}, "SLURM_NODEID"),
        ({"SLURM_NODEID": "2"}, "SLURM_NODEID"),
        ({"SLURM_STEP_NUM_TASKS": "4"}, "SLURM_STEP_NUM_TASKS"),
        ({"SLURM_STEP_NODELIST": ""}, "SLURM_STEP_NODELIST"),
    ],
)
def test_slurm_launch_refuses_outside_a_one_task_per_node_step(tmp_path, capsys, env_change, field):
    env = {k: v for k, v in {**STEP_ENV, **env_change}.items() if v is not None}
    out = tmp_path / "out"
    code = slurm_launch.main(
        ["replay-physical", str(tmp_path), "--nproc", "2", "-o", str(out)], environ=env
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and f"field {field}" in err[0]
    assert not out.exists()


@pytest.mark.parametrize("option", ["--node-rank", "--nnodes=3", "--rdzv-endpoint", "--rdzv-id"])
def test_slurm_launch_refuses_a_command_that_sets_its_own_rendezvous(capsys, option):
    code = slurm_launch.main([*REPLAY, option, "1"], environ=STEP_ENV)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and f"field {option.split('=')[0]}" in err[0]


def test_slurm_launch_refuses_an_empty_command(capsys):
    assert slurm_launch.main([], environ=STEP_ENV) == 2
    assert "field COMMAND" in capsys.readouterr().err


# ---- the real cluster ----


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    """A private munge + 2-node Slurm cluster on localhost; stopped by PID afterwards."""
    if sys.platform != "linux":
        pytest.skip("the local Slurm cluster needs Linux")
    install = subprocess.run(
        [str(SLURM_DIR / "install-slurm.sh")],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
    )
    if install.returncode != 0:
        pytest.skip(f"Slurm cannot be installed here: {_last_line(install.stderr)}")
    state = tmp_path_factory.mktemp("slurm-state")
    ctld, n1, n2 = _free_ports(3)
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "TC_SLURMCTLD_PORT": str(ctld),
        "TC_SLURMD1_PORT": str(n1),
        "TC_SLURMD2_PORT": str(n2),
    }
    try:
        start = subprocess.run(
            [str(SLURM_DIR / "start-local-slurm.sh"), str(state)],
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
            env=env,
        )
        if start.returncode != 0:
            pytest.skip(
                f"local Slurm cluster did not start (exit {start.returncode}): "
                f"{_last_line(start.stderr)}"
            )
        yield state
    finally:
        subprocess.run(
            [str(SLURM_DIR / "stop-local-slurm.sh"), str(state)],
            capture_output=True,
            text=True,
            timeout=STOP_TIMEOUT_S,
            env=env,
        )


def four_rank_trace() -> dict:
    """4 ranks on one clock: world collectives, a node-local subgroup, a cross-node p2p pair."""
    events, seq = [], dict.fromkeys(range(4), 0)

    def add(rank: int, **event) -> None:
        t_ns = 1_000 + 10_000 * seq[rank]
        events.append({"rank": rank, "seq": seq[rank], "ts_ns": t_ns, "phase": "decode", **event})
        seq[rank] += 1

    for _step in range(2):
        for r in range(4):
            add(r, op="all_reduce", bytes=8192, dtype="float32", group="world")
        for r in range(4):
            add(r, op="all_gather", bytes=2048, dtype="bfloat16", group="world")
        for r in range(4):
            add(r, op="broadcast", bytes=256, dtype="int64", group="world", root=0)
        for r in (0, 1):
            add(r, op="all_reduce", bytes=1024, dtype="float32", group="pair0")
        add(1, op="send", bytes=512, dtype="float32", group="world", peer=2)
        add(2, op="recv", bytes=512, dtype="float32", group="world", peer=1)
    events.sort(key=lambda e: (e["rank"], e["seq"]))
    return {
        "format": "tracecanary.trace/v1",
        "meta": {
            "world_size": 4,
            "source": "tests/test_slurm_cluster.py four_rank_trace",
            "clock_domains": [{"id": "h", "ranks": [0, 1, 2, 3]}],
        },
        "groups": [
            {"id": "world", "ranks": [0, 1, 2, 3]},
            {"id": "pair0", "ranks": [0, 1]},
        ],
        "events": events,
    }


@pytest.mark.slurm
@pytest.mark.slow
def test_snakemake_slurm_executor_runs_a_two_node_four_rank_replay(slurm_cluster, tmp_path):
    workdir = tmp_path / "wf"
    workdir.mkdir()
    (workdir / "trace.json").write_text(json.dumps(four_rank_trace()))
    t0 = time.monotonic()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(SLURM_DIR / "Snakefile"),
            "-d",
            str(workdir),
            "--config",
            "trace=trace.json",
            "--executor",
            "slurm",
            "--workflow-profile",
            str(PROFILE),
        ],
        capture_output=True,
        text=True,
        timeout=SNAKEMAKE_TIMEOUT_S,
        cwd=REPO,
    )
    wall_s = time.monotonic() - t0
    print(f"snakemake --executor slurm, 2 nodes x 2 ranks: {wall_s:.1f} s wall")
    log = workdir / "logs" / "replay_physical" / "canary" / "native.log"
    assert run.returncode == 0, run.stderr[-4000:] + (
        log.read_text()[-2000:] if log.exists() else ""
    )

    archive = workdir / "results" / "physical" / "canary" / "native"
    attempt = json.loads((archive / "attempt.json").read_text())
    env = json.loads((archive / "environment.json").read_text())
    assert attempt["status"] == "complete", attempt["reason"]
    assert (attempt["nnodes"], attempt["nproc"], attempt["world_size"]) == (2, 2, 4)
    assert attempt["correctness"]["checked_rows"] > 0
    assert attempt["correctness"]["incorrect_rows"] == 0
    # two distinct Slurm nodes, static rendezvous: ranks 0-1 on the step's first node
    assert env["slurm_nodes"] == ["n1", "n2"]
    nodes = {r["rank"]: r["slurmd_nodename"] for r in env["ranks"]}
    assert nodes == {0: "n1", 1: "n1", 2: "n2", 3: "n2"}
    job_ids = {r["env"].get("SLURM_JOB_ID") for r in env["ranks"]}
    assert len(job_ids) == 1 and None not in job_ids

    # the job really went through the scheduler as one 2-node allocation
    (job_id,) = job_ids
    state = subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T %D %N"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout.split()
    assert state == ["COMPLETED", "2", "n[1-2]"]
    launcher_lines = [ln for ln in log.read_text().splitlines() if ln.startswith("slurm_launch:")]
    assert len(launcher_lines) == 2
    assert {ln.split(" node ")[1].split()[0] for ln in launcher_lines} == {"n1", "n2"}


def scattered_capture_campaign(workdir: Path) -> str:
    """config/scatter.yaml: a 4-rank decode capture set (one file per rank) checked one
    SLURM job per rank file (scatter.rank_files_per_job: 1), gathered by merge."""
    from tracecanary.canonical import write_json
    from tracecanary.synth.decode import DecodeSpec, build_decode
    from tracecanary.trace_io import write_trace

    docs, calibration = build_decode(DecodeSpec(events_per_rank=300))
    (workdir / "config").mkdir(parents=True)
    captures = []
    for rank, doc in enumerate(docs):
        write_trace(doc, workdir / "resources" / f"rank{rank}.jsonl.gz")
        captures.append(f"resources/rank{rank}.jsonl.gz")
    write_json(workdir / "resources" / "calibration.json", calibration)
    for name in ("backends.yaml", "tolerances.yaml"):
        (workdir / "config" / name).write_bytes((REPO / "config" / name).read_bytes())
    config = {
        "campaign": "sc",
        "sources": [
            {
                "id": "decode",
                "kind": "captures",
                "captures": captures,
                "calibration": "resources/calibration.json",
            }
        ],
        "scatter": {"rank_files_per_job": 1},
    }
    (workdir / "config" / "scatter.yaml").write_text(json.dumps(config))
    return "config/scatter.yaml"


@pytest.mark.slurm
@pytest.mark.slow
def test_snakemake_slurm_executor_spreads_a_scattered_capture_set_over_both_nodes(
    slurm_cluster, tmp_path
):
    workdir = tmp_path / "wf"
    configfile = scattered_capture_campaign(workdir)
    # the gather (merge) is the end of the scatter under test; ingest after it would add
    # one more scheduler round trip (~12 s) and check nothing about spreading the blocks
    target = "results/sc/merge/decode.jsonl.gz"
    t0 = time.monotonic()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(REPO / "Snakefile"),
            "-d",
            str(workdir),
            "--configfile",
            configfile,
            "--executor",
            "slurm",
            "--workflow-profile",
            str(PROFILE),
            target,
        ],
        capture_output=True,
        text=True,
        timeout=SNAKEMAKE_TIMEOUT_S,
        cwd=workdir,
    )
    print(f"snakemake --executor slurm, 4 per-rank jobs: {time.monotonic() - t0:.1f} s wall")
    assert run.returncode == 0, run.stderr[-4000:]
    assert (workdir / target).is_file()

    # each rank file was checked by its own SLURM job; the job's log names its node
    logs = workdir / "logs/sc/ingest_capture_block/decode"
    log_nodes = {}
    for block in range(4):
        lines = (logs / f"block{block}.log").read_text().splitlines()
        (line,) = [ln for ln in lines if ln.startswith("ingest_capture_block:")]
        assert line.startswith("ingest_capture_block: 1 rank file(s) checked on node ")
        log_nodes[block] = line.rsplit(" ", 1)[1]
    assert set(log_nodes.values()) == {"n1", "n2"}, log_nodes

    # the scheduler agrees: the executor's per-job SLURM logs are named by job id
    slurm_logs = workdir / ".snakemake/slurm_logs/rule_ingest_capture_block"
    job_ids = sorted(p.stem for p in slurm_logs.rglob("*.log"))
    assert len(job_ids) == 4
    sched_nodes = set()
    for job_id in job_ids:
        state = subprocess.run(
            ["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T %N"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.split()
        assert state[0] == "COMPLETED", (job_id, state)
        sched_nodes.add(state[1])
    assert sched_nodes == {"n1", "n2"}
