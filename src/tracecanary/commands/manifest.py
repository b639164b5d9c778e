"""``tracecanary manifest verify|regenerate|pack|unpack``: what a reviewer runs."""

from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("manifest", help="verify, regenerate, pack or unpack a campaign manifest")
    act = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    v = act.add_parser("verify", help="recompute every digest; exit 1 listing each mismatch")
    v.add_argument("manifest", metavar="MANIFEST")
    v.add_argument(
        "--workdir", help="directory the campaign ran in (default: inferred from the manifest path)"
    )
    v.set_defaults(func=run_verify)
    r = act.add_parser(
        "regenerate",
        help="re-run the workflow from evidence alone in a fresh directory and compare bit for bit",
    )
    r.add_argument("manifest", metavar="MANIFEST")
    r.add_argument(
        "--workdir", required=True, metavar="DIR", help="fresh directory to regenerate in"
    )
    r.add_argument(
        "--from",
        dest="source_root",
        help="where the evidence lies (default: inferred from the manifest path)",
    )
    r.add_argument("--cores", type=int, default=2)
    r.set_defaults(func=run_regenerate)
    k = act.add_parser("pack", help="one portable tar.gz of manifest + config + evidence")
    k.add_argument("manifest", metavar="MANIFEST")
    k.add_argument("-o", "--output", required=True, metavar="campaign.tar.gz")
    k.set_defaults(func=run_pack)
    u = act.add_parser("unpack", help="extract a packed campaign (paths checked)")
    u.add_argument("archive", metavar="ARCHIVE")
    u.add_argument("-o", "--output", required=True, metavar="DIR")
    u.set_defaults(func=run_unpack)


def run_verify(args) -> int:
    from tracecanary.campaign.operations import verify_manifest

    problems = verify_manifest(args.manifest, args.workdir)
    if problems:
        for problem in problems:
            print(f"MISMATCH {problem.line()}")
        print(f"manifest verify: {len(problems)} mismatch(es)", file=sys.stderr)
        return 1
    print(f"manifest verify: every digest matches ({args.manifest})")
    return 0


def run_regenerate(args) -> int:
    from tracecanary.campaign.operations import regenerate

    rows = regenerate(args.manifest, args.workdir, args.source_root, args.cores)
    width = max((len(r.path) for r in rows), default=10)
    print(f"{'artifact':<{width}}  status           detail")
    for row in rows:
        print(f"{row.path:<{width}}  {row.status:<15}  {row.detail}")
    counts = {
        s: sum(r.status == s for r in rows)
        for s in ("regenerated", "mismatched", "not_regenerable")
    }
    print(", ".join(f"{v} {k}" for k, v in counts.items()))
    failed = counts["mismatched"] or any(
        r.status == "not_regenerable" and "workflow failed" in r.detail for r in rows
    )
    return 1 if failed else 0


def run_pack(args) -> int:
    from tracecanary.campaign.operations import pack

    n = pack(args.manifest, args.output)
    print(f"packed {n} files -> {args.output}", file=sys.stderr)
    return 0


def run_unpack(args) -> int:
    from tracecanary.campaign.operations import unpack

    n = unpack(args.archive, args.output)
    print(f"unpacked {n} members -> {args.output}", file=sys.stderr)
    return 0
