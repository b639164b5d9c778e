"""``tracecanary compare BASELINE.json CANDIDATE.json [--threshold p50=3%,p99=5%,...]
[--config NAME|BASE:CAND] [--allow-different-inputs] -o verdict.json [--markdown verdict.md]``:
the rollout gate (exit 1 when a threshold trips)."""

from __future__ import annotations

from tracecanary.commands import add_diagnostics_option


def register(sub) -> None:
    from tracecanary.gate.compare import DEFAULT_THRESHOLDS, DEFAULT_WARN_FRACTION

    p = sub.add_parser(
        "compare", help="rollout gate: compare a baseline and a candidate replay report"
    )
    p.add_argument(
        "baseline",
        metavar="BASELINE.json",
        help="replay report (tracecanary.report/v1) of the baseline",
    )
    p.add_argument(
        "candidate",
        metavar="CANDIDATE.json",
        help="replay report (tracecanary.report/v1) of the candidate",
    )
    p.add_argument(
        "--threshold",
        default=DEFAULT_THRESHOLDS,
        metavar="SPEC",
        help="comma-separated METRIC=N%% or METRIC=N(ns|us|ms|s)",
    )
    p.add_argument(
        "--warn-fraction",
        type=float,
        default=DEFAULT_WARN_FRACTION,
        metavar="F",
        help="warn from this fraction of a threshold",
    )
    p.add_argument(
        "--config",
        default=None,
        metavar="NAME|BASE:CAND",
        help="configuration(s) to compare (default: the only one, or every common name)",
    )
    p.add_argument(
        "--allow-different-inputs",
        action="store_true",
        help="compare reports of different inputs or protocols on purpose",
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="verdict.json",
        help="the verdict (tracecanary.verdict/v1)",
    )
    p.add_argument(
        "--markdown",
        default=None,
        metavar="verdict.md",
        help="also write the verdict as Markdown here (default: not written)",
    )
    add_diagnostics_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.diagnostics import diagnostics_to

    with diagnostics_to(args.diagnostics_json, "compare") as diagnostics:
        return _run(args, diagnostics)


def _run(args, diagnostics) -> int:
    import contextlib

    from tracecanary.canonical import atomic_output, canonical_json_bytes, sha256_bytes, sha256_file
    from tracecanary.diagnostics import FIX_GATE, failed_check
    from tracecanary.gate.compare import compare_reports, parse_thresholds, verdict_markdown
    from tracecanary.gate.reports import load_report

    thresholds = parse_thresholds(args.threshold)
    baseline = load_report(args.baseline)
    candidate = load_report(args.candidate)
    verdict = compare_reports(
        baseline,
        candidate,
        thresholds=thresholds,
        warn_fraction=args.warn_fraction,
        config=args.config,
        allow_different_inputs=args.allow_different_inputs,
        names=(args.baseline, args.candidate),
        digests=(sha256_file(args.baseline), sha256_file(args.candidate)),
    )
    data = canonical_json_bytes(verdict)
    with contextlib.ExitStack() as stack:
        # both outputs appear together or not at all
        tmp_json = stack.enter_context(atomic_output(args.output))
        tmp_json.write_bytes(data)
        if args.markdown:
            tmp_md = stack.enter_context(atomic_output(args.markdown))
            tmp_md.write_text(verdict_markdown(verdict), encoding="utf-8")
    for t in verdict["tripped"]:
        rel = "n/a" if t["relative"] is None else f"{100 * t['relative']:+.2f}%"
        print(
            f"tripped: {t['baseline_config']} -> {t['candidate_config']} {t['metric']} {rel} (threshold {t['threshold']})"
        )
    print(f"verdict: {verdict['verdict']} -> {args.output} sha256:{sha256_bytes(data)}")
    if verdict["verdict"] != "fail":
        return 0
    print(f"fix: {FIX_GATE}")
    diagnostics.fail(
        [
            failed_check(
                t["metric"],
                f"{t['baseline_config']} -> {t['candidate_config']} {t['metric']} regressed",
                config=t["candidate_config"],
                observed={"relative": t["relative"], "delta_ns": t["delta_ns"]},
                limit=t["threshold"],
                fix=FIX_GATE,
            )
            for t in verdict["tripped"]
        ],
        f"verdict fail: {len(verdict['tripped'])} threshold(s) tripped",
    )
    return diagnostics.exit_code
