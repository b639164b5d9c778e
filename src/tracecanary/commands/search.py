"""``tracecanary search TRACE --budgets 0,1,2,4,8,16,32,64 --backends B -o CANARY.json --log SEARCH.json``."""

from __future__ import annotations

import sys

from tracecanary.commands import (
    add_backends_option,
    add_configs_option,
    add_diagnostics_option,
    add_order_option,
    add_quiet_option,
    add_second_capture_option,
    add_standard_option,
    add_tolerances_option,
)


def register(sub) -> None:
    p = sub.add_parser(
        "search", help="smallest canary whose full behavior verification still passes"
    )
    p.add_argument("trace", metavar="TRACE", help="native trace or normalized Parquet (the source)")
    p.add_argument(
        "--budgets",
        default="0,1,2,4,8,16,32,64",
        help="timing budgets (bare numbers are microseconds; 0 = lossless)",
    )
    add_backends_option(p)
    add_tolerances_option(p)
    add_standard_option(p)
    add_second_capture_option(p)
    add_configs_option(p, what="verify under")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="CANARY.json",
        help="the chosen canary, marked verified",
    )
    p.add_argument(
        "--log",
        required=True,
        metavar="SEARCH.json",
        help="search log (tracecanary.search-log/v1): every candidate and why",
    )
    p.add_argument(
        "--verification",
        metavar="VERIFICATION.json",
        help="also write the chosen canary's verification here (default: not written)",
    )
    add_order_option(p)
    add_diagnostics_option(p)
    add_quiet_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.diagnostics import diagnostics_to

    with diagnostics_to(args.diagnostics_json, "search") as diagnostics:
        return _run(args, diagnostics)


def _run(args, diagnostics) -> int:
    from tracecanary.canonical import sha256_file, write_json
    from tracecanary.commands import load_second_capture
    from tracecanary.diagnostics import search_cause, search_log_checks, skew_check
    from tracecanary.errors import ClaimFailed, located
    from tracecanary.load import load_program
    from tracecanary.progress import note, progress
    from tracecanary.sim.backends import load_backends
    from tracecanary.verify.behavior import load_tolerances
    from tracecanary.verify.blocking import blocking_table
    from tracecanary.verify.marking import mark_verified, tolerances_digest
    from tracecanary.verify.search import parse_budgets, search, search_log_document

    backends = load_backends(args.backends)
    tolerances = load_tolerances(args.tolerances)
    budgets = parse_budgets(args.budgets)
    with located(args.trace):
        program = load_program(args.trace, executed=False, order=args.order)
    digest = sha256_file(args.trace)
    with progress(desc="search", unit="candidate") as bar:

        def candidate_done(line: str) -> None:
            bar.update(1)
            note(line)

        result = search(
            program,
            budgets,
            backends,
            tolerances,
            source_digest=digest,
            config_names=args.config,
            progress=candidate_done,
            standard=args.standard,
            second_capture=load_second_capture(args),
        )
    log = search_log_document(result, source_digest=digest, budgets_ns=budgets)
    for line in blocking_table(log["candidates"]):  # why not smaller, on the terminal
        print(line, file=sys.stderr)
    if result.canary is None:
        write_json(args.log, log)
        cause = search_cause(log, result.skew_obstacle)
        message = (
            f"no candidate passed verification ({len(log['candidates'])} tried; see {args.log}); "
            f"{cause}"
        )
        checks = search_log_checks(log)
        if result.skew_obstacle:
            checks.insert(0, skew_check(result.skew_obstacle))
        diagnostics.fail(checks, message)
        raise ClaimFailed(message, file=args.trace)
    canary = mark_verified(
        result.canary, result.verification, tolerances_sha256=tolerances_digest(tolerances)
    )
    canary_digest = write_json(args.output, canary)
    log["canary_sha256"] = canary_digest
    write_json(args.log, log)
    if args.verification:
        verification = dict(result.verification)
        verification["canary"] = {**verification["canary"], "sha256": canary_digest}
        write_json(args.verification, verification)
    st = canary["stats"]
    # the file's size; the log compares candidates before the verification receipt is added
    print(
        f"chosen: {st['bytes_canary']:,} B as written (the search log's "
        f"{log['chosen']['bytes']:,} B is the candidate before its verification receipt; "
        f"{st['byte_compression']}x smaller than the normalized source), "
        f"executes {st['occurrences_executed']:,} of {st['occurrences_logical']:,} occurrences "
        f"(execution_reduction {st['execution_reduction']}), claim verified",
        file=sys.stderr,
    )
    standard = result.verification["standard"]
    print(f"standard {standard['chosen']}: {standard['words']}", file=sys.stderr)
    if standard["wider_than_tolerance"]:
        print(
            f"source interval wider than the fixed tolerance ({len(standard['wider_than_tolerance'])}): "
            + ", ".join(standard["wider_than_tolerance"][:8]),
            file=sys.stderr,
        )
    return 0
