"""``tracecanary export-perfetto SOURCE CANARY [--attempt ATTEMPT] -o TRACE.json``: the
source, the canary's executed occurrences (with their weights and the tail windows) and,
optionally, a physical attempt as Chrome Trace Event JSON, for ui.perfetto.dev and
chrome://tracing: one track per rank and group (``tracecanary.campaign.chrome_trace``)."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser(
        "export-perfetto",
        help="source, canary and a physical attempt as Chrome Trace Event JSON (Perfetto)",
        description=__doc__,
    )
    p.add_argument("source", metavar="SOURCE", help="native trace or normalized Parquet")
    p.add_argument("canary", metavar="CANARY", help="a canary of that source")
    p.add_argument(
        "--attempt",
        default=None,
        metavar="ATTEMPT",
        help="a replay-physical attempt archive to add (default: none)",
    )
    p.add_argument(
        "--label",
        default=None,
        help="the source's name in the trace (default: the SOURCE path)",
    )
    p.add_argument("-o", "--output", required=True, metavar="TRACE.json", help="the trace")
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.campaign.chrome_trace import write_chrome_trace

    digest = write_chrome_trace(
        args.output, args.source, args.canary, attempt=args.attempt, label=args.label
    )
    print(f"wrote {args.output} sha256:{digest} (open in ui.perfetto.dev or chrome://tracing)")
    return 0
