"""``tracecanary compile INPUT (--lossless | --budget SPEC) [--prefix N]
[--max-executed-repeats K [--steady-selection S]] [--strict --backends B [--tolerances T]] -o CANARY.json``:
distil a trace into a canary, exactly or within per-field timing budgets, with a
SHA-256 commitment behind every approximation. Exit 1 (nothing written) when a field
cannot be represented within its budget, or, with ``--strict``, when the behavior
verification of the canary against INPUT does not come out ``verified`` (the failed
checks are printed); exit 2 for bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tracecanary.commands import add_diagnostics_option, add_order_option, add_quiet_option
from tracecanary.compile.selection import DEFAULT_STEADY_SELECTION, STEADY_SELECTIONS
from tracecanary.errors import InputError

STAT_ORDER = (
    "occurrences_source",
    "events_source",
    "records_structure",
    "records_timing",
    "records_canary",
    "event_compression",
    "bytes_source",
    "bytes_canary",
    "byte_compression",
    "compressed",
    "occurrences_logical",
    "occurrences_executed",
    "execution_reduction",
    "gap_issue_drift_max_ns",
)


def register(sub) -> None:
    p = sub.add_parser(
        "compile",
        help="distil a trace into a canary (lossless, or within a timing budget with receipts)",
        description=__doc__,
    )
    p.add_argument("input", metavar="INPUT", help="native trace, normalized Parquet or canary")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--lossless", action="store_true", help="keep every timing value exactly")
    mode.add_argument(
        "--budget",
        metavar="SPEC",
        help="per-field max error, e.g. skew=2us,overlap=5us,gap=5us,latency=5us (omitted fields: exact; no default: give --lossless or --budget)",
    )
    p.add_argument(
        "--budget-overrides",
        metavar="JSON",
        help="file: {signature_id: {field: amount}} replacing field budgets per signature (default: none)",
    )
    p.add_argument(
        "--prefix",
        type=int,
        metavar="N",
        help="compile only the first N occurrences (coverage partial; default: all)",
    )
    p.add_argument(
        "--max-records",
        type=int,
        metavar="N",
        help="at most N encoded records per timing field; fail (exit 1) if the budget needs more (default: no limit)",
    )
    p.add_argument(
        "--max-executed-repeats",
        type=int,
        metavar="K",
        help="reduced execution: run K steady-state repetitions of each repeated record, tail windows whole (default: every repetition runs)",
    )
    p.add_argument(
        "--steady-selection",
        choices=STEADY_SELECTIONS,
        metavar="S",
        help=f"with --max-executed-repeats: which K steady repetitions run, {' or '.join(STEADY_SELECTIONS)} (time: evenly spaced in repetition order; skew_quantile: evenly spaced quantiles of their summed arrival skew; default: {DEFAULT_STEADY_SELECTION})",
    )
    p.add_argument(
        "--strict", action="store_true", help="verify behavior before writing (needs --backends)"
    )
    p.add_argument(
        "--backends",
        metavar="B",
        help="simulator configurations YAML for --strict (no default: --strict needs it)",
    )
    p.add_argument(
        "--tolerances",
        metavar="T",
        help="tolerances YAML for --strict (default: the shipped tracecanary/defaults/tolerances.yaml)",
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="CANARY.json",
        help="where to write the canary (tracecanary.canary/v1)",
    )
    add_order_option(p)
    add_diagnostics_option(p)
    add_quiet_option(p)
    p.set_defaults(func=run)


def _overrides(path: str | None) -> dict:
    if not path:
        return {}
    from tracecanary.limits import load_json

    doc = load_json(path)
    if not isinstance(doc, dict):
        raise InputError("budget overrides must be a JSON object", file=path)
    return doc


def run(args) -> int:
    from tracecanary.diagnostics import diagnostics_to

    if args.diagnostics_json and not args.strict:
        raise InputError(
            "--diagnostics-json is only used with --strict (the only claim compile checks)",
            field="diagnostics_json",
        )
    with diagnostics_to(args.diagnostics_json, "compile") as diagnostics:
        return _run(args, diagnostics)


def _run(args, diagnostics) -> int:
    from tracecanary.canonical import write_json
    from tracecanary.compile import compile_program, parse_budget
    from tracecanary.load import load_program
    from tracecanary.progress import progress

    if args.strict and not args.backends:
        raise InputError("--strict needs --backends", field="backends")
    if args.backends and not args.strict:
        raise InputError("--backends is only used with --strict", field="backends")
    if args.tolerances and not args.strict:
        raise InputError("--tolerances is only used with --strict", field="tolerances")
    if args.max_executed_repeats is not None and args.max_executed_repeats < 1:
        raise InputError("--max-executed-repeats must be >= 1", field="max_executed_repeats")
    if args.steady_selection is not None and args.max_executed_repeats is None:
        raise InputError(
            "--steady-selection is only used with --max-executed-repeats", field="steady_selection"
        )
    backends = tolerances = None
    if args.strict:  # bad configuration files are refused before any compile work
        from tracecanary.sim.backends import load_backends
        from tracecanary.verify.behavior import load_tolerances

        backends = load_backends(args.backends)
        tolerances = load_tolerances(args.tolerances)
    budget = None
    if not args.lossless:
        budget = parse_budget(args.budget, _overrides(args.budget_overrides))
    elif args.budget_overrides:
        raise InputError("--budget-overrides needs --budget", field="budget_overrides")
    policy = None
    if args.max_executed_repeats is not None:
        policy = {"max_executed_repeats": args.max_executed_repeats}
        if args.steady_selection is not None:
            policy["steady_selection"] = args.steady_selection
    stages = ["load", "compile", *(["verify"] if args.strict else []), "write"]
    with progress(total=len(stages), desc="compile", unit="stage") as bar:  # a terminal only

        def stage(name: str) -> None:
            bar.set_postfix_str(name)
            bar.update(stages.index(name) - bar.n)

        stage("load")
        source = load_program(args.input, executed=False, order=args.order)
        stage("compile")
        canary = compile_program(
            source,
            budget=budget,
            prefix=args.prefix,
            max_records=args.max_records,
            execution_policy=policy,
        )
        if args.strict:
            from tracecanary.verify.strict import StrictVerificationFailed, strict_gate

            stage("verify")
            try:
                canary = strict_gate(source, canary, backends, tolerances, source_file=args.input)
            except StrictVerificationFailed as refusal:
                bar.close()
                for line in refusal.failures:
                    print(line, file=sys.stderr)
                raise _with_cause(refusal, diagnostics) from None
        stage("write")
        digest = write_json(args.output, canary)
    print(f"canary: {Path(args.output)}")
    print(f"sha256: {digest}")
    print(f"timing_mode: {canary['timing_mode']}")
    print(f"coverage: {canary['coverage']}")
    print(f"claim: {canary['claim']}")
    if canary["claim"] == "behaviorally_unverified":
        for reason in canary["claim_reasons"][:-1]:  # the last says only the verifier verifies
            print(f"claim reason: {reason}")
    for key in STAT_ORDER:
        print(f"{key}: {json.dumps(canary['stats'][key])}")
    return 0


def _with_cause(refusal, diagnostics):
    """The --strict refusal with its cause and fix (``diagnostics.verification_cause``;
    a skew obstacle's own message already names both), its checks recorded."""
    from tracecanary.diagnostics import verification_cause, verification_checks

    doc = refusal.verification
    if doc is None:
        return refusal
    message = refusal.message
    if not doc["source"].get("skew_obstacle"):
        message = f"{message}; {verification_cause(doc)}"
    diagnostics.fail(verification_checks(doc), message)
    return type(refusal)(
        message,
        failures=refusal.failures,
        verification=doc,
        file=refusal.file,
        record=refusal.record,
        field=refusal.field,
    )
