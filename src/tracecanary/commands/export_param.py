"""``tracecanary export-param CANARY -o DIR [--execution full|reduced] [--skip-unsupported]``."""

from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser(
        "export-param", help="export a canary (or trace) to PARAM comms-replay basic traces"
    )
    p.add_argument("input", metavar="CANARY", help="canary JSON (or any trace TraceCanary reads)")
    p.add_argument("-o", "--output", required=True, metavar="DIR")
    p.add_argument(
        "--execution",
        choices=["full", "reduced"],
        default="full",
        help="full: every logical occurrence (motifs x weights); reduced: the executed occurrences with weight markers",
    )
    p.add_argument(
        "--skip-unsupported",
        action="store_true",
        help="skip ops PARAM cannot execute and list them in export.json",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.canonical import sha256_file
    from tracecanary.errors import located
    from tracecanary.param.export import export_param
    from tracecanary.load import load_program

    with located(args.input):
        program = load_program(args.input, executed=args.execution == "reduced")
        summary = export_param(
            program,
            args.output,
            execution=args.execution,
            source_digest=sha256_file(args.input),
            skip_unsupported=args.skip_unsupported,
        )
    skipped = f", skipped {len(summary['skipped'])}" if summary["skipped"] else ""
    print(
        f"exported {summary['occurrences_exported']} occurrences ({args.execution}) for {summary['world_size']} ranks{skipped} -> {args.output}",
        file=sys.stderr,
    )
    return 0
