"""``tracecanary calibrate-backends LADDER... -o backends.yaml``: simulator configurations
built from measured ladders (sweep archives, nccl-tests output; ``NAME=PATH`` names the
setting of an nccl-tests log). With ``--physical-configs`` and ``--config``, one
simulator configuration per physical configuration, priced by the ladders measured
under its backend and env and replayed with its mode as a program transform.
``--program DIR`` (a PARAM program) checks that every configuration has evidence for
every op that program's replay uses; a configuration without it is refused by name.
``--dispatch NAME=ATTEMPT`` adds configuration NAME's measured dispatch lateness from the
attempt archive of its calibration replay (``tracecanary dispatch-program``, then
``tracecanary replay-physical`` of that program under NAME; docs/simulator.md); a name
given again pools that replay too.

Exit codes: 0 written; 2 bad input or a refusal (nothing written).
"""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser(
        "calibrate-backends",
        help="simulator configurations from measured ladders (sweeps, nccl-tests)",
        description=__doc__,
    )
    p.add_argument("ladders", nargs="+", metavar="LADDER", help="[NAME=]PATH")
    p.add_argument(
        "--physical-configs",
        default=None,
        metavar="YAML",
        help="physical configurations YAML, needed with --config (default: none)",
    )
    p.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="NAME",
        help="a physical configuration to calibrate (repeatable; default: one configuration per ladder setting)",
    )
    p.add_argument(
        "--backend",
        choices=("gloo", "nccl"),
        default=None,
        help="the backend the physical configurations run on (default: each ladder's own; gloo for --config)",
    )
    p.add_argument(
        "--program",
        action="append",
        default=[],
        metavar="PARAM_DIR",
        help="a PARAM program directory whose every op each configuration must price (repeatable; default: none checked)",
    )
    p.add_argument(
        "--dispatch",
        action="append",
        default=[],
        metavar="NAME=ATTEMPT",
        help="configuration NAME's dispatch lateness from its calibration replay's attempt "
        "archive (repeatable; a name given again pools its replays; default: none, ladders only)",
    )
    p.add_argument(
        "--overlap-efficiency",
        type=float,
        default=0.0,
        help="the simulator's overlap efficiency for every configuration",
    )
    p.add_argument(
        "--contention",
        type=float,
        default=0.0,
        help="the simulator's contention factor for every configuration",
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="BACKENDS",
        help="simulator configurations YAML (tracecanary.backends/v1)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.canonical import write_bytes_atomic
    from tracecanary.errors import InputError
    from tracecanary.sim.backends import backends_from_content
    from tracecanary.sim.calibrate import add_dispatch, calibrate, dump_document

    doc = calibrate(
        args.ladders,
        physical_configs=args.physical_configs,
        names=args.config,
        backend=args.backend,
        overlap_efficiency=args.overlap_efficiency,
        contention=args.contention,
    )
    if args.dispatch:
        doc = add_dispatch(doc, args.dispatch, file=args.output)
    backends = backends_from_content(doc, file=args.output)
    if args.program:
        from tracecanary.sim.twin import op_table, simulate_twin

        for program in args.program:
            table = op_table(program)
            for config in backends.configs.values():
                simulate_twin(table, config)
    data = dump_document(doc, args.output)
    try:
        write_bytes_atomic(args.output, data)
    except OSError as err:
        raise InputError(f"cannot write: {err.strerror}", file=args.output) from None
    n = sum(len(c["measured"]["costs"]) for c in doc["configs"].values())
    print(f"{args.output}: {len(doc['configs'])} configuration(s), {n} cost curve(s)")
    return 0
