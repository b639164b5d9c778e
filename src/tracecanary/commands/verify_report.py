"""``tracecanary verify-report REPORT --input INPUT [--backends B]``: replay a report's
declared protocol and compare every field bit for bit (exit 1 naming the first
differing field)."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser(
        "verify-report",
        help="replay a replay report's protocol on its input and compare every number bit for bit",
    )
    p.add_argument(
        "report", metavar="REPORT", help="replay report (tracecanary.report/v1) to recompute"
    )
    p.add_argument(
        "--input",
        required=True,
        metavar="INPUT",
        help="the trace or canary the report was made from",
    )
    p.add_argument(
        "--backends",
        default=None,
        metavar="B",
        help="check that these backends are the ones the report embeds (default: not checked)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from tracecanary.canonical import sha256_file
    from tracecanary.errors import InputError, TraceCanaryError
    from tracecanary.limits import load_json
    from tracecanary.load import load_program
    from tracecanary.sim.backends import load_backends
    from tracecanary.sim.report import verify_report

    if not Path(args.input).is_file():
        raise InputError("no such file", file=args.input)
    report = load_json(args.report)
    backends = load_backends(args.backends) if args.backends else None
    try:
        input_sha = sha256_file(args.input)
        program = load_program(args.input)
        summary = verify_report(report, program, backends=backends, input_sha256=input_sha)
    except TraceCanaryError as err:
        if err.file is None:
            err = type(err)(err.message, file=args.report, record=err.record, field=err.field)
        raise err from None
    print(
        f"report verified: {len(summary['configs'])} configuration(s) and every field recomputed "
        f"bit for bit from {args.input}"
    )
    return 0
