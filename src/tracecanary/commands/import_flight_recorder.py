"""``tracecanary import-flight-recorder DUMP... -o OUT [--world-size N] [--declare-root K]
[--declare-even-all-to-all]``.

Each DUMP is one rank's PyTorch Flight Recorder dump (JSON or pickle; the rank is the
trailing number of its file name); all ranks of one run are given together, and OUT is
a directory of ``rank<r>.json`` native traces for ``tracecanary merge``. A pickle is read
as plain data only (nothing in it is executed). Bad input exits 2 with one line naming
the file, the entry index and the field; no output is left behind.
"""

from __future__ import annotations

from pathlib import Path

from tracecanary.commands import add_force_option
from tracecanary.errors import InputError, not_a_file_reason


def register(sub) -> None:
    p = sub.add_parser(
        "import-flight-recorder",
        help="import PyTorch Flight Recorder dumps (JSON or pickle), one per rank, as native traces",
    )
    p.add_argument(
        "dumps",
        nargs="+",
        metavar="DUMP",
        help="one rank's dump; the rank is the file name's trailing number (rank0.json, "
        "nccl_trace_rank_0)",
    )
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="directory of rank<r>.json")
    add_force_option(p)
    p.add_argument(
        "--world-size",
        type=int,
        default=None,
        metavar="N",
        help="the run's world size; a rank below it without a dump is refused "
        "(default: the number of dumps)",
    )
    p.add_argument(
        "--declare-root",
        type=int,
        default=None,
        metavar="K",
        help="declare that every broadcast/reduce was rooted at group rank K (a dump records "
        "no root; the traces' notes say it was declared) (default: refuse such collectives)",
    )
    p.add_argument(
        "--declare-even-all-to-all",
        action="store_true",
        help="declare that every all_to_all split its buffers evenly (a dump records no "
        "split sizes; the traces' notes say it was declared) (default: refuse all_to_all)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.flightrec.importer import write_imported

    paths = [str(p) for p in args.dumps]
    for path in paths:
        if not Path(path).is_file():
            raise InputError(not_a_file_reason(path), file=path)
    if args.world_size is not None and args.world_size < 1:
        raise InputError(f"--world-size must be >= 1, got {args.world_size}", field="world_size")
    if args.declare_root is not None and args.declare_root < 0:
        raise InputError(
            f"--declare-root must be >= 0, got {args.declare_root}", field="declare_root"
        )
    out = Path(args.output)
    docs = write_imported(
        paths,
        out,
        world_size=args.world_size,
        declared_root=args.declare_root,
        declared_even_all_to_all=args.declare_even_all_to_all,
    )
    for rank, doc in enumerate(docs):
        fr = doc["meta"]["flight_recorder"]
        print(
            f"{out / f'rank{rank}.json'}: rank {rank}, {len(doc['events'])} collectives, "
            f"{fr['latency_events']} timed, membership from {fr['membership']} "
            f"({fr['form']}, version {fr['version']})"
        )
    return 0
