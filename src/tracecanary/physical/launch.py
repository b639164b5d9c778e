"""Launch the worker on this node's ranks with a timeout, and tell success from failure.

One machine: ``python -m tracecanary.physical.local_ranks``, which imports torch once and
forks the N ranks with the variables torchrun sets (torchrun imports torch in its own
process and again in every rank: seconds each, see that module). Several: every node runs
``torchrun --nproc-per-node N --nnodes M --node-rank k --rdzv-endpoint HOST:PORT`` (torchrun's
static rendezvous: global rank = k * N + local rank, so ranks map to nodes
deterministically and node 0, which holds rank 0, assembles the archive). Under SLURM
that is one ``tracecanary`` task per node with ``--node-rank $SLURM_NODEID``
(``tracecanary.physical.slurm_launch`` does this); the staging directory (beside the
output) must then be on a file system every node sees.

Guarantees: the launcher (local_ranks, or torchrun with ``--max-restarts 0``) runs in its
own process group; one rank failing stops its peers; when the timeout expires the group
gets SIGTERM, then SIGKILL, and any worker still alive (pids recorded by the workers
themselves, verified by command line) is killed too. The result says ``ok`` only when the
launcher exited 0 AND (on the assembling node) every rank wrote its ``done.json``. Worker
progress lines (``[tracecanary] ...``) are echoed to the given stream; everything the
launcher and the workers print is kept as ``launch.log`` evidence.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from tracecanary.physical.rank_contract import PROGRESS_PREFIX
from tracecanary.ports import free_local_port

KILL_GRACE_S = 5.0
WORKER_MODULE = "tracecanary.physical.worker"  # the rank program launch() runs by default


@dataclass(frozen=True)
class Topology:
    """How many ranks run where (``node_rank`` and ``rdzv_endpoint`` needed when nnodes > 1;
    ``rdzv_id`` names the shared staging directory, default: the endpoint)."""

    nproc: int
    nnodes: int = 1
    node_rank: int | None = None
    rdzv_endpoint: str | None = None
    rdzv_id: str | None = None

    @property
    def world_size(self) -> int:
        return self.nproc * self.nnodes

    @property
    def multi_node(self) -> bool:
        return self.nnodes > 1

    @property
    def assembles(self) -> bool:
        """Whether this node assembles the archive (standalone, or node rank 0)."""
        return not self.multi_node or self.node_rank == 0


@dataclass
class LaunchResult:
    ok: bool
    reason: str | None
    returncode: int | None
    timed_out: bool
    wall_time_ns: int
    log: str
    done_ranks: list[int] = field(default_factory=list)
    failed_ranks: dict[int, str] = field(default_factory=dict)


def launcher_command(
    topology: Topology, worker_args: list[str], module: str = WORKER_MODULE
) -> list[str]:
    """The command that runs this node's ranks: ``local_ranks`` on one machine, torchrun
    with static rendezvous across several."""
    if topology.multi_node:
        return torchrun_command(topology, worker_args, module)
    return [
        sys.executable,
        "-m",
        "tracecanary.physical.local_ranks",
        "--nproc",
        str(topology.nproc),
        "--port",
        str(free_local_port()),
        module,
        *worker_args,
    ]


def torchrun_command(
    topology: Topology, worker_args: list[str], module: str = WORKER_MODULE
) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        str(topology.nproc),
        "--max-restarts",
        "0",
        "--monitor-interval",
        "0.2",
    ]
    if not topology.multi_node:
        cmd += ["--standalone"]
    else:
        cmd += [
            "--nnodes",
            str(topology.nnodes),
            "--node-rank",
            str(topology.node_rank),
            "--rdzv-backend",
            "static",
            "--rdzv-endpoint",
            str(topology.rdzv_endpoint),
        ]
    return cmd + ["-m", module, *worker_args]


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, grace in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, KILL_GRACE_S)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _kill_leftover_workers(staging: Path, module: str = WORKER_MODULE) -> None:
    """SIGKILL workers that outlived torchrun (they run in their own sessions)."""
    for env_file in staging.glob("rank*/env.json"):
        try:
            pid = int(json.loads(env_file.read_text(encoding="utf-8"))["pid"])
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError, KeyError):
            continue
        if module.encode() in cmdline:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


_EXITCODE = re.compile(r"rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)", re.S)


def _exit_codes_from_log(log: str) -> dict[int, int]:
    """The failed ranks' exit codes: local_ranks' ``[local_ranks] rank : R exitcode : C``
    lines, or torchrun's failure summary (``rank : R (local_rank ...)`` then ``exitcode : C``)."""
    codes: dict[int, int] = {}
    for block in log.split("[")[1:]:
        m = _EXITCODE.search(block)
        if m:
            codes.setdefault(int(m.group(1)), int(m.group(2)))
    return codes


def launch(
    worker_args: list[str],
    topology: Topology,
    staging: Path,
    *,
    timeout_s: float,
    env: dict[str, str],
    progress: TextIO | None = None,
    module: str = WORKER_MODULE,
) -> LaunchResult:
    """Run the worker (``module``: the rank program, default tracecanary's worker) on this
    node's ranks; see the module docstring."""
    staging.mkdir(parents=True, exist_ok=True)
    cmd = launcher_command(topology, worker_args, module)
    child_env = {**os.environ, **env}
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    if topology.nproc > 1:  # torchrun's default; read by OpenMP when torch loads it
        child_env.setdefault("OMP_NUM_THREADS", "1")
    lines: list[str] = []
    t0 = time.monotonic_ns()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=child_env,
        start_new_session=True,
        text=True,
        errors="replace",
    )

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if progress is not None and line.startswith(PROGRESS_PREFIX):
                progress.write(line)
                progress.flush()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
    except BaseException:
        _kill_group(proc)
        _kill_leftover_workers(staging, module)
        raise
    _kill_leftover_workers(staging, module)
    reader.join(timeout=10)
    wall = time.monotonic_ns() - t0
    log = "".join(lines)

    done = sorted(
        int(p.parent.name[4:])
        for p in staging.glob("rank*/done.json")
        if p.parent.name[4:].isdigit()
    )
    failed: dict[int, str] = {}
    for p in staging.glob("rank*/failed.json"):
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
            failed[int(doc["rank"])] = str(doc["error"])
        except (OSError, ValueError, KeyError):
            continue
    # The assembling node needs every rank's files. Another node only vouches for its own
    # torchrun: its workers exit 0 only after the final barrier, and node 0 may already
    # have removed the shared staging directory by the time this node looks.
    expected = list(range(topology.world_size)) if topology.assembles else []
    missing = [r for r in expected if r not in done]
    ok = not timed_out and proc.returncode == 0 and not missing
    reason = None
    if not ok:
        parts = []
        if timed_out:
            parts.append(f"timeout after {timeout_s:g} s (process group killed)")
        codes = _exit_codes_from_log(log)
        for r, code in sorted(codes.items()):
            parts.append(f"rank {r} exited with code {code}")
        for r, msg in sorted(failed.items()):
            parts.append(f"rank {r}: {msg.splitlines()[0][:200] if msg else 'error'}")
        if missing:
            parts.append(f"ranks {missing} did not finish")
        if not timed_out and proc.returncode != 0 and not codes:
            parts.append(f"the launcher exited with code {proc.returncode}")
        reason = "; ".join(parts) or "launcher failed"
    return LaunchResult(
        ok=ok,
        reason=reason,
        returncode=proc.returncode,
        timed_out=timed_out,
        wall_time_ns=wall,
        log=log,
        done_ranks=done,
        failed_ranks=failed,
    )
