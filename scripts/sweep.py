import subprocess
import sys

from tracecanary.campaign.workflow import run_rule

sm = snakemake  # noqa: F821
spec = sm.params.spec


def work():
    cmd = [
        sys.executable,
        "-m",
        "tracecanary",
        "sweep",
        "--collective",
        spec["collective"],
        "--min-bytes",
        str(spec.get("min_bytes", "1K")),
        "--max-bytes",
        str(spec.get("max_bytes", "4M")),
        "--factor",
        str(spec.get("factor", 4)),
        "--warmup",
        str(spec.get("warmup", 2)),
        "--iters",
        str(spec.get("iters", 5)),
        "--cycles",
        str(spec.get("cycles", 3)),
        "--dtype",
        spec.get("dtype", "float32"),
        "--backend",
        sm.params.backend,
        "--nproc",
        str(sm.params.nproc),
        "--print-table",
        "-o",
        sm.output.ladder,
    ]
    code = subprocess.run(cmd, stdout=sys.stdout, stderr=sys.stderr).returncode
    if code not in (
        0,
        1,
    ):  # 1: a data-check failure, kept as evidence (alpha/beta excludes those rungs)
        raise SystemExit(f"sweep exited {code}")


run_rule(sm, work, deterministic=False)
