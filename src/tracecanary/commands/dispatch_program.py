"""``tracecanary dispatch-program PROGRAM... --config NAME -o DIR``: the calibration
program that measures the physical replayer's dispatch lateness for one configuration
(``sim/dispatch.py``, docs/simulator.md).

For every distinct run of three consecutive execution steps of the given PARAM programs (a
step is one op, or one fused bucket under a fused configuration) it repeats the run
``--repeats`` times, each op a copy of an exemplar entry (new occurrence ids, weight 1, no
timestamps). Replay
it with ``tracecanary replay-physical DIR --physical-config NAME`` and pass the attempt to
``tracecanary calibrate-backends --dispatch NAME=ATTEMPT``: the measured lateness then
comes from this separate run, never from the replays the simulator is judged on.

Exit codes: 0 written; 2 bad input (nothing written).
"""

from __future__ import annotations

from tracecanary.commands import add_force_option

# times each distinct three-step run is repeated in the calibration program
DEFAULT_REPEATS = 6


def register(sub) -> None:
    p = sub.add_parser(
        "dispatch-program",
        help="the calibration program of the replayer's dispatch lateness (one configuration)",
        description=__doc__,
    )
    p.add_argument("programs", nargs="+", metavar="PROGRAM", help="PARAM program directories")
    p.add_argument(
        "--config", required=True, metavar="NAME", help="the physical configuration to calibrate"
    )
    p.add_argument(
        "--physical-configs",
        default=None,
        metavar="YAML",
        help="physical configurations YAML (default: the shipped tracecanary/defaults/physical.yaml)",
    )
    p.add_argument(
        "--backend", choices=("gloo", "nccl"), default="gloo", help="the backend it will run on"
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=DEFAULT_REPEATS,
        help="repetitions of every run of consecutive steps",
    )
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="program directory")
    add_force_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.canonical import replacing_directories
    from tracecanary.physical.config import default_configs_path, resolve_config
    from tracecanary.sim.dispatch import calibration_program

    configs = args.physical_configs or str(default_configs_path())
    record = resolve_config(configs, args.config, args.backend)
    replay = {"mode": record["mode"], "op_barrier": bool(record.get("op_barrier", False))}
    replay.update({k: int(record[k]) for k in ("chunks", "bucket_bytes") if k in record})
    with replacing_directories(args.force):
        counts = calibration_program(args.programs, replay, args.output, repeats=args.repeats)
    print(
        f"{args.output}: {counts['ops']} ops, {counts['motifs']} step motifs "
        f"x {args.repeats} repeats (configuration {args.config!r})"
    )
    return 0
