"""``tracecanary controls SOURCE CANARY [--backends B] [--tolerances T] [--iterations N]
[--seed S] -o CONTROLS.json``.

Replays SOURCE and CANARY's executed program under each simulator ablation and under
seeded noise and says, per configuration, whether the canary still answers like the
source (``tracecanary.verify.controls``; a table on stdout and optionally as markdown).
A measurement, not a claim: exit 0 whenever the document is written.
"""

from __future__ import annotations

DEFAULT_ITERATIONS = 20  # noisy replays per program in a campaign's controls


def register(sub) -> None:
    from tracecanary.commands import add_judge_inputs, add_table_outputs

    p = sub.add_parser(
        "controls",
        help="replay source and canary under each simulator ablation and seeded noise: "
        "does the canary respond like its source?",
    )
    add_judge_inputs(p, canary_help="the canary to put under the controls")
    p.add_argument(
        "--iterations",
        type=int,
        default=DEFAULT_ITERATIONS,
        metavar="N",
        help="noisy replays of each program (default: %(default)s)",
    )
    p.add_argument("--seed", type=int, default=0, metavar="S", help="noise seed (default: 0)")
    p.add_argument(
        "--service-jitter",
        type=float,
        default=None,
        metavar="REL",
        help="relative half-width j of the per-op service multiplier 1 + j*U[-1,1) "
        "(default: the noise model's, 0.05; docs/simulator.md)",
    )
    p.add_argument(
        "--arrival-jitter-ns",
        type=int,
        default=None,
        metavar="A",
        help="largest per-op arrival delay, uniform on 0..A ns (default: the noise model's, 0)",
    )
    add_table_outputs(p, metavar="CONTROLS.json", what="the controls document")
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.canonical import write_json, write_text
    from tracecanary.commands import judge_canary_against_source
    from tracecanary.sim.noise import noise_settings
    from tracecanary.verify.controls import compare_controls, controls_table

    given = {
        "service_jitter": args.service_jitter,
        "arrival_jitter_ns": args.arrival_jitter_ns,
    }
    noise = noise_settings(
        args.iterations, args.seed, **{k: v for k, v in given.items() if v is not None}
    )
    doc = judge_canary_against_source(args, compare_controls, noise=noise)
    table = controls_table(doc)
    write_json(args.output, doc)
    if args.markdown:
        write_text(args.markdown, table)
    print(table, end="")
    return 0
