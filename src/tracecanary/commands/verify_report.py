"""``tracecanary verify-report REPORT --input INPUT [--backends B]``: replay a report's
declared protocol and compare every field bit for bit (exit 1 naming the first
differing field)."""

from __future__ import annotations

from tracecanary.commands import add_diagnostics_option, add_quiet_option


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
    add_diagnostics_option(p)
    add_quiet_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.diagnostics import diagnostics_to

    with diagnostics_to(args.diagnostics_json, "verify-report") as diagnostics:
        return _run(args, diagnostics)


def _run(args, diagnostics) -> int:
    from pathlib import Path

    from tracecanary.canonical import sha256_file
    from tracecanary.diagnostics import FIX_REPORT, failed_check
    from tracecanary.errors import ClaimFailed, InputError, TraceCanaryError, not_a_file_reason
    from tracecanary.limits import load_json
    from tracecanary.load import load_program
    from tracecanary.sim.backends import load_backends
    from tracecanary.sim.report import verify_report

    if not Path(args.input).is_file():
        raise InputError(not_a_file_reason(args.input), file=args.input)
    report = load_json(args.report)
    backends = load_backends(args.backends) if args.backends else None
    try:
        input_sha = sha256_file(args.input)
        program = load_program(args.input)
        summary = verify_report(report, program, backends=backends, input_sha256=input_sha)
    except TraceCanaryError as err:
        message = err.message
        if isinstance(err, ClaimFailed):
            message = f"{message}; fix: {FIX_REPORT}"
            diagnostics.fail(
                [failed_check(err.field or "report", err.message, fix=FIX_REPORT)], message
            )
        raise type(err)(
            message, file=err.file or args.report, record=err.record, field=err.field
        ) from None
    print(
        f"report verified: {len(summary['configs'])} configuration(s) and every field recomputed "
        f"bit for bit from {args.input}"
    )
    return 0
