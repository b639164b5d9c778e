"""``tracecanary verify-behavior SOURCE CANARY --backends B [--tolerances T] -o VERIFICATION.json``."""

from __future__ import annotations

import sys

from tracecanary.commands import (
    add_diagnostics_option,
    add_judge_inputs,
    add_quiet_option,
    add_second_capture_option,
    add_standard_option,
)


def register(sub) -> None:
    p = sub.add_parser(
        "verify-behavior",
        help="replay source and canary under every configuration; separate statuses; exit 0 only when verified",
    )
    add_judge_inputs(p, canary_help="canary JSON (tracecanary.canary/v1)")
    add_standard_option(p)
    add_second_capture_option(p)
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="VERIFICATION.json",
        help="the verification (tracecanary.verification/v1)",
    )
    add_diagnostics_option(p)
    add_quiet_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.diagnostics import diagnostics_to

    with diagnostics_to(args.diagnostics_json, "verify-behavior") as diagnostics:
        return _run(args, diagnostics)


def _run(args, diagnostics) -> int:
    from tracecanary.canonical import write_json
    from tracecanary.commands import judge_canary_against_source, load_second_capture
    from tracecanary.diagnostics import verification_cause, verification_checks
    from tracecanary.verify.behavior import describe_failures, verify_behavior

    doc = judge_canary_against_source(
        args, verify_behavior, standard=args.standard, second_capture=load_second_capture(args)
    )
    write_json(args.output, doc)
    verified = doc["claim"] == "verified"
    for line in describe_failures(doc):
        print(line, file=sys.stdout if verified else sys.stderr)
    if verified:
        return 0
    cause = verification_cause(doc)
    print(f"cause and fix: {cause}", file=sys.stderr)
    diagnostics.fail(verification_checks(doc), f"claim {doc['claim']}: {cause}")
    return diagnostics.exit_code
