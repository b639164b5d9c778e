"""``tracecanary reduce TRACE --backends B -o REDUCED.json``: the ddmin baseline (ranking-only oracle)."""

from __future__ import annotations

from tracecanary.commands import add_backends_option, add_configs_option
from tracecanary.sim.ranking import DEFAULT_TIE_TOLERANCE


def register(sub) -> None:
    p = sub.add_parser(
        "reduce",
        help="ddmin with a ranking-only oracle: the baseline verify-behavior refuses",
    )
    p.add_argument("trace", metavar="TRACE", help="native trace, normalized Parquet or canary")
    add_backends_option(p)
    add_configs_option(p, what="rank")
    p.add_argument(
        "--tie-tolerance",
        type=float,
        default=DEFAULT_TIE_TOLERANCE,
        help="relative latency difference under which two configurations tie",
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="REDUCED.json",
        help="the reduced trace (native JSON)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.canonical import sha256_file
    from tracecanary.compile.tracefile import write_program_trace
    from tracecanary.errors import located
    from tracecanary.load import load_program
    from tracecanary.sim.backends import load_backends
    from tracecanary.verify.reduce import reduce_program, reduced_trace

    backends = load_backends(args.backends)
    with located(args.trace):
        program = load_program(args.trace)
    result = reduce_program(program, backends, args.tie_tolerance, args.config)
    reduced, meta = reduced_trace(
        program,
        result,
        tie_tolerance=args.tie_tolerance,
        source=args.trace,
        source_sha256=sha256_file(args.trace),
        backends_sha256=backends.sha256,
    )
    write_program_trace(reduced, meta, args.output)
    print(
        f"ddmin reduced {program.n} -> {len(result.kept)} events in {result.oracle_calls} oracle calls "
        f"({result.decisions_checked} ranking decisions preserved)"
    )
    return 0
