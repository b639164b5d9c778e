"""``tracecanary import-param-results DIR -o ATTEMPT/``: PARAM's
``replayedCommsPerf.rank<r>.json`` files as an attempt archive (kind ``replay``, source
``param``), rows joined by the ``canary:<occ>`` marker in ``marker_stack``.

``--program EXPORT_DIR`` (recommended): the export PARAM replayed; every row's
occurrence must be one its rank executes there (same op and sizes), and ops PARAM
skipped make the attempt ``failed``. Exit 2 on a row without a canary marker or with an
unknown one; exit 1 when the results are incomplete (archive still written).
"""

from __future__ import annotations

from tracecanary.errors import RunFailed


def register(sub) -> None:
    p = sub.add_parser(
        "import-param-results",
        help="read PARAM replayedCommsPerf.rank<r>.json files into an attempt archive",
        description=__doc__,
    )
    p.add_argument("results", metavar="DIR", help="PARAM --output-path directory")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="ATTEMPT",
        help="attempt archive directory (tracecanary.attempt/v1)",
    )
    p.add_argument(
        "--program",
        default=None,
        metavar="EXPORT_DIR",
        help="the replayed export (DIR/<rank>.json), to check the results against (default: not checked)",
    )
    p.add_argument(
        "--backend",
        choices=("gloo", "nccl"),
        default=None,
        help="backend PARAM ran with, not in its files (default: not recorded)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.param.results import import_param_results

    doc = import_param_results(
        args.results, args.output, program_dir=args.program, backend=args.backend
    )
    if doc["status"] != "complete":
        raise RunFailed(f"{doc['reason']} (archive kept in {args.output})", file=args.output)
    print(
        f"{args.output}: {doc['status']}, {doc['rows']} rows from {doc['nproc']} PARAM result files"
    )
    return 0
