"""``tracecanary calibrate-clocks CAPTURE... -o CLOCKS.json [--reference CLOCK] [--drift MODE]``.

Derives a ``tracecanary.calibration/v1`` document (``method: derived-causality``) from the
captures' own happens-before constraints (``tracecanary.clocks.derive``); ``merge
--calibration`` consumes it. Exit 2, nothing written: captures merge would refuse,
constraints no offsets satisfy (naming the events and ranks), captures without end times.
Clocks no constraint connects are listed in ``unknown_clocks`` (said on stderr)."""

from __future__ import annotations

import sys


def register(sub) -> None:
    from tracecanary.clocks import DRIFT_MODES

    p = sub.add_parser(
        "calibrate-clocks",
        help="derive clock offsets (and drift) from the captures' happens-before constraints",
    )
    p.add_argument(
        "captures", nargs="+", metavar="CAPTURE", help="per-rank captures (what merge takes)"
    )
    p.add_argument("-o", "--output", required=True, metavar="CLOCKS", help="calibration JSON")
    p.add_argument(
        "--reference", metavar="CLOCK", help="reference clock domain (default: rank 0's clock)"
    )
    p.add_argument(
        "--drift",
        choices=DRIFT_MODES,
        default="auto",
        help="fit linear drift per clock: auto (captures spanning >= 10 s), none, fit",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.canonical import write_json
    from tracecanary.clocks.derive import calibrate_captures

    doc = calibrate_captures(args.captures, reference=args.reference, drift=args.drift)
    write_json(args.output, doc)
    for clock in doc["clocks"]:
        lo, hi = clock["offset_interval_ns"]
        print(
            f"clock {clock['clock']}: offset {clock['offset_ns']} ns in [{lo}, {hi}] "
            f"(+-{clock['uncertainty_ns']} ns, {clock['constraints']} constraints)",
            file=sys.stderr,
        )
    for unknown in doc.get("unknown_clocks", []):
        print(f"clock {unknown['clock']}: UNKNOWN ({unknown['reason']})", file=sys.stderr)
    print(f"-> {args.output} (reference {doc['reference']!r})", file=sys.stderr)
    return 0
