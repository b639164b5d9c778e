"""``tracecanary alphabeta INPUT... -o fit.json``: bandwidth tables and alpha/beta fits that
report their own trustworthiness (see docs/alphabeta.md).

INPUT is an nccl-tests stdout capture, an nccl-tests ``-J`` JSON report or a TraceCanary
sweep archive directory (detected by content). Bad input exits 2 with one line naming the
file, the line (record) and the field; no output is written unless everything succeeded.
"""

from __future__ import annotations

import argparse

from tracecanary.errors import InputError
from tracecanary.formats.vocab import LADDER_COLLECTIVES as COLLECTIVES


def register(sub) -> None:
    p = sub.add_parser(
        "alphabeta",
        help="fit latency/bandwidth (alpha/beta) to nccl-tests output or sweep archives, with trust gates",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="nccl-tests stdout/JSON file or sweep archive dir",
    )
    p.add_argument(
        "--tuning",
        action="append",
        metavar="LOG",
        help="NCCL_DEBUG_SUBSYS=TUNING log (repeatable; may be the nccl-tests stdout itself; default: none)",
    )
    p.add_argument(
        "--world-size",
        type=int,
        metavar="N",
        help="ranks, for inputs that do not say (default: what each input says)",
    )
    p.add_argument(
        "--collective",
        choices=COLLECTIVES,
        help="collective of old-layout runs that do not name it and whose rows are ambiguous (default: what each input says)",
    )
    p.add_argument("--r2-min", type=float, default=0.9, help="withhold beta below this R2")
    p.add_argument(
        "--share-min",
        type=float,
        default=0.25,
        help="withhold beta below this transfer share of the largest latency",
    )
    p.add_argument("--cv-max-pct", type=float, default=5.0, help="flag rungs whose CV exceeds this")
    p.add_argument(
        "--saturation-fraction",
        type=float,
        default=0.8,
        help="saturation entry: algbw stays >= this fraction of the peak",
    )
    p.add_argument(
        "--plateau-pct",
        type=float,
        default=5.0,
        help="latency plateau: median within this %% of the smallest size's",
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FIT_JSON",
        help="fit JSON (tracecanary.alphabeta/v1)",
    )
    p.add_argument(
        "--markdown",
        metavar="FIT_MD",
        help="also write a Markdown report here (default: not written)",
    )
    p.add_argument(
        "--plot-dir",
        metavar="DIR",
        help="write three PNG plots per ladder here (default: no plots)",
    )
    p.set_defaults(func=run)


def _check_params(args):
    from tracecanary.alphabeta.analysis import AnalysisParams
    from tracecanary.alphabeta.fit import GateThresholds

    def bad(flag: str, value, rule: str) -> InputError:
        return InputError(f"{flag} {value!r}: {rule}", field=flag)

    if not 0.0 <= args.r2_min <= 1.0:
        raise bad("--r2-min", args.r2_min, "must be in [0, 1]")
    if not 0.0 <= args.share_min <= 1.0:
        raise bad("--share-min", args.share_min, "must be in [0, 1]")
    if not args.cv_max_pct > 0.0:
        raise bad("--cv-max-pct", args.cv_max_pct, "must be > 0")
    if not 0.0 < args.saturation_fraction <= 1.0:
        raise bad("--saturation-fraction", args.saturation_fraction, "must be in (0, 1]")
    if not args.plateau_pct >= 0.0:
        raise bad("--plateau-pct", args.plateau_pct, "must be >= 0")
    if args.world_size is not None and args.world_size < 1:
        raise bad("--world-size", args.world_size, "must be >= 1")
    return AnalysisParams(
        gates=GateThresholds(r2_min=args.r2_min, share_min=args.share_min),
        cv_max_pct=args.cv_max_pct,
        saturation_fraction=args.saturation_fraction,
        plateau_tolerance_pct=args.plateau_pct,
    )


def run(args) -> int:
    from tracecanary.alphabeta.pipeline import compute, write_outputs

    params = _check_params(args)
    outputs = compute(
        args.inputs,
        tuning_paths=args.tuning,
        world_size=args.world_size,
        collective=args.collective,
        params=params,
        json_path=args.output,
        markdown_path=args.markdown,
        plot_dir=args.plot_dir,
    )
    write_outputs(outputs.files)
    n = len(outputs.document["ladders"])
    print(
        f"alphabeta: {n} ladder(s) from {len(args.inputs)} input(s); wrote {len(outputs.files)} file(s)"
    )
    return 0
