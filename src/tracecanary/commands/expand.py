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
    p.add_argument("canary", metavar="CANARY")
    p.add_argument(
        "--executed", action="store_true", help="only the executed occurrences, with weights"
    )
    p.add_argument("-o", "--output", required=True, metavar="TRACE.json")
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.canonical import sha256_file
    from tracecanary.compile.document import load_canary
    from tracecanary.compile.execution import executed_selection
    from tracecanary.compile.expand import expand_canary
    from tracecanary.compile.tracefile import trace_meta, write_trace
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
    notes = [
        f"expanded ({'executed' if args.executed else 'logical'}) from a {canary['timing_mode']} canary",
    ]
    if canary["timing_mode"] != "lossless":
        notes.append(
            "timing values are interval representatives within the canary's stated budgets"
        )
    extra = {
        "canary": {
            "sha256": sha256_file(args.canary),
            "source_digest": canary["source"]["digest"],
            "timing_mode": canary["timing_mode"],
            "coverage": canary["coverage"],
            "claim": canary["claim"],
            "expansion": "executed" if args.executed else "logical",
        }
    }
    if args.executed:
        idx, weights = executed_selection(canary)
        extra["execution"] = {
            "occurrences_logical": int(canary["structure"]["occurrences"]),
            "occurrences_executed": int(len(idx)),
            "logical_occ": [int(i) for i in idx],
            "weights": [float(w) for w in weights],
        }
    meta = trace_meta(
        program, source=f"tracecanary expand {Path(args.canary).name}", notes=notes, extra=extra
    )
    digest = write_trace(args.output, program, meta)
    print(f"trace: {args.output}")
    print(f"sha256: {digest}")
    print(f"occurrences: {program.n}")
    print(f"events: {len(program.members)}")
    if args.executed:
        print(f"weight_sum: {float(program.occurrences['weight'].sum())!r}")
    return 0
