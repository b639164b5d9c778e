"""``tracecanary derive-ladders PROGRAM_DIR... [--physical-configs Y] [--config NAME...]
[--covered COLLECTIVE:DTYPE:RANKS...] -o LADDERS.json``: the ladder sweeps the physical
replays of PARAM exports need (one per collective, dtype and group size their calls use
under each configuration, at the sizes they use; ``tracecanary.physical.ladders``), each a
``tracecanary sweep`` specification, printed as the command that runs it. The campaign
derives them this way when ``physical.sweeps`` is not given."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser(
        "derive-ladders",
        help="the ladder sweeps a PARAM export's physical replay needs (for calibrate-backends)",
        description=__doc__,
    )
    p.add_argument(
        "programs", nargs="+", metavar="PROGRAM_DIR", help="export-param outputs (DIR/<rank>.json)"
    )
    p.add_argument(
        "--physical-configs",
        default=None,
        metavar="Y",
        help="physical configurations file (default: the shipped physical.yaml)",
    )
    p.add_argument(
        "--config",
        action="append",
        metavar="NAME",
        help="configurations whose replays to cover (repeatable; default: the file's default)",
    )
    p.add_argument(
        "--backend", choices=("gloo", "nccl"), default="gloo", help="torch.distributed backend"
    )
    p.add_argument(
        "--covered",
        action="append",
        default=[],
        metavar="COLLECTIVE:DTYPE:RANKS",
        help="a ladder you sweep yourself: not derived (repeatable; default: none)",
    )
    p.add_argument("--warmup", type=int, default=2, help="untimed iterations per rung")
    p.add_argument("--iters", type=int, default=5, help="timed iterations per rung")
    p.add_argument("--cycles", type=int, default=3, help="passes over the ladder")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="LADDERS.json",
        help="the ladders (tracecanary.ladders/v1)",
    )
    p.set_defaults(func=run)


def _covered_key(text: str) -> tuple[str, str, int]:
    from tracecanary.errors import InputError

    parts = text.split(":")
    if len(parts) != 3 or not parts[2].isdigit():
        raise InputError(
            f"{text!r} is not COLLECTIVE:DTYPE:RANKS (e.g. all_reduce:float32:4)", field="--covered"
        )
    return (parts[0], parts[1], int(parts[2]))


def run(args) -> int:
    from tracecanary.canonical import write_json
    from tracecanary.formats.schemas import validate
    from tracecanary.physical.config import default_configs_path, resolve_config
    from tracecanary.physical.ladders import derive_ladders, sweep_argv

    covered = {_covered_key(c) for c in args.covered}
    path = args.physical_configs or default_configs_path()
    configs = [resolve_config(path, name, args.backend) for name in (args.config or [None])]
    doc = derive_ladders(
        list(args.programs), configs, covered=covered, warmup=args.warmup, iters=args.iters,
        cycles=args.cycles,
    )  # fmt: skip
    validate(doc, "ladders", file=args.output)
    write_json(args.output, doc)
    for ladder in doc["ladders"]:
        argv = sweep_argv(ladder, backend=args.backend, output=f"LADDERS/{ladder['id']}")
        print("tracecanary " + " ".join(argv))
    for item in doc["not_swept"]:
        print(
            f"not swept: {item['collective']} {item['dtype']} on {item['ranks']} ranks: {item['reason']}"
        )
    print(f"{len(doc['ladders'])} ladder(s) -> {args.output}")
    return 0
