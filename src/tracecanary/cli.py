"""The ``tracecanary`` command line.

Each stage lives in ``tracecanary.commands.<name>`` and exposes
``register(subparsers) -> None``; that function adds its sub-command and sets
``func`` (``args -> int | None``) as the parser default. Commands are discovered by
module name, so adding a stage never edits this file. A run imports only the module of
the stage it names (``tracecanary replay ...`` imports ``commands.replay`` alone, so a
small input pays for no other stage's imports); the top-level help, ``--version``, an
unknown stage or none import them all, so every stage is listed with its help.

Exit codes: 0 ok; 1 a claim or gate did not hold; 2 bad input or usage (one line).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import math
import os
import sys

import tracecanary.commands as commands
from tracecanary import __version__
from tracecanary.canonical import check_outputs_spare_inputs, replacing_directories
from tracecanary.errors import TraceCanaryError


def terminal_columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size().columns`` gives it (``COLUMNS``
    if a positive number, else the width of standard output's terminal, else 80), without
    the import of ``shutil`` (and of zlib, bz2 and lzma with it: ~2.7 ms of every
    command) that argparse's help formatter makes to ask it."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class TerminalWidthFormatter(argparse.HelpFormatter):
    """argparse's help formatter at the width it would choose (``terminal_columns`` - 2)."""

    def __init__(self, prog: str, indent_increment=2, max_help_position=24, width=None) -> None:
        if width is None:
            width = terminal_columns() - 2
        super().__init__(prog, indent_increment, max_help_position, width)


class DefaultsShownFormatter(TerminalWidthFormatter):
    """Appends ``(default: X)`` to an option's help, so a default is written once (in
    ``add_argument``) and shown everywhere. Left as written: positionals, required
    options, flags, options without a default value (None, an empty list) and help that
    already says what the default is."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or action.required
            or action.nargs == 0
            or default is None
            or default is argparse.SUPPRESS
            or default == []
            or "default" in text
        ):
            return text
        return f"{text} (default: %(default)s)"


def finite_float(text: str) -> float:
    """``float(text)`` for a finite number; ``nan``, ``inf`` and ``-inf`` are refused (a
    timeout of ``inf`` or a tolerance of ``nan`` passes every ``<= 0`` check and fails
    later, mid-run)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


class StageParser(argparse.ArgumentParser):
    """The parser of every sub-command (and of their sub-commands): defaults shown,
    whatever other formatter a command asks for (say, raw descriptions), and every
    ``type=float`` option read by ``finite_float`` (argparse's type registry), so no
    command can be handed a NaN or an infinity."""

    def __init__(self, *args, **kwargs) -> None:
        asked = kwargs.get("formatter_class", argparse.HelpFormatter)
        if not issubclass(asked, DefaultsShownFormatter):
            asked = type(f"DefaultsShown{asked.__name__}", (DefaultsShownFormatter, asked), {})
        kwargs["formatter_class"] = asked
        super().__init__(*args, **kwargs)
        self.register("type", float, finite_float)


def command_module_names() -> list[str]:
    """Every stage's module name in ``tracecanary.commands``, sorted (stage ``a-b`` is
    module ``a_b``)."""
    import pkgutil  # listing the folder: only the top-level help needs every name

    return sorted(info.name for info in pkgutil.iter_modules(commands.__path__))


def chosen_command_module(argv: list[str]) -> str | None:
    """The module of the stage ``argv`` names (its first word, as the top-level parser
    takes no option but ``-h``/``--version``), or None when it names none or an unknown
    one (then every stage is registered: the help lists them, argparse names the choices)."""
    if not argv or argv[0].startswith("-"):
        return None
    module = argv[0].replace("-", "_")
    if "_" in argv[0] or "." in argv[0]:
        return None
    spec = importlib.util.find_spec(f"{commands.__name__}.{module}")
    return module if spec is not None and spec.origin is not None else None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every stage registered, or only the stage whose command module is
    ``only`` (see ``chosen_command_module``): the others are then never imported."""
    parser = argparse.ArgumentParser(
        prog="tracecanary",
        description="Distil, verify, export and replay communication canaries.",
        formatter_class=TerminalWidthFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tracecanary {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="STAGE", parser_class=StageParser)
    for name in [only] if only is not None else command_module_names():
        module = importlib.import_module(f"tracecanary.commands.{name}")
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the stage ``argv`` names (None: the command line, i.e. this process is the
    ``tracecanary`` command). A stage that streams through memory (``streams_memory``
    set by its parser) gets the process policy of ``tracecanary.memory`` only when the
    command is the process, never when ``main`` is called with arguments inside another
    program (a workflow job, a test, a user's script); so are the one-thread BLAS, the
    collector's threshold and the exit of ``tracecanary.command_process``."""
    from tracecanary import progress

    quiet_before = progress.quiet()
    try:
        return _run_stage(argv)
    finally:  # --quiet is this command's: a program calling main again gets its own default
        progress.set_quiet(quiet_before)
        if argv is None:  # the command is the process, which exits now
            from tracecanary.command_process import end_of_the_command

            end_of_the_command()


def _run_stage(argv: list[str] | None) -> int:
    """``main`` less the restoring of ``--quiet``."""
    owns_process = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    if owns_process:  # before any stage imports NumPy (a second call changes nothing)
        from tracecanary.command_process import take_the_process

        take_the_process()
    parser = build_parser(only=chosen_command_module(argv))
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    if owns_process and getattr(args, "streams_memory", False):
        from tracecanary.memory import avoid_huge_pages

        avoid_huge_pages()
    try:
        check_outputs_spare_inputs(*commands.outputs_and_inputs(args))
        with replacing_directories(getattr(args, "force", False)):
            code = args.func(args)
    except TraceCanaryError as err:
        print(f"tracecanary {args.command}: error: {err.one_line()}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print(f"tracecanary {args.command}: interrupted", file=sys.stderr)
        return 130
    except MemoryError:  # the input (or a raised limit) asks for more than the machine has
        print(
            f"tracecanary {args.command}: error: out of memory: the input needs more memory "
            "than this machine has; lower the limits raised in TRACECANARY_LIMITS, split the "
            "input, or run on a machine with more memory (docs/limits.md)",
            file=sys.stderr,
        )
        return 2
    return int(code or 0)
