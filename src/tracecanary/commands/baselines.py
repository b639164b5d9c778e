"""``tracecanary baselines SOURCE CANARY [--backends B] [--tolerances T] [--seed S] -o BASELINES.json``.

Draws the sampling baselines (random, frequency, k-means cluster, stratified) of SOURCE at
CANARY's executed size, replays and checks each like a canary, and writes the
``tracecanary.baselines/v1`` document (``tracecanary.verify.baselines``), optionally a
markdown table beside it. A measurement, not a claim: exit 0 whenever it is written.
"""

from __future__ import annotations

DEFAULT_SEED = 20261201  # the sampling seed a campaign uses unless told otherwise


def register(sub) -> None:
    from tracecanary.commands import add_judge_inputs, add_table_outputs

    p = sub.add_parser(
        "baselines",
        help="random/frequency/cluster/stratified samples at the canary's size, checked like it",
    )
    add_judge_inputs(p, canary_help="the canary whose executed size is matched")
    p.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        help="seed of every sampling method (default: %(default)s)",
    )
    add_table_outputs(p, metavar="BASELINES.json", what="the baselines document")
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.canonical import write_json, write_text
    from tracecanary.commands import judge_canary_against_source
    from tracecanary.errors import InputError
    from tracecanary.verify.baselines import baselines_table, compare_baselines

    if args.seed < 0:
        raise InputError(f"seed must be >= 0, got {args.seed}", field="--seed")
    doc = judge_canary_against_source(args, compare_baselines, seed=args.seed)
    table = baselines_table(doc)
    write_json(args.output, doc)
    if args.markdown:
        write_text(args.markdown, table)
    print(table, end="")
    return 0
