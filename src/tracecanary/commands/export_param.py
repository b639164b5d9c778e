"""``tracecanary export-param CANARY -o DIR [--execution full|reduced] [--skip-unsupported]
[--target tracecanary|param-1e115ff]``.

``--target param-1e115ff`` writes files upstream PARAM's replayer executes with the same
semantics (``tracecanary.param.target``: send/recv on two-rank groups; ops it would
mis-execute refused, exit 2, naming the occurrence and why). The default target,
``tracecanary``, is what ``replay-physical`` reads.
"""

from __future__ import annotations

import sys

from tracecanary.commands import add_force_option
from tracecanary.param.target import DEFAULT_TARGET, TARGETS, UPSTREAM_TARGET


def register(sub) -> None:
    p = sub.add_parser(
        "export-param", help="export a canary (or trace) to PARAM comms-replay basic traces"
    )
    p.add_argument("input", metavar="CANARY", help="canary JSON (or any trace TraceCanary reads)")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="DIR",
        help="output directory: DIR/<rank>.json and DIR/export.json",
    )
    add_force_option(p)
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
    p.add_argument(
        "--target",
        choices=TARGETS,
        default=DEFAULT_TARGET,
        help=f"replayer the files are written for (default {DEFAULT_TARGET}; {UPSTREAM_TARGET}: "
        "upstream PARAM, as replay-param runs it)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.canonical import sha256_file
    from tracecanary.errors import located
    from tracecanary.load import load_program
    from tracecanary.param.export import export_param

    with located(args.input):
        program = load_program(args.input, executed=args.execution == "reduced")
        summary = export_param(
            program,
            args.output,
            execution=args.execution,
            source_digest=sha256_file(args.input),
            skip_unsupported=args.skip_unsupported,
            target=args.target,
        )
    skipped = f", skipped {len(summary['skipped'])}" if summary["skipped"] else ""
    print(
        f"exported {summary['occurrences_exported']} occurrences ({args.execution}) for {summary['world_size']} ranks{skipped} -> {args.output}",
        file=sys.stderr,
    )
    return 0
