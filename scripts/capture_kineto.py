import subprocess
import sys

from tracecanary.campaign.workflow import run_rule

sm = snakemake  # noqa: F821


def work():
    # a separate process: the capture spawns ranks, which must not re-import this script
    argv = [
        sys.executable,
        "-m",
        "tracecanary",
        "capture",
        "--nproc",
        str(sm.params.nproc),
        "--steps",
        str(sm.params.steps),
        "-o",
        sm.output.capture,
    ]
    subprocess.run(argv, check=True, stdout=sys.stdout, stderr=sys.stderr)


# a live run's timings are measurements: the capture is evidence, never re-run by regeneration
run_rule(sm, work, deterministic=False)
