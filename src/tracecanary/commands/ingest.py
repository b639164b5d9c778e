"""``tracecanary ingest IN... -o OUT.parquet``: validate and normalize native traces."""

from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser(
        "ingest",
        help="validate native traces (JSON, JSON Lines, .gz, columnar Parquet/Arrow IPC captures) "
        "and normalize them to Parquet",
    )
    p.add_argument(
        "inputs", nargs="+", metavar="IN", help="tracecanary.trace/v1 files of one trace"
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="OUT.parquet",
        help="normalized table (.parquet); its sidecar .meta.json is written beside it",
    )
    p.set_defaults(func=run, streams_memory=True)  # tracecanary.memory.avoid_huge_pages


def run(args) -> int:
    from tracecanary.ingest import ingest_files

    result = ingest_files(args.inputs, args.output)
    print(
        f"ingested {result.events} events ({result.timing}) -> {result.parquet} "
        f"sha256:{result.parquet_sha256}",
        file=sys.stderr,
    )
    return 0
