"""Helpers for benchmarks: timing medians and peak RSS of a child process."""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORK = Path(os.environ.get("TRACECANARY_BENCH_DIR", "/tmp/tracecanary-bench"))


def median_time(fn: Callable[[], object], repeats: int) -> float:
    """Median wall seconds of ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run_child(code: str, timeout: float = 3600) -> tuple[dict, float]:
    """Run python ``code`` (which prints one JSON object last) in a child; return
    (that object, the child's peak RSS in MiB, its waited-for descendants included).

    Both pipes are drained by threads while the child runs (a chatty child never blocks
    on a full pipe); the child is reaped with ``wait4`` to read its resource usage. A
    child still running after ``timeout`` seconds is killed (RuntimeError)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    chunks: dict[str, str] = {}
    readers = [
        threading.Thread(target=lambda k=k, s=s: chunks.__setitem__(k, s.read()), daemon=True)
        for k, s in (("out", proc.stdout), ("err", proc.stderr))
    ]
    for t in readers:
        t.start()
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped: keep Popen from waiting
    for t in readers:
        t.join()
    out, err = chunks.get("out", ""), chunks.get("err", "")
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child failed (exit {proc.returncode}): {err[-2000:]}")
    return json.loads(out.strip().splitlines()[-1]), usage.ru_maxrss / 1024


def tracecanary_cli(*args: str, timeout: float = 1800) -> str:
    """Run one ``tracecanary`` command in a child; its stdout (RuntimeError naming the
    command, with the end of its stderr, when it fails)."""
    proc = subprocess.run(
        [sys.executable, "-m", "tracecanary", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"tracecanary {' '.join(args[:2])} exited {proc.returncode}: {proc.stderr[-1500:]}"
        )
    return proc.stdout


def self_peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def row(
    case,
    figure,
    unit,
    comparator,
    comparator_figure,
    ratio,
    target,
    met,
    peak_rss_mb=None,
    notes="",
):
    return {
        "case": case,
        "figure": figure,
        "unit": unit,
        "comparator": comparator,
        "comparator_figure": comparator_figure,
        "ratio": ratio,
        "target": target,
        "met": met,
        "peak_rss_mb": peak_rss_mb,
        "notes": notes,
    }
