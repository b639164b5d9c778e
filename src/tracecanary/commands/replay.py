"""``tracecanary replay INPUT --backends B [--config NAME...] [--ablate A...] [--isolated]
-o REPORT.json``: replay a trace or canary in the deterministic scheduler simulator.

``B`` may be the shipped example (invented NVLink parameters) or a file written by
``tracecanary calibrate-backends`` from ladders measured on your machine; an op a measured
configuration has no evidence for is refused by name (exit 2)."""

from __future__ import annotations

import sys
from pathlib import Path

from tracecanary.commands import add_backends_option, add_quiet_option
from tracecanary.sim.ranking import DEFAULT_TIE_TOLERANCE


def register(sub) -> None:
    p = sub.add_parser(
        "replay",
        help="replay a trace or canary in the deterministic scheduler simulator (a model, not hardware)",
    )
    p.add_argument("input", metavar="INPUT", help="native trace, normalized Parquet or canary")
    add_backends_option(p)
    p.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="NAME",
        help="simulate only this configuration (repeatable; default all)",
    )
    p.add_argument(
        "--ablate",
        action="append",
        default=[],
        metavar="ABLATION",
        help="simulator control (repeatable; default none): skew, overlap, order, tail remove a "
        "preserved mechanism; no_queue_reset, compute_pressure, observed_latency change one "
        "model equation (docs/simulator.md)",
    )
    p.add_argument(
        "--isolated",
        action="store_true",
        help="also replay each signature alone (nccl-tests style) and rank by it",
    )
    p.add_argument(
        "--iterations",
        type=int,
        default=None,
        metavar="N",
        help="also replay N times under seeded noise and report per-metric intervals "
        "(docs/simulator.md, noise model; default: no noise replay)",
    )
    p.add_argument("--seed", type=int, default=None, metavar="S", help="noise seed (default 0)")
    p.add_argument(
        "--service-jitter",
        type=float,
        default=None,
        metavar="REL",
        help="relative half-width j of the per-op service multiplier 1 + j*U[-1,1) (default 0.05)",
    )
    p.add_argument(
        "--arrival-jitter-ns",
        type=int,
        default=None,
        metavar="A",
        help="largest per-op arrival delay, uniform on 0..A ns (default 0)",
    )
    p.add_argument(
        "--tie-tolerance",
        type=float,
        default=DEFAULT_TIE_TOLERANCE,
        metavar="REL",
        help="relative tie tolerance of rankings",
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="REPORT.json",
        help="replay report (tracecanary.report/v1)",
    )
    add_quiet_option(p)
    p.set_defaults(func=run)


def summary_table(report: dict) -> str:
    """nccl-tests-like table: one row per configuration, times in us."""
    header = f"{'config':<20} {'p50_us':>10} {'p95_us':>10} {'p99_us':>10} {'max_us':>10} {'mean_us':>10} {'qwait_p99_us':>12} {'hidden%':>8}"
    if report["protocol"]["isolated"]:
        header += f" {'isolated_ms':>12}"
    lines = [
        "# " + report["model"]["notice"],
        "# skew: " + report["program"]["skew"]["statement"],
        header,
    ]

    def us(v):
        return "-" if v is None else f"{v / 1000:.2f}"

    for name, block in report["configs"].items():
        lat, qw = block["latency"], block["queue_wait"]
        share = block["hidden"]["share"]
        row = (
            f"{name:<20} {us(lat['p50_ns']):>10} {us(lat['p95_ns']):>10} {us(lat['p99_ns']):>10} "
            f"{us(lat['max_ns']):>10} {us(lat['mean_ns']):>10} {us(qw['p99_ns']):>12} "
            f"{'-' if share is None else f'{100 * share:.1f}':>8}"
        )
        if "isolated" in block:
            row += f" {block['isolated']['score_ns'] / 1e6:>12.3f}"
        lines.append(row)
    rk = report["rankings"]
    from tracecanary.sim.ranking import ranking_text  # ties printed as ties, as in the JSON

    lines.append("# workload ranking (mean): " + ranking_text(rk["metrics"]["mean"]))
    if "isolated" in rk:
        lines.append("# isolated ranking:        " + ranking_text(rk["isolated"]))
    return "\n".join(lines)


def run(args) -> int:
    from tracecanary.canonical import sha256_file, write_json
    from tracecanary.errors import InputError, not_a_file_reason
    from tracecanary.load import load_program
    from tracecanary.sim.backends import load_backends
    from tracecanary.sim.engine import normalize_ablations
    from tracecanary.sim.report import build_report

    if not Path(args.input).is_file():
        raise InputError(not_a_file_reason(args.input), file=args.input)
    ablations = normalize_ablations(args.ablate)
    noise = _noise(args)
    backends = load_backends(args.backends)
    backends.select(args.config, file=args.backends or "backends.yaml (shipped default)")
    program = load_program(args.input)
    report = build_report(
        program,
        backends,
        input_sha256=sha256_file(args.input),
        config_names=args.config,
        ablations=ablations,
        isolated=args.isolated,
        tie_tolerance=args.tie_tolerance,
        noise=noise,
    )
    digest = write_json(args.output, report)
    print(summary_table(report))
    print(f"report -> {args.output} sha256:{digest}", file=sys.stderr)
    return 0


def _noise(args):
    """Noise settings from the options; None without --iterations (a noise option given
    without --iterations is refused rather than silently ignored)."""
    from tracecanary.errors import InputError
    from tracecanary.sim import noise

    extras = {
        "seed": args.seed,
        "service_jitter": args.service_jitter,
        "arrival_jitter_ns": args.arrival_jitter_ns,
    }
    if args.iterations is None:
        given = [k for k, v in extras.items() if v is not None]
        if given:
            raise InputError(f"--{given[0].replace('_', '-')} needs --iterations", field=given[0])
        return None
    return noise.noise_settings(
        args.iterations,
        0 if args.seed is None else args.seed,
        noise.DEFAULT_SERVICE_JITTER if args.service_jitter is None else args.service_jitter,
        noise.DEFAULT_ARRIVAL_JITTER_NS
        if args.arrival_jitter_ns is None
        else args.arrival_jitter_ns,
    )
