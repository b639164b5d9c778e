"""``tracecanary compare-physical CANARY_ARCHIVE FULL_ARCHIVE -o REPORT.json
[--markdown REPORT.md] [--max-runtime-ratio R]``: the physical canary-vs-full report and
gate of the campaign's ``physical_report`` and ``physical_gate`` rules, for attempt
archives of ``replay-physical``.

Each argument is one attempt archive or a directory of them laid out ``<config>/rep<k>/``
(the campaign's ``physical/{source}/canary`` and ``.../full``). Exit codes: 0 the gate
passed or warned (the warning is printed); 1 the gate failed (one line naming the pair and
its figures, or the pass-time ratio and the threshold; the report is written), or no
configuration has a complete attempt of both programs (nothing written); 2 bad input
(nothing written).
"""

from __future__ import annotations

from tracecanary.commands import add_diagnostics_option


def register(sub) -> None:
    from tracecanary.physical.gate_threshold import DEFAULT_MAX_RUNTIME_RATIO

    p = sub.add_parser(
        "compare-physical",
        help="physical report and gate: a canary's attempt archives against the full program's",
        description=__doc__,
    )
    p.add_argument(
        "canary",
        metavar="CANARY_ARCHIVE",
        help="the canary's attempt archive (or <config>/rep<k>/ tree)",
    )
    p.add_argument(
        "full", metavar="FULL_ARCHIVE", help="the full program's attempt archive (or tree)"
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="REPORT.json",
        help="the report (tracecanary.physical-report/v1)",
    )
    p.add_argument(
        "--markdown",
        default=None,
        metavar="REPORT.md",
        help="also write the report as Markdown here (default: not written)",
    )
    p.add_argument(
        "--max-runtime-ratio",
        type=float,
        default=DEFAULT_MAX_RUNTIME_RATIO,
        metavar="R",
        help="the gate fails where the canary's pass takes more than R of the full program's",
    )
    p.add_argument(
        "--backends",
        default=None,
        metavar="CALIBRATED.yaml",
        help="calibrated simulator configurations: adds the simulator-vs-machine comparison "
        "(with --programs; default: none, not computed)",
    )
    p.add_argument(
        "--programs",
        nargs=2,
        default=None,
        metavar=("CANARY_DIR", "FULL_DIR"),
        help="the PARAM exports the archives replayed (for --backends; default: none)",
    )
    add_diagnostics_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.diagnostics import diagnostics_to

    with diagnostics_to(args.diagnostics_json, "compare-physical"):
        return _run(args)


def _run(args) -> int:
    from tracecanary.errors import ClaimFailed, InputError
    from tracecanary.physical.report import (
        comparison_attempts,
        gate_failure_line,
        write_physical,
    )

    if args.max_runtime_ratio <= 0:
        raise InputError("must be above 0", field="--max-runtime-ratio")
    attempts = comparison_attempts(args.canary, args.full)
    programs = dict(zip(("canary", "full"), args.programs, strict=True)) if args.programs else None
    report = write_physical(
        args.output,
        args.markdown,
        attempts,
        f"{args.canary} vs {args.full}",
        backends=args.backends,
        programs=programs,
        max_runtime_ratio=args.max_runtime_ratio,
    )
    for config, ratio in sorted(report["runtime_reduction"].items()):
        print(f"canary/full pass time {config}: {ratio:.3g}")
    gate = report["gate"]
    print(f"physical gate: {gate['status']} -> {args.output}")
    for warning in gate["warnings"]:
        print(f"warning: {warning}")
    if gate["status"] == "fail":
        raise ClaimFailed(gate_failure_line(report, f"{args.canary} vs {args.full}"))
    return 0
