"""``tracecanary merge CAPTURE... [--calibration CLOCKS] [--groups MAPPING] -o MERGED``.

Exit 2 (nothing written) for a capture set missing a rank of the declared world
(``rank 3: no capture``) and for process groups the traces and ``--groups`` leave
undetermined (naming rank, identity and candidates)."""

from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser(
        "merge", help="merge per-rank captures, mapping clocks through a calibration"
    )
    p.add_argument(
        "captures",
        nargs="+",
        metavar="CAPTURE",
        help="per-rank native traces (tracecanary.trace/v1) of one run",
    )
    p.add_argument(
        "--calibration",
        metavar="CLOCKS",
        help="tracecanary.calibration/v1 file (default: none; ranks on different clocks then have unknown skew)",
    )
    p.add_argument(
        "--groups",
        metavar="MAPPING",
        help="tracecanary.groups/v1 file settling process groups the traces leave undetermined (default: none)",
    )
    p.add_argument(
        "-o", "--output", required=True, metavar="MERGED", help=".json, .jsonl or .jsonl.gz"
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.clocks.status import unknown_skew_message
    from tracecanary.merge import merge_captures

    summary = merge_captures(args.captures, args.output, args.calibration, groups_path=args.groups)
    skew = summary["skew"]
    skew_txt = (
        f"skew known (uncertainty {skew.get('uncertainty_ns', 0)} ns)"
        if skew["status"] == "known"
        else f"skew UNKNOWN: {unknown_skew_message(skew['reason'])}"
    )
    print(
        f"merged {summary['events']} events into {summary['occurrences']} collectives; {skew_txt} -> {args.output}",
        file=sys.stderr,
    )
    return 0
