"""``tracecanary expand CANARY [--executed] -o TRACE(.json|.jsonl)[.gz]``: rebuild the occurrence-level
program a canary stands for (logical, default) or what a replay of it runs
(``--executed``: executed occurrences only, with weights in ``meta.execution``), as a
native ``tracecanary.trace/v1`` JSON trace."""

from __future__ import annotations

from pathlib import Path

from tracecanary.errors import InputError


def register(sub) -> None:
    p = sub.add_parser(
        "expand", help="rebuild the trace a canary stands for (or executes)", description=__doc__
    )
    p.add_argument("canary", metavar="CANARY", help="canary JSON (tracecanary.canary/v1)")
    p.add_argument(
        "--executed", action="store_true", help="only the executed occurrences, with weights"
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="TRACE.json",
        help="native trace: .json or .jsonl, optionally .gz",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.canonical import sha256_file
    from tracecanary.compile.document import load_canary
    from tracecanary.compile.expand import expand_canary, expanded_trace_meta
    from tracecanary.compile.tracefile import write_program_trace
    from tracecanary.errors import TraceCanaryError

    if Path(args.output).suffix == ".parquet":
        raise InputError(
            "expand writes a native trace (JSON); Parquet output is not supported", field="output"
        )
    canary = load_canary(args.canary)
    try:
        program = expand_canary(canary, executed=args.executed)
    except TraceCanaryError as err:
        if err.file is None:
            err.file = str(args.canary)
        raise
    meta = expanded_trace_meta(
        canary,
        program,
        executed=args.executed,
        canary_name=Path(args.canary).name,
        canary_sha256=sha256_file(args.canary),
    )
    digest = write_program_trace(program, meta, args.output)
    print(f"trace: {args.output}")
    print(f"sha256: {digest}")
    print(f"occurrences: {program.n}")
    print(f"events: {program.member_count}")
    if args.executed:
        print(f"weight_sum: {float(program.column('weight').sum())!r}")
    return 0
