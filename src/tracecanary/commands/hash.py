"""``tracecanary hash FILE...``: print SHA-256 digests (directories hashed as trees)."""

from __future__ import annotations

from pathlib import Path

from tracecanary.canonical import digest_path
from tracecanary.errors import InputError


def register(sub) -> None:
    p = sub.add_parser("hash", help="print the SHA-256 digest of files (or directory trees)")
    p.add_argument("paths", nargs="+", metavar="FILE", help="files or directories to hash")
    p.set_defaults(func=run)


def run(args) -> int:
    for path in args.paths:
        if not Path(path).exists():
            raise InputError("no such file", file=path)
    for path in args.paths:
        print(f"{digest_path(path)}  {path}")
    return 0
