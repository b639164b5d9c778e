"""The resource policy every loader applies to untrusted input.

Canaries and traces travel between teams, so limits are enforced before work that
scales with the input: file size, decompressed size, events, nesting depth, ranks and
occurrences after expansion. Defaults suit a 24 GiB laptop; ``--limit NAME=VALUE``
(or TRACECANARY_LIMITS="name=value,...") raises them.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from tracecanary.errors import InputError, ResourceLimitExceeded


@dataclass(frozen=True)
class Limits:
    max_file_bytes: int = 4 << 30
    max_decompressed_bytes: int = 16 << 30
    max_json_document_bytes: int = 2 << 30
    max_events: int = 200_000_000
    max_depth: int = 64
    max_ranks: int = 65_536
    max_occurrences: int = 100_000_000

    def with_overrides(self, spec: str | None) -> Limits:
        if not spec:
            return self
        changes: dict[str, int] = {}
        for item in spec.split(","):
            name, _, value = item.partition("=")
            name = name.strip()
            if name not in {f.name for f in dataclasses.fields(self)}:
                raise InputError(f"unknown resource limit {name!r}", field="limit")
            try:
                changes[name] = int(float(value))
            except ValueError:
                raise InputError(
                    f"limit {name} needs a number, got {value!r}", field="limit"
                ) from None
        return dataclasses.replace(self, **changes)


def current_limits() -> Limits:
    return Limits().with_overrides(os.environ.get("TRACECANARY_LIMITS"))


class _BoundedReader(io.RawIOBase):
    """A reader that raises once more than ``limit`` bytes have been read through it."""

    def __init__(self, raw: BinaryIO, limit: int, path: str, owned: BinaryIO | None = None) -> None:
        self.raw, self.limit, self.path, self.count = raw, limit, path, 0
        self.owned = owned

    def close(self) -> None:
        if not self.closed:
            self.raw.close()
            if self.owned is not None and self.owned is not self.raw:
                self.owned.close()
        super().close()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.raw.read(len(buffer))
        self.count += len(data)
        if self.count > self.limit:
            raise ResourceLimitExceeded(
                f"decompressed size exceeds max_decompressed_bytes={self.limit}", file=self.path
            )
        buffer[: len(data)] = data
        return len(data)


def open_input(path: str | os.PathLike, limits: Limits | None = None) -> BinaryIO:
    """Open a possibly gzip-compressed file for reading, enforcing size limits lazily
    (a gzip bomb stops at the limit, in bounded memory)."""
    limits = limits or current_limits()
    p = Path(path)
    if not p.is_file():
        raise InputError("no such file", file=str(path))
    size = p.stat().st_size
    if size > limits.max_file_bytes:
        raise ResourceLimitExceeded(
            f"file is {size} bytes, over max_file_bytes={limits.max_file_bytes}", file=str(path)
        )
    raw = open(p, "rb")
    head = raw.read(2)
    raw.seek(0)
    stream: BinaryIO = gzip.GzipFile(fileobj=raw) if head == b"\x1f\x8b" else raw  # type: ignore[assignment]
    return io.BufferedReader(
        _BoundedReader(stream, limits.max_decompressed_bytes, str(path), owned=raw)
    )


def _check_depth(obj: Any, max_depth: int, path: str) -> None:
    stack = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise ResourceLimitExceeded(
                f"JSON nesting deeper than max_depth={max_depth}", file=path
            )
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, dict | list))


def load_json(path: str | os.PathLike, limits: Limits | None = None) -> Any:
    """Parse a JSON document (optionally gzip) under the resource policy; exit-2 errors
    name the file and the position of a syntax error."""
    limits = limits or current_limits()
    with open_input(path, limits) as f:
        data = f.read(limits.max_json_document_bytes + 1)
    if len(data) > limits.max_json_document_bytes:
        raise ResourceLimitExceeded(
            f"JSON document over max_json_document_bytes={limits.max_json_document_bytes}",
            file=str(path),
        )
    try:
        doc = json.loads(data)
    except RecursionError:
        raise ResourceLimitExceeded(
            f"JSON nesting deeper than max_depth={limits.max_depth}", file=str(path)
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        where = (
            f"line {err.lineno} column {err.colno}"
            if isinstance(err, json.JSONDecodeError)
            else "bytes"
        )
        raise InputError(
            f"not valid JSON ({where}): {getattr(err, 'msg', err)}", file=str(path)
        ) from None
    _check_depth(doc, limits.max_depth, str(path))
    return doc
