"""``tracecanary merge CAPTURE... [--calibration CLOCKS] -o MERGED``."""

from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser(
        "merge", help="merge per-rank captures, mapping clocks through a calibration"
    )
    p.add_argument("captures", nargs="+", metavar="CAPTURE")
    p.add_argument("--calibration", metavar="CLOCKS", help="tracecanary.calibration/v1 file")
    p.add_argument(
        "-o", "--output", required=True, metavar="MERGED", help=".json, .jsonl or .jsonl.gz"
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.merge import merge_captures

    summary = merge_captures(args.captures, args.output, args.calibration)
    skew = summary["skew"]
    skew_txt = (
        f"skew known (uncertainty {skew.get('uncertainty_ns', 0)} ns)"
        if skew["status"] == "known"
        else f"skew UNKNOWN: {skew['reason']}"
    )
    print(
        f"merged {summary['events']} events into {summary['occurrences']} collectives; {skew_txt} -> {args.output}",
        file=sys.stderr,
    )
    return 0
