import os
import subprocess
import sys

from tracecanary.campaign.workflow import run_rule

sm = snakemake  # noqa: F821


def replay(program_dir: str, attempt: str) -> None:
    args = [
        "replay-physical",
        program_dir,
        "--backend",
        sm.params.backend,
        "--nproc",
        str(sm.resources.tasks // sm.resources.nodes),
        "--physical-config",
        sm.wildcards.config,
        "--physical-configs",
        sm.input.physical_configs,
        "--warmup",
        str(sm.params.warmup),
        "--iters",
        str(sm.params.iters),
        "--timeout",
        str(sm.params.timeout),
        "-o",
        attempt,
    ]
    if os.environ.get("SLURM_JOB_ID") and sm.resources.nodes > 1:
        # inside a multi-node allocation: one launcher task per node, torchrun rendezvous on the first
        cmd = [
            sm.resources.mpi,
            f"--nodes={sm.resources.nodes}",
            f"--ntasks={sm.resources.nodes}",
            "--ntasks-per-node=1",
            sys.executable,
            "-m",
            "tracecanary.physical.slurm_launch",
            *args,
        ]
    else:
        cmd = [sys.executable, "-m", "tracecanary", *args]
    # exit 1 = the attempt failed (a rank died, hung, or data was wrong): its archive is kept as
    # evidence and the physical report excludes it; anything else is an error of this job
    code = subprocess.run(cmd, stdout=sys.stdout, stderr=sys.stderr).returncode
    if code not in (0, 1):
        raise SystemExit(f"replay-physical exited {code}")


def work():
    order = [("canary", sm.input.canary, sm.output.canary), ("full", sm.input.full, sm.output.full)]
    if int(sm.wildcards.rep) % 2 == 0:
        order.reverse()
    for _, program_dir, attempt in order:
        replay(program_dir, attempt)


# physical timings are measurements: the archives are evidence, never regenerated
run_rule(sm, work, deterministic=False)
