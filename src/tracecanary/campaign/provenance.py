"""Provenance records (in-toto Statement v1 layout) and the content-addressed store.

A record states, for one rule execution: the outputs (subjects, by SHA-256), the rule,
its wildcards and parameters, the inputs with their digests, the versions of the code
and libraries, and whether the stage is deterministic. Records contain no clock times
and use the paths as the workflow names them (relative), so a deterministic rule
re-run anywhere with the same inputs and versions writes the same record bytes.

The store keeps every artifact by content: ``<store>/sha256/<2 hex>/<62 hex>``.
"""

from __future__ import annotations

import functools
import os
import platform
import shutil
import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from tracecanary import __version__
from tracecanary.canonical import digest_path, write_json

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://tracecanary.dev/provenance/rule/v1"
LIBRARIES = ("numpy", "pandas", "pyarrow", "snakemake", "torch", "matplotlib", "jsonschema")


@functools.cache
def git_commit() -> str | None:
    """The checkout's commit when the package runs from a git work tree, else None."""
    root = Path(__file__).resolve().parents[3]
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


@functools.cache
def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {
        "tracecanary": __version__,
        "tracecanary_git_commit": git_commit(),
        "python": platform.python_version(),
    }
    for lib in LIBRARIES:
        try:
            found[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            found[lib] = None
    return found


def _entries(paths: Mapping[str, Any]) -> list[dict]:
    entries = []
    for name, value in paths.items():
        for path in value if isinstance(value, list | tuple) else [value]:
            entries.append(
                {"name": name, "path": str(path), "digest": {"sha256": digest_path(path)}}
            )
    return entries


def statement(
    *,
    rule: str,
    wildcards: Mapping[str, str],
    params: Mapping[str, Any],
    inputs: Mapping[str, Any],
    outputs: Mapping[str, Any],
    deterministic: bool,
) -> dict:
    """The in-toto Statement for one rule execution (outputs must exist)."""
    subjects = [
        {"name": e["path"], "digest": e["digest"], "annotations": {"output": e["name"]}}
        for e in _entries(outputs)
    ]
    return {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "rule": rule,
            "wildcards": dict(sorted(wildcards.items())),
            "parameters": params,
            "inputs": _entries(inputs),
            "versions": versions(),
            "deterministic": deterministic,
        },
    }


def store_artifact(path: str | os.PathLike, store: str | os.PathLike) -> Path:
    """Copy a file into the content-addressed store (idempotent); return its store path."""
    digest = digest_path(path)
    target = Path(store) / "sha256" / digest[:2] / digest[2:]
    if not target.exists() and Path(path).is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + f".tmp-{os.getpid()}")
        shutil.copyfile(path, tmp)
        os.replace(tmp, target)
    elif not target.exists() and Path(path).is_dir():
        shutil.copytree(path, target)
    return target


def write_statement(path: str | os.PathLike, record: dict, store: str | os.PathLike | None) -> str:
    """Write the record and store its subjects; return the record's SHA-256."""
    if store is not None:
        for subject in record["subject"]:
            store_artifact(subject["name"], store)
    digest = write_json(path, record)
    if store is not None:
        store_artifact(path, store)
    return digest
