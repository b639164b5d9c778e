"""Run a multi-node ``tracecanary`` command as one task per node of a SLURM job step.

    srun --nodes=N --ntasks=N --ntasks-per-node=1 \\
        python -m tracecanary.physical.slurm_launch [--rdzv-port PORT] \\
        replay-physical DIR --nproc P -o ATTEMPT [...]

Each task of the step (one per node) appends ``--nnodes N --node-rank SLURM_NODEID
--rdzv-endpoint ADDR:PORT --rdzv-id slurm-JOB.STEP`` to the given command and runs it
in-process through ``tracecanary.cli.main``. Every node therefore starts its own
``torchrun`` with static rendezvous (``tracecanary.physical.launch``): global rank =
node_rank * P + local rank, so ranks 0..P-1 run on the step's first node, which hosts
the rendezvous store and assembles the attempt archive. Nothing here schedules anything:
SLURM placed the nodes; this only turns the step's environment into the rendezvous.

Guarantees:
- Every node computes the same endpoint without talking to the others: ADDR is the
  ``NodeAddr`` Slurm itself uses to reach the step's first node (``scontrol show node``;
  the node name when scontrol cannot say), PORT is a function of the job and step ids
  (``rendezvous_port``) unless ``--rdzv-port`` is given.
- Outside a job step (SLURM_JOB_ID, SLURM_STEP_ID, SLURM_NODEID, SLURM_STEP_NUM_NODES,
  SLURM_STEP_NUM_TASKS, SLURM_STEP_NODELIST missing or malformed), in a step that runs
  more than one task on a node (two node-rank-0 launchers would both assemble), or
  when the command already sets one of the rendezvous options, it exits 2 with one
  line and runs nothing.
- The exit code is the command's own (0 complete, 1 the attempt failed, 2 bad input).

Why a step with one task per node rather than one task per rank: Slurm may spread
``--ntasks`` unevenly over nodes (3 + 1 for 4 tasks on 2 nodes), while torchrun needs
the same number of local ranks on every node; a step without ``--exact`` gets all CPUs
(and, by default, all GPUs) the job holds on each of its nodes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tracecanary.errors import InputError

RDZV_PORT_BASE = 20000
RDZV_PORT_SPAN = 10000
SCONTROL_TIMEOUT_S = 30.0
RENDEZVOUS_OPTIONS = ("--nnodes", "--node-rank", "--rdzv-endpoint", "--rdzv-id")


@dataclass(frozen=True)
class SlurmStep:
    """Where this task sits in its job step."""

    job_id: int
    step_id: int
    node_rank: int
    nnodes: int
    nodelist: str
    nodename: str | None


def _int_var(environ: Mapping[str, str], name: str) -> int:
    value = environ.get(name)
    if value is None:
        raise InputError(
            f"{name} is not set: run this as a task of a SLURM job step "
            "(srun --nodes=N --ntasks=N --ntasks-per-node=1 ...)",
            field=name,
        )
    try:
        return int(value)
    except ValueError:
        raise InputError(f"not an integer: {value!r}", field=name) from None


def step_from_env(environ: Mapping[str, str]) -> SlurmStep:
    """Read the step's identity from the task environment srun sets; refuse if absent."""
    job_id = _int_var(environ, "SLURM_JOB_ID")
    step_id = _int_var(environ, "SLURM_STEP_ID")
    node_rank = _int_var(environ, "SLURM_NODEID")
    nnodes = _int_var(environ, "SLURM_STEP_NUM_NODES")
    ntasks = _int_var(environ, "SLURM_STEP_NUM_TASKS")
    nodelist = environ.get("SLURM_STEP_NODELIST", "")
    if not nodelist:
        raise InputError("not set or empty", field="SLURM_STEP_NODELIST")
    if nnodes < 1 or not 0 <= node_rank < nnodes:
        raise InputError(
            f"node id {node_rank} outside a step of {nnodes} nodes", field="SLURM_NODEID"
        )
    if ntasks != nnodes:
        raise InputError(
            f"the step runs {ntasks} tasks on {nnodes} nodes; it needs exactly one task per "
            "node (srun --nodes=N --ntasks=N --ntasks-per-node=1)",
            field="SLURM_STEP_NUM_TASKS",
        )
    return SlurmStep(
        job_id=job_id,
        step_id=step_id,
        node_rank=node_rank,
        nnodes=nnodes,
        nodelist=nodelist,
        nodename=environ.get("SLURMD_NODENAME"),
    )


