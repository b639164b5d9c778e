"""Users' own programs recorded unmodified: each training loop of
``examples/user_programs`` (DDP, DTensor TP x FSDP2, pipelining, Mixture-of-Experts under
``torchrun --standalone --nproc-per-node 2``; gloo on CPU) run plain and under
``tracecanary capture -o DIR -- python PROGRAM STEPS``, alternating, REPS times
each; then the last capture's merged trace is searched as ``bench_zoo`` searches
(``bench_zoo.search_merged``: the CLI's default configurations, its budgets).

Figures per program: the searched canary's size against the normalized source (target
>= 10x smaller, as the zoo's) and its executed fraction (target <= 20%); the capture
command's wall time over the plain program's (median of the paired ratios, with their
range: what recording, the completeness check and the merge cost a user); the events,
collectives and the capture's completeness notes. Every capture passes the completeness
check or the row reports the refusal.

``python -m bench.bench_recorded [--quick] [--reps N]`` prints the rows as JSON (outside
the suite's module list, like ``bench_zoo``: it runs 3 x REPS x 2 real training jobs);
``python -m bench --only bench_recorded`` puts them in the table."""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import subprocess
import sys
import time

from bench.bench_zoo import reduction_row, search_merged
from bench.common import REPO, WORK

PROGRAMS = ("ddp_train", "tp_fsdp2_train", "pipeline_train", "moe_train")
# how a program is launched (after ``python``): the MoE program is a torchrun script
LAUNCHERS = {"moe_train": ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]}
STEPS, QUICK_STEPS = 30, 5
REPS, QUICK_REPS = 3, 1


def _timed(cmd: list[str]) -> float:
    started = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=REPO)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {run.returncode}: {run.stderr[-600:]}")
    return time.perf_counter() - started


def measure(name: str, steps: int, reps: int) -> dict:
    """One program: plain and captured walls (alternating), then the search."""
    from tracecanary.record_completeness import completeness_notes

    program = str(REPO / "examples" / "user_programs" / f"{name}.py")
    out = WORK / "recorded" / f"{name}-{steps}"
    plain, captured = [], []
    command = [sys.executable, *LAUNCHERS.get(name, []), program, str(steps)]
    for _ in range(reps):
        plain.append(_timed(command))
        shutil.rmtree(out, ignore_errors=True)
        cli = [sys.executable, "-m", "tracecanary", "capture", "-o", str(out)]
        captured.append(_timed([*cli, "--", *command]))
    ratios = sorted(c / p for c, p in zip(captured, plain, strict=True))
    merged = out / "merged.jsonl.gz"
    with gzip.open(merged, "rt") as lines:
        header = json.loads(lines.readline())
    figures = search_merged(str(merged), name, steps, statistics.median(captured))
    figures.update(
        plain_s=[round(t, 2) for t in plain],
        captured_s=[round(t, 2) for t in captured],
        overhead_median=round(statistics.median(ratios), 2),
        overhead_range=[round(ratios[0], 2), round(ratios[-1], 2)],
        notes=completeness_notes(header["meta"]["notes"]),
    )
    return figures


def run(quick: bool, reps: int | None = None) -> list[dict]:
    steps = QUICK_STEPS if quick else STEPS
    reps = reps or (QUICK_REPS if quick else REPS)
    rows = []
    for name in PROGRAMS:
        try:
            m = measure(name, steps, reps)
        except RuntimeError as err:  # a refused or failed capture is the row
            rows.append({"case": f"recorded {name}", "error": str(err)[-500:]})
            continue
        notes = (
            f"verified={m['verified']}; capture command / plain program wall "
            f"{m['overhead_median']} (range {m['overhead_range']}, {reps} paired runs: "
            f"plain {m['plain_s']} s, captured {m['captured_s']} s); search {m['search_s']} s; "
            f"{' '.join(m['notes'])}"
        )
        case = f"recorded {name} ({steps} steps, capture -- CMD)"
        rows.append(reduction_row(case, m, notes))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.bench_recorded",
        description="Record each example user program unmodified, search it, print rows.",
    )
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_STEPS} steps, 1 run")
    parser.add_argument("--reps", type=int, default=None, help="paired plain/captured runs")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.quick, args.reps), indent=1))


if __name__ == "__main__":
    main()
