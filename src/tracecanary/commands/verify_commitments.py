"""``tracecanary verify-commitments SOURCE CANARY``: recompute every receipt in CANARY
(source digest, source commitment, every interval commitment and error bound, every
exact stream) from SOURCE. Exit 0 when all hold; exit 1 naming each mismatching
segment."""

from __future__ import annotations

from tracecanary.commands import add_diagnostics_option


def register(sub) -> None:
    p = sub.add_parser(
        "verify-commitments",
        help="recompute a canary's commitments and bounds from its source",
        description=__doc__,
    )
    p.add_argument("source", metavar="SOURCE", help="the source trace / normalized table")
    p.add_argument("canary", metavar="CANARY", help="canary JSON (tracecanary.canary/v1)")
    add_diagnostics_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.diagnostics import diagnostics_to

    with diagnostics_to(args.diagnostics_json, "verify-commitments") as diagnostics:
        return _run(args, diagnostics)


def _run(args, diagnostics) -> int:
    import json

    from tracecanary.compile.document import declared_order, load_canary
    from tracecanary.diagnostics import FIX_COMMITMENTS, failed_check
    from tracecanary.errors import ClaimFailed
    from tracecanary.load import load_program
    from tracecanary.verify.commitments import verify_commitments

    canary = load_canary(args.canary)
    source = load_program(args.source, executed=False, order=declared_order(canary))
    mismatches = verify_commitments(source, canary)
    intervals = sum(
        len(s["intervals"])
        for s in canary["timing"].values()
        if s and s["encoding"] == "bounded_intervals"
    )
    if not mismatches:
        print(f"ok: source digest, source commitment and {intervals} interval commitments verified")
        return 0
    for m in mismatches:
        print(
            f"mismatch: {m['segment']}: expected {json.dumps(m['expected'])} found {json.dumps(m['found'])}"
        )
    message = (
        f"{len(mismatches)} mismatch(es); first: {mismatches[0]['segment']}; fix: {FIX_COMMITMENTS}"
    )
    diagnostics.fail(
        [
            failed_check(
                m["segment"],
                f"{m['segment']}: recomputed value differs from the canary's",
                observed=m["found"],
                expected=m["expected"],
                fix=FIX_COMMITMENTS,
            )
            for m in mismatches
        ],
        message,
    )
    raise ClaimFailed(message, file=args.canary)
