"""``python -m bench [--quick] [--only NAME...]``: run every benchmark, print one table,
write bench/results.json."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from bench.common import REPO, run_child

# where the results go (bench/results.json; tests point it elsewhere)
RESULTS = Path(os.environ.get("TRACECANARY_BENCH_RESULTS", REPO / "bench" / "results.json"))

MODULES = [
    "bench_ingest",
    "bench_small",
    "bench_kineto",
    "bench_compile",
    "bench_sim",
    "bench_verify",
    "bench_search",
    "bench_campaign",
    "bench_physical",
    "bench_launch",
    "bench_scale",
    "bench_clocks",
]


def machine() -> dict:
    cpu = ""
    try:
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in open("/proc/cpuinfo")
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    mem = ""
    try:
        mem = next(
            line.split(":", 1)[1].strip()
            for line in open("/proc/meminfo")
            if line.startswith("MemTotal")
        )
    except (OSError, StopIteration):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": mem,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument(
        "--quick", action="store_true", help="small inputs (under 2 minutes in all)"
    )
    parser.add_argument("--only", nargs="*", help="module names (bench_sim ...)")
    args = parser.parse_args()
    rows = []
    started = time.time()
    load_start = _loadavg()
    for name in args.only or MODULES:
        if not (REPO / "bench" / f"{name}.py").exists():
            continue
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        try:
            result, rss = run_child(
                f"import json, bench.{name} as m; print(json.dumps(m.run(quick={args.quick})))"
            )
        except RuntimeError as err:
            rows.append({"case": name, "error": str(err)[-500:]})
            continue
        for r in result:
            r.setdefault("peak_rss_mb", None)
            if r["peak_rss_mb"] is None:
                r["peak_rss_mb"] = round(rss, 1)
            rows.append(r)
    print_table(rows)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO
    ).stdout.strip()
    out = {
        "machine": {**machine(), "loadavg_start": load_start, "loadavg_end": _loadavg()},
        "quick": args.quick,
        "commit": commit,
        "seconds": round(time.time() - started, 1),
        "rows": rows,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")
    return 0


def _loadavg() -> str:
    """1/5/15-minute load averages: other work on the machine skews wall times."""
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return ""


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def print_table(rows: list[dict]) -> None:
    cols = ["case", "figure", "unit", "comparator_figure", "ratio", "target", "met", "peak_rss_mb"]
    header = ["case", "figure", "unit", "comparator", "ratio", "target", "met", "peak MiB"]
    table = [
        [
            _fmt(r.get(c, ""))
            if "error" not in r
            else (r["case"] if c == "case" else ("ERROR" if c == "figure" else ""))
            for c in cols
        ]
        for r in rows
    ]
    widths = [
        max(len(h), *(len(t[i]) for t in table)) if table else len(h) for i, h in enumerate(header)
    ]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for t in table:
        print("  ".join(c.ljust(w) for c, w in zip(t, widths, strict=True)))
    for r in rows:
        if r.get("comparator") or r.get("notes"):
            print(f"- {r['case']}: comparator = {r.get('comparator', '')}; {r.get('notes', '')}")
        if r.get("error"):
            print(f"- {r['case']}: ERROR {r['error']}")


if __name__ == "__main__":
    raise SystemExit(main())
