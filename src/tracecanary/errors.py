"""Error families. Each carries where the problem is (file, record, field).

Exit codes (DESIGN.md §3): 0 ok; 1 a claim or gate did not hold; 2 bad input or usage.
The CLI turns any ``TraceCanaryError`` into exactly one line on stderr and its exit code.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class TraceCanaryError(Exception):
    """Base of every error the CLI reports as one line."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        record: int | str | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.file = None if file is None else str(file)
        self.record = record
        self.field = field
        super().__init__(self.one_line())

    def __reduce__(self):
        """Pickle by fields, so an error raised in a worker process arrives whole."""
        return (_rebuild, (type(self), self.message, self.file, self.record, self.field))

    def one_line(self) -> str:
        """``FILE: record N: field F: message`` with absent parts left out, newlines removed."""
        parts = []
        if self.file is not None:
            parts.append(self.file)
        if self.record is not None:
            parts.append(f"record {self.record}")
        if self.field is not None:
            parts.append(f"field {self.field}")
        parts.append(self.message)
        return ": ".join(parts).replace("\n", " ")


def _rebuild(cls, message, file, record, field) -> TraceCanaryError:
    return cls(message, file=file, record=record, field=field)


class InputError(TraceCanaryError):
    """Bad input or usage (exit 2): schema violations, refusals of unknowable data."""


class SchemaError(InputError):
    """A document does not match its JSON Schema."""


class TimingError(InputError):
    """Timing semantics are mixed, contradictory or go backwards."""


class MergeError(InputError):
    """Per-rank captures cannot be reconciled into one trace."""


class ImportRefused(InputError):
    """A foreign trace (Kineto, nccl-tests, TUNING, PARAM) cannot be imported faithfully."""


class ExportRefused(InputError):
    """An artifact cannot be exported without inventing or dropping operations."""


class ResourceLimitExceeded(InputError):
    """Untrusted input exceeds the resource policy (size, depth, events, expansion)."""


class ClaimFailed(TraceCanaryError):
    """A claim or gate did not hold (exit 1): verification, regression, digest mismatch."""

    exit_code = 1


class RunFailed(ClaimFailed):
    """A physical run failed (a rank died or hung); evidence is kept and marked failed."""


@contextlib.contextmanager
def located(file) -> Iterator[None]:
    """Name ``file`` in any TraceCanaryError raised inside that does not name one yet."""
    try:
        yield
    except TraceCanaryError as err:
        if err.file is None:
            err.file = str(file)
            err.args = (err.one_line(),)
        raise


def not_a_file_reason(path) -> str:
    """Why ``path`` cannot be read as a file, for an ``InputError`` naming it: it is a
    directory, it is something else (a device, a socket), or it does not exist."""
    import os

    if os.path.isdir(path):
        return "is a directory, not a file: give a file inside it"
    if os.path.lexists(path):
        return "not a regular file"
    return "no such file"


def require_file(path, *, field: str | None = None) -> None:
    """Raise ``InputError`` (exit 2) naming ``path`` unless it is a regular file (after
    symlinks), with ``not_a_file_reason``'s words."""
    import os

    if not os.path.isfile(path):
        raise InputError(not_a_file_reason(path), file=str(path), field=field)
