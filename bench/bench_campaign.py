"""The default campaign end to end: ``snakemake --cores 2`` in a fresh copy of the
working tree, against the sum of its rules' ``benchmark:`` files; then a re-run with
nothing changed.

The copy holds every file git tracks or would track (``git ls-files --cached --others
--exclude-standard``), so results/, logs/, benchmarks/ and .snakemake/ start empty and
the run is the one a new checkout gets. Timed: wall of the whole ``snakemake`` process
(its own startup, DAG building and job scheduling included). Comparator: the sum of the
``s`` column of every ``benchmarks/**/*.tsv`` the run wrote (the rules' own wall time,
summed over jobs, so with 2 cores it can exceed the wall). The re-run must find nothing
to do (the row says whether it did).

Quick mode runs the same campaign (it is the shipped, small one) once and the re-run;
the figures are the same kind as in the full run, with one sample each.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO, row

TARGET_S = 300.0
TARGET_RERUN_S = 15.0
SKIP_DIRS = ("results/", "logs/", "benchmarks/", ".snakemake/", "bench/")


def copy_tree(dest: Path) -> int:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    count = 0
    for raw in listed:
        rel = raw.decode()
        if not rel or rel.startswith(SKIP_DIRS):
            continue
        src = REPO / rel
        target = dest / rel
        if src.is_symlink():  # e.g. schemas -> src/tracecanary/formats/schemas: a link again
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(src), target)
            count += 1
            continue
        if not src.is_file():  # deleted in the working tree but still tracked
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
        count += 1
    (dest / "results").mkdir(exist_ok=True)
    return count


def _snakemake(workdir: Path, log: Path) -> tuple[float, int, str]:
    env = dict(os.environ)
    env.pop("TRACECANARY_LIMITS", None)
    start = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.run(
            [sys.executable, "-m", "snakemake", "--cores", "2"],
            cwd=workdir,
            stdout=f,
            stderr=subprocess.STDOUT,
            env=env,
            check=False,
        )
    seconds = time.perf_counter() - start
    return seconds, proc.returncode, log.read_text()[-3000:]


def benchmark_sum(workdir: Path) -> tuple[float, int, dict[str, float]]:
    """(sum of the ``s`` column of every benchmark TSV, file count, per-rule sums)."""
    total, files, per_rule = 0.0, 0, {}
    base = workdir / "benchmarks"
    for tsv in sorted(base.rglob("*.tsv")):
        with open(tsv, newline="") as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
        seconds = sum(float(r["s"]) for r in rows)
        rule = tsv.relative_to(base).parts[1] if len(tsv.relative_to(base).parts) > 2 else tsv.stem
        per_rule[rule] = per_rule.get(rule, 0.0) + seconds
        total += seconds
        files += 1
    return total, files, per_rule


def run(quick: bool) -> list[dict]:
    del quick  # the default campaign is already small: quick and full run the same
    with tempfile.TemporaryDirectory(prefix="tracecanary-bench-campaign-") as tmp:
        work = Path(tmp) / "campaign"
        work.mkdir()
        copied = copy_tree(work)
        first_s, rc, tail = _snakemake(work, Path(tmp) / "first.log")
        if rc != 0:
            raise RuntimeError(f"snakemake --cores 2 failed (exit {rc}):\n{tail}")
        summed, files, per_rule = benchmark_sum(work)
        rerun_s, rc2, tail2 = _snakemake(work, Path(tmp) / "rerun.log")
        if rc2 != 0:
            raise RuntimeError(f"snakemake re-run failed (exit {rc2}):\n{tail2}")
        nothing = "Nothing to be done" in tail2
    top = sorted(per_rule.items(), key=lambda kv: -kv[1])[:4]
    return [
        row(
            "default campaign end to end (snakemake --cores 2, fresh copy)",
            round(first_s, 1),
            "s",
            "sum of the rules' benchmark: files (job wall, summed)",
            round(summed, 1),
            round(first_s / summed, 2) if summed else None,
            f"<= {TARGET_S:g} s",
            first_s <= TARGET_S,
            None,
            f"{files} benchmark files from {copied} copied files; largest rules: "
            + ", ".join(f"{k} {v:.1f} s" for k, v in top),
        ),
        row(
            "default campaign re-run, nothing changed",
            round(rerun_s, 1),
            "s",
            "the first run's wall",
            round(first_s, 1),
            round(rerun_s / first_s, 3),
            f"<= {TARGET_RERUN_S:g} s",
            rerun_s <= TARGET_RERUN_S and nothing,
            None,
            "snakemake reported 'Nothing to be done'"
            if nothing
            else "WARNING: the re-run scheduled jobs",
        ),
    ]


if __name__ == "__main__":
    print(json.dumps(run(quick=True), indent=1))
