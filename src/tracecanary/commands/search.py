"""``tracecanary search TRACE --budgets 0,1,2,4,8,16,32,64 --backends B -o CANARY.json --log SEARCH.json``."""

from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser(
        "search", help="smallest canary whose full behavior verification still passes"
    )
    p.add_argument("trace", metavar="TRACE")
    p.add_argument(
        "--budgets",
        default="0,1,2,4,8,16,32,64",
        help="timing budgets (bare numbers are microseconds; 0 = lossless)",
    )
    p.add_argument(
        "--backends",
        default=None,
        metavar="B",
        help="simulator configurations YAML (default: the shipped example, tracecanary/defaults/backends.yaml)",
    )
    p.add_argument("--tolerances", metavar="T")
    p.add_argument("--config", action="append", metavar="NAME")
    p.add_argument("-o", "--output", required=True, metavar="CANARY.json")
    p.add_argument("--log", required=True, metavar="SEARCH.json")
    p.add_argument(
        "--verification",
        metavar="VERIFICATION.json",
        help="also write the chosen canary's verification",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.canonical import canonical_json_bytes, sha256_bytes, sha256_file, write_json
    from tracecanary.errors import ClaimFailed, located
    from tracecanary.load import load_program
    from tracecanary.sim.backends import load_backends
    from tracecanary.verify.behavior import load_tolerances
    from tracecanary.verify.search import mark_verified, parse_budgets, search, search_log_document

    backends = load_backends(args.backends)
    tolerances = load_tolerances(args.tolerances)
    budgets = parse_budgets(args.budgets)
    with located(args.trace):
        program = load_program(args.trace, executed=False)
    digest = sha256_file(args.trace)
    result = search(
        program, budgets, backends, tolerances, source_digest=digest, config_names=args.config
    )
    log = search_log_document(result, source_digest=digest, budgets_ns=budgets)
    if result.canary is None:
        write_json(args.log, log)
        raise ClaimFailed(
            f"no candidate passed verification ({len(log['candidates'])} tried; see {args.log})",
            file=args.trace,
        )
    tol_sha = sha256_bytes(canonical_json_bytes(tolerances.content))
    canary = mark_verified(result.canary, result.verification, tolerances_sha256=tol_sha)
    canary_digest = write_json(args.output, canary)
    log["canary_sha256"] = canary_digest
    write_json(args.log, log)
    if args.verification:
        verification = dict(result.verification)
        verification["canary"] = {**verification["canary"], "sha256": canary_digest}
        write_json(args.verification, verification)
    st = canary["stats"]
    print(
        f"chosen: {st['bytes_canary']:,} B ({st['byte_compression']}x smaller than the normalized source), "
        f"executes {st['occurrences_executed']:,} of {st['occurrences_logical']:,} occurrences "
        f"(execution_reduction {st['execution_reduction']}), claim verified",
        file=sys.stderr,
    )
    return 0
