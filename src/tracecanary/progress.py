"""Progress on long work, shown only to a person at a terminal.

Guarantees: nothing is written unless stderr is a TTY and ``--quiet`` was not given
(``set_quiet``); what is written goes to stderr only, never to stdout or an output file,
so redirected, piped and Snakemake-logged runs are byte-for-byte unchanged. Bars are
tqdm's (``progress``); a status line between bars goes through ``note``, which keeps an
open bar intact. This module imports no other tracecanary module, so every layer may use it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

_quiet = False


def set_quiet(quiet: bool) -> None:
    """``--quiet``: no progress from now on in this process (True), or back to the default."""
    global _quiet
    _quiet = bool(quiet)


def quiet() -> bool:
    """Whether ``--quiet`` is in force in this process (``set_quiet``)."""
    return _quiet


def enabled() -> bool:
    """True when progress is shown: stderr is a terminal and ``--quiet`` was not given."""
    if _quiet:
        return False
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


def progress(
    iterable: Iterable | None = None,
    *,
    total: int | None = None,
    desc: str,
    unit: str = "it",
) -> Any:
    """A tqdm bar over ``iterable`` (or a manual one: ``total`` and ``.update(n)``) on
    stderr; a ``SilentBar`` (the same calls, no output, tqdm not even imported) when
    ``enabled()`` is False."""
    if not enabled():
        return SilentBar(iterable)
    from tqdm import tqdm

    return tqdm(
        iterable,
        total=total,
        desc=desc,
        unit=unit,
        file=sys.stderr,
        disable=not enabled(),
        leave=False,
        dynamic_ncols=True,
    )


class SilentBar:
    """What ``progress`` gives when nothing is shown: iterates ``iterable`` unchanged and
    accepts the tqdm calls this package makes (``update``, ``n``, ``set_postfix_str``,
    ``set_description``, ``close``, use as a context manager), writing nothing."""

    def __init__(self, iterable: Iterable | None = None) -> None:
        self.iterable = iterable
        self.n = 0

    def __iter__(self):
        return iter(self.iterable if self.iterable is not None else ())

    def __enter__(self) -> SilentBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        return None

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        return None

    def close(self) -> None:
        return None


def note(line: str) -> None:
    """One status line on stderr when ``enabled()``, printed above any open bar."""
    if not enabled():
        return
    from tqdm import tqdm

    tqdm.write(line, file=sys.stderr)
