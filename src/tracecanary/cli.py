"""The ``tracecanary`` command line.

Each stage lives in ``tracecanary.commands.<name>`` and exposes
``register(subparsers) -> None``; that function adds its sub-command and sets
``func`` (``args -> int | None``) as the parser default. Commands are discovered by
module name, so adding a stage never edits this file.

Exit codes: 0 ok; 1 a claim or gate did not hold; 2 bad input or usage (one line).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from tracecanary import __version__
from tracecanary.errors import TraceCanaryError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tracecanary",
        description="Distil, verify, export and replay communication canaries.",
    )
    parser.add_argument("--version", action="version", version=f"tracecanary {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="STAGE")
    import tracecanary.commands as commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"tracecanary.commands.{info.name}")
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        code = args.func(args)
    except TraceCanaryError as err:
        print(f"tracecanary {args.command}: error: {err.one_line()}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print(f"tracecanary {args.command}: interrupted", file=sys.stderr)
        return 130
    return int(code or 0)
