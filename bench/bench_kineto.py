"""Benchmark: ``tracecanary import-kineto`` vs HolisticTraceAnalysis's trace parser.

Builds an 8-rank input of >= 1.5M events from the real NCCL trace in
``../shared/kineto_samples/external`` (HTA's nccl_data, full collective metadata):
each rank's file repeats the trace's events (timestamps shifted past the previous copy,
External id / correlation / flow ids offset so joins stay unique), with the rank, world
size, pg_config and ``Process Group Ranks`` rewritten for an 8-rank job. Then, in the
same run, each side parses all 8 files in a fresh subprocess:

- ours: ``tracecanary import-kineto``'s multi-input path
  (``tracecanary.kineto.batch.import_kineto_files``: full import of every file, native
  events, groups, notes, in worker processes, one per CPU, as HTA uses its workers);
  the same files imported one after the other in one process are timed too (notes);
- HTA: ``TraceAnalysis(trace_dir=...)`` (parses every rank, in parallel worker
  processes) from the virtual environment at ``/tmp/hta-venv`` (``pip install
  HolisticTraceAnalysis`` there: it pulls ~100 packages, so never into the project's
  environment). Without that venv the HTA row is skipped with a message.

Printed: a table with wall time and peak RSS of each (HTA: parent and its largest
worker), and the ratio HTA time / our time (target >= 4). ``run(quick)`` returns the
rows for a bench driver; ``quick`` uses one copy per rank (~325k events).

Usage: ``python bench/bench_kineto.py [--quick] [--hta-python PATH]``
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: make the bench package importable
    sys.path.insert(0, str(REPO))
SOURCE = (
    REPO.parent
    / "shared"
    / "kineto_samples"
    / "external"
    / "hta__nccl_parser_config__nccl_data.json.gz"
)
HTA_PYTHON = Path("/tmp/hta-venv/bin/python")
RANKS = 8
MIN_EVENTS = 1_500_000
ID_KEYS = ("External id", "correlation", "Ev Idx", "Record function id")
ID_STRIDE = 10_000_000
ROUNDS = 3  # full run: alternating rounds of ours and HTA, medians reported
INPUT_VERSION = 1  # bump when build_input changes (inputs are cached in the temp dir)

OURS = r"""
import json, resource, sys, time
from pathlib import Path
t0 = time.perf_counter()
from tracecanary.kineto.batch import default_jobs, import_kineto_files
from tracecanary.kineto import import_kineto_file
t1 = time.perf_counter()
paths = sorted(Path(sys.argv[1]).glob("rank*.json.gz"))
collectives = sum(len(d["events"]) for d in import_kineto_files(paths))
t2 = time.perf_counter()
serial = sum(len(import_kineto_file(p)["events"]) for p in paths)
t3 = time.perf_counter()
assert serial == collectives
print(json.dumps({"wall_s": t2 - t1, "serial_wall_s": t3 - t2, "jobs": default_jobs(len(paths)),
                  "import_module_s": t1 - t0, "output": collectives,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "peak_rss_worker_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""

HTA = r"""
import json, resource, sys, time, logging
logging.disable(logging.WARNING)
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
t1 = time.perf_counter()
analysis = TraceAnalysis(trace_dir=sys.argv[1])
t2 = time.perf_counter()
rows = sum(len(df) for df in analysis.t.traces.values())
print(json.dumps({"wall_s": t2 - t1, "import_module_s": t1 - t0, "output": rows,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "peak_rss_worker_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def _shift(event: dict, k: int, span_us: float) -> dict:
    e = dict(event)
    if k:
        if "ts" in e:
            e["ts"] = round(e["ts"] + k * span_us, 3)
        if "id" in e and isinstance(e["id"], int):
            e["id"] += k * ID_STRIDE
        args = e.get("args")
        if isinstance(args, dict):
            args = dict(args)
            for key in ID_KEYS:
                if isinstance(args.get(key), int):
                    args[key] += k * ID_STRIDE
            e["args"] = args
    return e


def build_input(out_dir: Path, *, ranks: int = RANKS, min_events: int = MIN_EVENTS) -> int:
    """Write ``rank<r>.json.gz`` for ``ranks`` ranks; return the total event count."""
    source = json.loads(gzip.decompress(SOURCE.read_bytes()))
    events = source["traceEvents"]
    meta_events = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]
    copies = max(1, -(-(min_events // ranks - len(meta_events)) // len(body)))
    timed = [e for e in body if "ts" in e]
    start = min(e["ts"] for e in timed)
    end = max(e["ts"] + e.get("dur", 0) for e in timed)
    span = float(int(end - start) + 1000)
    members = list(range(ranks))
    listed = "[" + ", ".join(map(str, members)) + "]"
    repeated = meta_events + [_shift(e, k, span) for k in range(copies) for e in body]
    for e in repeated:
        args = e.get("args")
        if isinstance(args, dict) and "Process Group Ranks" in args and args.get("Group size") == 2:
            args = e["args"] = dict(args)
            args["Process Group Ranks"], args["Group size"] = listed, ranks
    out_dir.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        doc = dict(source)
        doc["distributedInfo"] = {
            **source["distributedInfo"],
            "rank": rank,
            "world_size": ranks,
            "pg_config": [
                {
                    "pg_name": "0",
                    "pg_desc": "default_pg",
                    "backend_config": "cuda:nccl",
                    "pg_size": ranks,
                    "ranks": members,
                }
            ],
        }
        doc["traceEvents"] = repeated
        with gzip.open(out_dir / f"rank{rank}.json.gz", "wt", compresslevel=1) as f:
            json.dump(doc, f)
    return len(repeated) * ranks


def _cached_input(ranks: int, min_events: int) -> tuple[Path, int]:
    key = hashlib.sha256(
        f"{INPUT_VERSION}:{SOURCE.stat().st_size}:{ranks}:{min_events}".encode()
    ).hexdigest()[:16]
    out = Path(tempfile.gettempdir()) / f"tracecanary-bench-kineto-{key}"
    marker = out / "events.txt"
    if marker.is_file():
        return out, int(marker.read_text())
    total = build_input(out, ranks=ranks, min_events=min_events)
    marker.write_text(str(total))
    return out, total


def _run(python: str, script: str, input_dir: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [python, "-c", script, str(input_dir)], capture_output=True, text=True, env=env, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{python} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(quick: bool, hta_python: Path = HTA_PYTHON) -> list[dict]:
    """Time both parsers on the same input; one row in ``bench.common.row`` form (our
    wall time, HTA's as the comparator, ratio HTA / ours, target >= 4x)."""
    from bench.common import row

    case = "import-kineto, 8-rank NCCL input"
    if not SOURCE.is_file():
        return [
            row(
                case,
                "",
                "s",
                "",
                "",
                "",
                ">= 4x faster than HTA",
                "",
                notes=f"skipped: {SOURCE} absent",
            )
        ]
    input_dir, total = _cached_input(RANKS, 300_000 if quick else MIN_EVENTS)
    case = f"import-kineto {RANKS} ranks, {total:,} events (NCCL, full metadata)"
    rounds = 1 if quick else ROUNDS
    has_hta = hta_python.is_file()
    ours_runs, hta_runs = [], []
    for _ in range(rounds):  # alternating, so drift of the shared machine hits both sides
        ours_runs.append(_run(sys.executable, OURS, input_dir))
        if has_hta:
            hta_runs.append(_run(str(hta_python), HTA, input_dir))
    ours = _median_run(ours_runs)
    notes = (
        f"median of {rounds} alternating rounds (ours s: "
        + ", ".join(f"{r['wall_s']:.2f}" for r in ours_runs)
        + ("; HTA s: " + ", ".join(f"{r['wall_s']:.2f}" for r in hta_runs) if hta_runs else "")
        + f"); ours: {ours['jobs']} worker processes, {ours['output']} collectives imported, "
        f"peak RSS {ours['peak_rss_mb']:.0f} MiB parent + {ours['peak_rss_worker_mb']:.0f} MiB "
        f"largest worker; the same 8 files serially in one process: "
        f"{statistics.median(r['serial_wall_s'] for r in ours_runs):.2f} s"
    )
    if not has_hta:
        return [
            row(case, round(ours["wall_s"], 2), "s", "HolisticTraceAnalysis (skipped)", "", "",
                ">= 4x faster than HTA", "", round(ours["peak_rss_mb"], 1),
                notes + f"; HTA skipped: no venv at {hta_python} (python3 -m venv /tmp/hta-venv "
                "&& /tmp/hta-venv/bin/pip install HolisticTraceAnalysis)")
        ]  # fmt: skip
    hta = _median_run(hta_runs)
    ratio = hta["wall_s"] / ours["wall_s"]
    return [
        row(
            case,
            round(ours["wall_s"], 2),
            "s",
            f"HolisticTraceAnalysis {_hta_version(hta_python)} TraceAnalysis(trace_dir), parallel workers",
            round(hta["wall_s"], 2),
            round(ratio, 2),
            ">= 4x faster than HTA",
            ratio >= 4,
            round(ours["peak_rss_mb"], 1),
            notes
            + f"; HTA peak RSS {hta['peak_rss_mb']:.0f} MiB parent + {hta['peak_rss_worker_mb']:.0f}"
            f" MiB largest worker, {hta['output']:,} trace rows parsed",
        )
    ]


def _median_run(runs: list[dict]) -> dict:
    """The run with the median wall time (lower median for an even count)."""
    ordered = sorted(runs, key=lambda r: r["wall_s"])
    return ordered[(len(ordered) - 1) // 2]


def _hta_version(python: Path) -> str:
    proc = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.metadata as m; print(m.version('HolisticTraceAnalysis'))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip() or "?"


def _table(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        lines.append(f"case:        {r['case']}")
        lines.append(f"tracecanary: {r['figure']} {r['unit']}, peak RSS {r['peak_rss_mb']} MiB")
        lines.append(f"comparator:  {r['comparator']}: {r['comparator_figure']} {r['unit']}")
        if r["ratio"] != "":
            verdict = "meets" if r["met"] else "MISSES"
            lines.append(f"ratio:       {r['ratio']}x ({verdict} the target {r['target']})")
        lines.append(f"notes:       {r['notes']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one copy per rank (~325k events)")
    parser.add_argument("--hta-python", type=Path, default=HTA_PYTHON)
    args = parser.parse_args(argv)
    print(_table(run(args.quick, args.hta_python)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
