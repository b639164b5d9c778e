"""``tracecanary import-kineto TRACE.json[.gz]... -o OUT [--rank R] [--world-size N]``.

One input: OUT is a native trace file (``.json``, ``.jsonl``, optionally ``.gz``).
Several inputs: OUT is a directory holding ``rank<r>.json`` per rank. Each input is one
rank's PyTorch profiler (Kineto) trace; the import is observational and single-rank
(see ``tracecanary.kineto.importer``). Bad input exits 2 with one line naming the
file, the trace event index and the field; no output is left behind.
"""

from __future__ import annotations

import os
from pathlib import Path

from tracecanary.canonical import atomic_output
from tracecanary.commands import add_force_option, add_quiet_option
from tracecanary.errors import ImportRefused, InputError, not_a_file_reason


def register(sub) -> None:
    p = sub.add_parser(
        "import-kineto",
        help="import PyTorch profiler (Kineto) traces, one per rank, as native traces",
    )
    p.add_argument("traces", nargs="+", metavar="TRACE", help="Kineto trace (.json or .json.gz)")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="OUT",
        help="trace file (one input) or directory of rank<r>.json (several inputs)",
    )
    add_force_option(p)
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="worker processes for several inputs (default: one per input, at most one per CPU)",
    )
    p.add_argument(
        "--rank",
        type=int,
        default=None,
        help="the rank of a single input whose trace lacks distributedInfo.rank (default: read from the trace)",
    )
    p.add_argument(
        "--world-size",
        type=int,
        default=None,
        metavar="N",
        help="the world size of traces that lack distributedInfo.world_size; refused when "
        "a trace states another (default: read from the trace)",
    )
    add_quiet_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.kineto.batch import import_kineto_files
    from tracecanary.trace_io import write_trace

    paths = [str(p) for p in args.traces]
    for path in paths:
        if not Path(path).is_file():
            raise InputError(not_a_file_reason(path), file=path)
    if args.rank is not None and len(paths) > 1:
        raise InputError("--rank applies to a single input only", field="rank")
    if args.rank is not None and args.rank < 0:
        raise InputError(f"--rank must be >= 0, got {args.rank}", field="rank")
    if args.jobs is not None and args.jobs < 1:
        raise InputError(f"--jobs must be >= 1, got {args.jobs}", field="jobs")
    if args.world_size is not None and args.world_size < 1:
        raise InputError(f"--world-size must be >= 1, got {args.world_size}", field="world_size")
    docs = import_kineto_files(paths, rank=args.rank, jobs=args.jobs, world_size=args.world_size)
    out = Path(args.output)
    if len(docs) == 1:
        write_trace(docs[0], out)
        _report(docs[0], out)
        return 0
    owner: dict[int, str] = {}
    for path, doc in zip(paths, docs, strict=True):
        rank = _rank_of(doc)
        if rank in owner:
            raise ImportRefused(
                f"rank {rank} is also the rank of {owner[rank]}",
                file=path,
                field="distributedInfo.rank",
            )
        owner[rank] = path
    with atomic_output(out, directory=True) as tmp:
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the result is a plain directory
        for doc in docs:
            write_trace(doc, Path(tmp) / f"rank{_rank_of(doc)}.json")
    for doc in docs:
        _report(doc, out / f"rank{_rank_of(doc)}.json")
    return 0


def _rank_of(doc: dict) -> int:
    return doc["meta"]["clock_domains"][0]["ranks"][0]


def _report(doc: dict, path: Path) -> None:
    k = doc["meta"]["kineto"]
    unknown = sum(k["unknown_groups"].values())
    print(
        f"{path}: rank {_rank_of(doc)}, {len(doc['events'])} collectives, "
        f"{len(k['custom_ops'])} custom op kinds, {unknown} with unknown group ({k['era'].split(' ')[0]})"
    )