def rendezvous_port(job_id: int, step_id: int) -> int:
    """The port every node of one step derives alike, in [RDZV_PORT_BASE, +SPAN).

    Distinct for consecutive steps and jobs (wraps after SPAN/64 jobs), so concurrent
    replays on a shared node do not collide in the usual case; ``--rdzv-port`` overrides.
    """
    return RDZV_PORT_BASE + (job_id * 64 + step_id) % RDZV_PORT_SPAN


def _scontrol(*args: str) -> str:
    return subprocess.run(
        ["scontrol", *args],
        capture_output=True,
        text=True,
        timeout=SCONTROL_TIMEOUT_S,
        check=True,
    ).stdout


def first_node(nodelist: str, run: Callable[..., str] = _scontrol) -> str:
    """The first host of a Slurm hostlist (``n[1-2]`` -> ``n1``), expanded by scontrol."""
    try:
        names = run("show", "hostnames", nodelist).split()
    except (OSError, subprocess.SubprocessError) as err:
        raise InputError(
            f"cannot expand the step's node list with scontrol: {err}", field="SLURM_STEP_NODELIST"
        ) from None
    if not names:
        raise InputError(f"no host in {nodelist!r}", field="SLURM_STEP_NODELIST")
    return names[0]


def node_address(name: str, run: Callable[..., str] = _scontrol) -> str:
    """``NodeAddr`` of a node as Slurm knows it; the name itself when scontrol cannot say."""
    try:
        out = run("show", "node", "-o", name)
    except (OSError, subprocess.SubprocessError):
        return name
    for token in out.split():
        if token.startswith("NodeAddr="):
            return token.split("=", 1)[1] or name
    return name


def rendezvous_args(step: SlurmStep, address: str, port: int) -> list[str]:
    """The options that place this node in the multi-node run."""
    return [
        "--nnodes",
        str(step.nnodes),
        "--node-rank",
        str(step.node_rank),
        "--rdzv-endpoint",
        f"{address}:{port}",
        "--rdzv-id",
        f"slurm-{step.job_id}.{step.step_id}",
    ]


def check_command(command: list[str]) -> None:
    """Refuse a command that is empty or already sets a rendezvous option."""
    if not command:
        raise InputError("no tracecanary command given", field="COMMAND")
    for arg in command:
        name = arg.split("=", 1)[0]
        if name in RENDEZVOUS_OPTIONS:
            raise InputError("set by slurm_launch from the job step; do not pass it", field=name)


def build_command(
    command: list[str],
    environ: Mapping[str, str],
    *,
    rdzv_port: int | None = None,
    run: Callable[..., str] = _scontrol,
) -> tuple[list[str], SlurmStep, str]:
    """``(argv for tracecanary.cli.main, step, endpoint)`` for this task."""
    check_command(command)
    step = step_from_env(environ)
    address = node_address(first_node(step.nodelist, run), run)
    port = rendezvous_port(step.job_id, step.step_id) if rdzv_port is None else rdzv_port
    return [*command, *rendezvous_args(step, address, port)], step, f"{address}:{port}"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tracecanary.physical.slurm_launch",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--rdzv-port",
        type=int,
        default=None,
        metavar="PORT",
        help="rendezvous port on the first node (default: derived from the job and step ids)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="tracecanary STAGE [ARGS]")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Entry point; returns the exit code (see the module docstring)."""
    from tracecanary.cli import main as cli_main  # pulls in torch: only once we run

    args = parse_args(argv)
    environ = os.environ if environ is None else environ
    if args.rdzv_port is not None and not 0 < args.rdzv_port < 65536:
        print("slurm_launch: error: field --rdzv-port: not a TCP port", file=sys.stderr)
        return 2
    try:
        command, step, endpoint = build_command(args.command, environ, rdzv_port=args.rdzv_port)
    except InputError as err:
        print(f"slurm_launch: error: {err.one_line()}", file=sys.stderr)
        return 2
    print(
        f"slurm_launch: job {step.job_id}.{step.step_id} node {step.nodename or '?'} "
        f"(node rank {step.node_rank} of {step.nnodes}), rendezvous {endpoint}",
        file=sys.stderr,
        flush=True,
    )
    return cli_main(command)


if __name__ == "__main__":
    sys.exit(main())
