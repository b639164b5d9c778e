"""Deterministic writers for native traces: canonical JSON, or JSON Lines (header line +
one canonical event per line); ``.gz`` compressed with a fixed header (mtime 0, no
name) so equal documents give equal bytes."""

from __future__ import annotations

import gzip
import io
import os
from collections.abc import Iterable
from pathlib import Path

from tracecanary.canonical import atomic_output, canonical_json_bytes, sha256_file


def _jsonl_bytes(header: dict, events: Iterable[dict]) -> Iterable[bytes]:
    yield canonical_json_bytes({k: v for k, v in header.items() if k != "events"})
    for event in events:
        yield canonical_json_bytes(event)


def write_trace(doc: dict, path: str | os.PathLike) -> str:
    """Write a trace document to ``path`` (.json, .jsonl, optionally .gz); return its SHA-256."""
    p = Path(path)
    name = p.name[:-3] if p.name.endswith(".gz") else p.name
    compressed = p.name.endswith(".gz")
    with atomic_output(p) as tmp:
        with open(tmp, "wb") as raw:
            sink = (
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6)
                if compressed
                else raw
            )
            if name.endswith(".jsonl"):
                buffer = io.BufferedWriter(sink, buffer_size=1 << 20) if compressed else sink
                for chunk in _jsonl_bytes(doc, doc["events"]):
                    buffer.write(chunk)
                if buffer is not sink:
                    buffer.flush()
            else:
                sink.write(canonical_json_bytes(doc))
            if compressed:
                sink.close()
    return sha256_file(p)
