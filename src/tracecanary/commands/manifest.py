"""``tracecanary manifest verify|regenerate|pack|unpack|sign|keygen``: what a reviewer runs.

Trust model (docs/integrity.md): an unsigned manifest can be rewritten consistently by
whoever can write it; pin its root with ``--expect-root`` or check a signature with
``verify --key``.
"""

from __future__ import annotations

import sys

from tracecanary.commands import add_quiet_option

EXPECT_ROOT_HELP = (
    "the root digest published with the campaign; any other root is exit 1 (default: not pinned)"
)
MANIFEST_HELP = "results/<campaign>/manifest.json"


def register(sub) -> None:
    p = sub.add_parser(
        "manifest", help="verify, regenerate, pack, unpack or sign a campaign manifest"
    )
    act = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    v = act.add_parser("verify", help="recompute every digest; exit 1 listing each mismatch")
    v.add_argument("manifest", metavar="MANIFEST", help=MANIFEST_HELP)
    v.add_argument(
        "--workdir", help="directory the campaign ran in (default: inferred from the manifest path)"
    )
    v.add_argument("--expect-root", metavar="DIGEST", help=EXPECT_ROOT_HELP)
    v.add_argument(
        "--key",
        metavar="PUBLIC_KEY",
        help="ed25519 public key (PEM): the manifest must carry a DSSE signature by it "
        "(default: no signature required)",
    )
    v.add_argument(
        "--signature",
        metavar="ENVELOPE",
        help="DSSE envelope, used with --key (default: MANIFEST.dsse.json)",
    )
    add_quiet_option(v)
    v.set_defaults(func=run_verify)
    r = act.add_parser(
        "regenerate",
        help="re-run the workflow from evidence alone in a fresh directory and compare bit for bit",
    )
    r.add_argument("manifest", metavar="MANIFEST", help=MANIFEST_HELP)
    r.add_argument(
        "--workdir", required=True, metavar="DIR", help="fresh directory to regenerate in"
    )
    r.add_argument(
        "--from",
        dest="source_root",
        help="where the evidence lies (default: inferred from the manifest path)",
    )
    r.add_argument("--cores", type=int, default=2, help="Snakemake cores (default: %(default)s)")
    r.add_argument("--expect-root", metavar="DIGEST", help=EXPECT_ROOT_HELP)
    add_quiet_option(r)
    r.set_defaults(func=run_regenerate)
    k = act.add_parser("pack", help="one portable tar.gz of manifest + config + evidence")
    k.add_argument("manifest", metavar="MANIFEST", help=MANIFEST_HELP)
    k.add_argument(
        "-o", "--output", required=True, metavar="campaign.tar.gz", help="the archive to write"
    )
    k.set_defaults(func=run_pack)
    u = act.add_parser("unpack", help="extract a packed campaign (paths and digests checked)")
    u.add_argument("archive", metavar="ARCHIVE", help="a campaign archive (manifest pack)")
    u.add_argument(
        "-o", "--output", required=True, metavar="DIR", help="fresh (absent or empty) directory"
    )
    u.add_argument("--expect-root", metavar="DIGEST", help=EXPECT_ROOT_HELP)
    u.set_defaults(func=run_unpack)
    s = act.add_parser("sign", help="sign a manifest with an ed25519 key (DSSE envelope)")
    s.add_argument("manifest", metavar="MANIFEST", help=MANIFEST_HELP)
    s.add_argument("--key", required=True, metavar="PRIVATE_KEY", help="ed25519 key (PEM PKCS#8)")
    s.add_argument(
        "-o", "--output", metavar="ENVELOPE", help="the envelope (default: MANIFEST.dsse.json)"
    )
    s.set_defaults(func=run_sign)
    g = act.add_parser("keygen", help="write a new ed25519 key pair (KEY, KEY.pub)")
    g.add_argument(
        "-o", "--output", required=True, metavar="KEY", help="private key path (KEY.pub beside it)"
    )
    g.add_argument(
        "--force",
        action="store_true",
        help="replace an existing key pair at KEY and KEY.pub (default: an existing key is refused)",
    )
    g.set_defaults(func=run_keygen)


def run_verify(args) -> int:
    from tracecanary.campaign.operations import check_root_digest, verify_manifest
    from tracecanary.campaign.signing import verify_envelope
    from tracecanary.errors import InputError

    if args.signature and not args.key:
        raise InputError("--signature needs --key", field="--signature")
    expect_root = check_root_digest(args.expect_root)
    problems = verify_manifest(args.manifest, args.workdir, expect_root)
    if problems:
        for problem in problems:
            print(f"MISMATCH {problem.line()}")
        print(f"manifest verify: {len(problems)} mismatch(es)", file=sys.stderr)
        return 1
    signed = ""
    if args.key:
        signed = f"; signed by key {verify_envelope(args.manifest, args.key, args.signature)}"
    pinned = f"; root {expect_root} as pinned" if expect_root else ""
    print(f"manifest verify: every digest matches ({args.manifest}){pinned}{signed}")
    return 0


def run_regenerate(args) -> int:
    from tracecanary.campaign.operations import check_root_digest, regenerate

    expect_root = check_root_digest(args.expect_root)
    rows = regenerate(args.manifest, args.workdir, args.source_root, args.cores, expect_root)
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
    from tracecanary.campaign.operations import check_root_digest, unpack

    n = unpack(args.archive, args.output, check_root_digest(args.expect_root))
    print(f"unpacked {n} members -> {args.output}", file=sys.stderr)
    return 0


def run_sign(args) -> int:
    from tracecanary.campaign.signing import default_envelope_path, sign_manifest

    output = args.output or default_envelope_path(args.manifest)
    kid = sign_manifest(args.manifest, args.key, output)
    print(f"signed {args.manifest} with key {kid} -> {output}", file=sys.stderr)
    return 0


def run_keygen(args) -> int:
    from tracecanary.campaign.signing import generate_key

    public, kid = generate_key(args.output, force=args.force)
    print(f"key {kid}: private {args.output}, public {public}", file=sys.stderr)
    return 0
