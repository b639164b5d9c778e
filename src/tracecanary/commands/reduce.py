"""``tracecanary reduce TRACE --backends B -o REDUCED.json``: the ddmin baseline (ranking-only oracle)."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser(
        "reduce",
        help="ddmin with a ranking-only oracle: the baseline verify-behavior refuses",
    )
    p.add_argument("trace", metavar="TRACE")
    p.add_argument(
        "--backends",
        default=None,
        metavar="B",
        help="simulator configurations YAML (default: the shipped example, tracecanary/defaults/backends.yaml)",
    )
    p.add_argument(
        "--config", action="append", metavar="NAME", help="configurations to rank (default: all)"
    )
    p.add_argument("--tie-tolerance", type=float, default=0.01)
    p.add_argument("-o", "--output", required=True, metavar="REDUCED.json")
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.canonical import sha256_file
    from tracecanary.compile.tracefile import trace_meta, write_trace
    from tracecanary.errors import located
    from tracecanary.load import load_program
    from tracecanary.sim.backends import load_backends
    from tracecanary.verify.reduce import reduce_program, subset_program

    backends = load_backends(args.backends)
    with located(args.trace):
        program = load_program(args.trace)
    result = reduce_program(program, backends, args.tie_tolerance, args.config)
    reduced = subset_program(program, result.kept)
    members_in = len(program.members)
    members_out = int(program.members["occ"].isin(result.kept).sum())
    reduction = {
        "method": "ddmin (Zeller-Hildebrandt) with a ranking-only oracle",
        "events_in": program.n,
        "events_out": len(result.kept),
        "rank_events_in": members_in,
        "rank_events_out": members_out,
        "events_are": "collective occurrences (each spans the ranks of its group)",
        "oracle_calls": result.oracle_calls,
        "decisions_checked": result.decisions_checked,
        "tie_tolerance": args.tie_tolerance,
        "kept_occurrences": result.kept,
        "source_sha256": sha256_file(args.trace),
        "backends_sha256": backends.sha256,
        "warning": "this trace preserves configuration rankings only; it is not a canary and carries no behavioral claim",
    }
    meta = trace_meta(
        reduced,
        source=f"tracecanary reduce of {args.trace}",
        notes=["ddmin baseline output: kept to show why ranking preservation alone is too weak"],
        extra={"reduction": reduction},
    )
    write_trace(args.output, reduced, meta)
    print(
        f"ddmin reduced {program.n} -> {len(result.kept)} events in {result.oracle_calls} oracle calls "
        f"({result.decisions_checked} ranking decisions preserved)"
    )
    return 0
