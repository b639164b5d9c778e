"""Deterministic bytes, digests and atomic writes: the basis of content addressing.

Guarantees: ``canonical_json_bytes`` gives the same bytes for equal documents on every
machine (sorted keys, UTF-8, compact separators, shortest-repr floats, no NaN/Infinity,
trailing newline). ``atomic_output`` never leaves a partial file at the target path:
the target either holds the complete new content or is untouched.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20
IGNORED_IN_TREES = frozenset({".snakemake_timestamp"})


def canonical_json_bytes(obj: Any) -> bytes:
    """Canonical JSON of ``obj``; raises ValueError on NaN/Infinity (never written)."""
    return (
        json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        + "\n"
    ).encode("utf-8")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike) -> str:
    """SHA-256 hex digest of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def sha256_tree(path: str | os.PathLike) -> str:
    """Digest of a directory: canonical JSON of {relative path: file digest}, sorted.

    Snakemake's ``.snakemake_timestamp`` marker (written into directory outputs after a
    job) is bookkeeping, not content, and is left out."""
    root = Path(path)
    listing = {
        p.relative_to(root).as_posix(): sha256_file(p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in IGNORED_IN_TREES
    }
    return sha256_bytes(canonical_json_bytes(listing))


def digest_path(path: str | os.PathLike) -> str:
    """Digest of a file, or of a directory tree (see ``sha256_tree``)."""
    return sha256_tree(path) if Path(path).is_dir() else sha256_file(path)


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, *, directory: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success.

    On any exception the temporary file or directory is removed, parent directories made
    for it are removed again, and ``path`` is left as it was, so a failed stage never
    leaves partial output behind. The result is world-readable (0644, directories 0755).
    """
    target = Path(path)
    made = [d for d in (target.parent, *target.parent.parents) if not d.exists()]
    target.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{target.name}.tmp-"
    if directory:
        tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=target.parent))
    else:
        fd, name = tempfile.mkstemp(prefix=prefix, dir=target.parent)
        os.close(fd)
        tmp = Path(name)
    try:
        yield tmp
        if directory:
            os.chmod(tmp, 0o755)
            if target.exists():
                shutil.rmtree(target)
            os.replace(tmp, target)
        else:
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        for parent in made:  # deepest first; one that is no longer empty stays
            with contextlib.suppress(OSError):
                parent.rmdir()
        raise


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> str:
    """Write ``data`` atomically; return its SHA-256."""
    with atomic_output(path) as tmp:
        tmp.write_bytes(data)
    return sha256_bytes(data)


def write_json(path: str | os.PathLike, obj: Any) -> str:
    """Write canonical JSON atomically; return its SHA-256."""
    return write_bytes_atomic(path, canonical_json_bytes(obj))


def write_text(path: str | os.PathLike, text: str) -> str:
    """Write UTF-8 text atomically; return its SHA-256."""
    return write_bytes_atomic(path, text.encode("utf-8"))
