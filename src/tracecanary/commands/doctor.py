"""``tracecanary doctor [--workdir DIR] [--json]``: check the installation and environment.

Prints a table of every check (``tracecanary.doctor``) and, for each missing piece, the
command that fixes it. Exit 0 when every required piece is present (optional ones, such
as NCCL, CUDA devices or Chromium, are reported but never fail); exit 1 naming each
missing required piece on stderr.
"""

from __future__ import annotations

import json
import sys


def register(sub) -> None:
    p = sub.add_parser(
        "doctor",
        help="check Python, libraries, torch backends, Snakemake, Chromium, write access, limits",
    )
    p.add_argument(
        "--workdir",
        default=None,
        metavar="DIR",
        help="directory outputs will be written to (default: results/ in the current directory)",
    )
    p.add_argument("--json", action="store_true", help="print the checks as JSON instead")
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.doctor import DEFAULT_WORKDIR, missing_required, render_table, run_checks

    checks = run_checks(args.workdir or DEFAULT_WORKDIR)
    missing = missing_required(checks)
    if args.json:
        doc = {"ok": not missing, "checks": [c.as_json() for c in checks]}
        print(json.dumps(doc, indent=1))
    else:
        print(render_table(checks))
    for c in missing:
        print(f"tracecanary doctor: missing: {c.name}: {c.found}; fix: {c.fix}", file=sys.stderr)
    return 1 if missing else 0
