"""``tracecanary verify-commitments SOURCE CANARY``: recompute every receipt in CANARY
(source digest, source commitment, every interval commitment and error bound, every
exact stream) from SOURCE. Exit 0 when all hold; exit 1 naming each mismatching
segment."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser(
        "verify-commitments",
        help="recompute a canary's commitments and bounds from its source",
        description=__doc__,
    )
    p.add_argument("source", metavar="SOURCE", help="the source trace / normalized table")
    p.add_argument("canary", metavar="CANARY", help="canary JSON (tracecanary.canary/v1)")
    p.set_defaults(func=run)


def run(args) -> int:
    import json

    from tracecanary.compile.document import load_canary
    from tracecanary.errors import ClaimFailed
    from tracecanary.load import load_program
    from tracecanary.verify.commitments import verify_commitments

    canary = load_canary(args.canary)
    try:
        source = load_program(args.source, executed=False)
    except TypeError:  # loaders without the executed keyword
        source = load_program(args.source)
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
    raise ClaimFailed(
        f"{len(mismatches)} mismatch(es); first: {mismatches[0]['segment']}",
        file=args.canary,
    )
