"""The physical gate's verdict files, and how a campaign run ends when a gate failed.

Guarantees:

- ``write_verdict`` writes a physical source's verdict whatever it is: a failed gate is a
  result the campaign recorded, not a job that crashed. The verdict file's first line is
  ``physical gate: pass|warning|fail``; a failed verdict's second line is the failure as
  one line (``physical.report.gate_failure_line``: the gate, the pair and the figures it
  flips on, or the canary/full ratio and the threshold); the gate's warnings follow.
- ``report_failed_gates`` is what the Snakefile's ``onsuccess`` and ``onerror`` handlers
  call with every physical source's verdict file: each failed one is printed as one line,
  ``error: physical gate failed for source S: ...``, on the terminal (stderr), and removed,
  so that the next run runs that gate again and fails again rather than finding its
  verdict up to date (Snakemake calls no handler when it has nothing to do). It returns
  the run's exit code: 1 (``ClaimFailed``) when a gate failed, else 0. No Snakemake job
  failed, so the terminal shows no "Error in rule" block and no traceback; the physical
  report (``physical/{source}.json``, bound by the manifest) and the summary say ``fail``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tracecanary.errors import ClaimFailed

__all__ = ["FAILED", "report_failed_gates", "write_verdict"]

FAILED = "physical gate: fail"


def write_verdict(report_path: str | os.PathLike, verdict_path: str | os.PathLike, subject: str):
    """Write the verdict of the physical report at ``report_path`` (see module doc) and
    return its lines; ``subject`` names what was gated (``source S``)."""
    import json

    from tracecanary.physical.report import gate_failure_line

    report = json.loads(Path(report_path).read_text(encoding="utf-8"))
    gate = report["gate"]
    lines = [f"physical gate: {gate['status']}"]
    if gate["status"] == "fail":
        lines.append(gate_failure_line(report, subject))
    lines += gate["warnings"]
    Path(verdict_path).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return lines


def report_failed_gates(verdict_paths: list[str]) -> int:
    """Print each failed verdict among ``verdict_paths`` as one ``error:`` line, remove it,
    and return 1 when one failed, else 0 (see module doc); absent files are skipped."""
    failed = False
    for path in verdict_paths:
        verdict = Path(path)
        if not verdict.is_file():
            continue
        lines = verdict.read_text(encoding="utf-8").splitlines()
        if not lines or lines[0] != FAILED:
            continue
        failed = True
        line = lines[1] if len(lines) > 1 else f"physical gate failed ({path})"
        print(f"error: {ClaimFailed(line).one_line()}", file=sys.stderr, flush=True)
        verdict.unlink()
    return ClaimFailed.exit_code if failed else 0
