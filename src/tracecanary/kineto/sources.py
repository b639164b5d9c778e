"""A campaign source of ``kind: kineto``: a list of per-rank PyTorch profiler (Kineto)
traces, imported into one directory of per-rank captures for ``merge``, and the
``same_host: true`` shortcut's calibration.

Guarantees:
- ``import_source`` writes ``rank<r>.json`` (``tracecanary.trace/v1``, exactly what
  ``import-kineto`` writes) per input into ``out_dir`` atomically; two inputs of one
  rank are refused naming both files;
- ``write_same_host_calibration`` writes a ``tracecanary.calibration/v1`` that maps every
  imported rank onto one clock with offset 0, drift 0, uncertainty 0, method
  ``same-host``, and a note saying it was declared by the campaign (``same_host: true``),
  not measured; it refuses captures whose clock domains name different hosts.
"""

from __future__ import annotations

import os
from pathlib import Path

from tracecanary.canonical import atomic_output, write_json
from tracecanary.errors import ImportRefused, InputError
from tracecanary.formats.ids import CALIBRATION_FORMAT
from tracecanary.formats.schemas import validate
from tracecanary.kineto.batch import import_kineto_files
from tracecanary.limits import current_limits, load_json
from tracecanary.trace_io import write_trace

SAME_HOST_METHOD = "same-host"


def _rank_of(doc: dict) -> int:
    return doc["meta"]["clock_domains"][0]["ranks"][0]


def import_ranked(traces: list[str], jobs: int | None = None) -> list[tuple[int, dict]]:
    """(rank, imported document) of every trace, in order; ImportRefused naming the
    trace when two traces are of one rank."""
    docs = import_kineto_files([str(t) for t in traces], jobs=jobs)
    owner: dict[int, str] = {}
    for path, doc in zip(traces, docs, strict=True):
        rank = _rank_of(doc)
        if rank in owner:
            raise ImportRefused(
                f"rank {rank} is also the rank of {owner[rank]}",
                file=str(path),
                field="distributedInfo.rank",
            )
        owner[rank] = str(path)
    return [(_rank_of(doc), doc) for doc in docs]


def import_source(traces: list[str], out_dir: str | os.PathLike, jobs: int | None = None) -> int:
    """Import every trace into ``out_dir/rank<r>.json``; return how many."""
    docs = [doc for _, doc in import_ranked(traces, jobs)]
    with atomic_output(out_dir, directory=True) as tmp:
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the result is a plain directory
        for doc in docs:
            write_trace(doc, Path(tmp) / f"rank{_rank_of(doc)}.json")
    return len(docs)


def write_same_host_calibration(import_dir: str | os.PathLike, out: str | os.PathLike) -> dict:
    """The calibration of ``same_host: true`` for the imported ranks in ``import_dir``."""
    hosts: dict[str, str] = {}
    ranks: list[int] = []
    for path in sorted(Path(import_dir).glob("rank*.json")):
        doc = load_json(path, current_limits())
        for domain in doc["meta"].get("clock_domains", []):
            hosts.setdefault(domain.get("host", "unknown-host"), str(path))
            ranks += domain["ranks"]
    if not ranks:
        raise InputError("no imported ranks", file=str(import_dir))
    if len(hosts) > 1:
        (a, pa), (b, pb) = list(hosts.items())[:2]
        raise InputError(
            f"same_host: true, but the traces name two hosts: {a!r} ({Path(pa).name}) and "
            f"{b!r} ({Path(pb).name}); give a measured calibration instead",
            file=str(import_dir),
            field="same_host",
        )
    host = next(iter(hosts))
    doc = {
        "format": CALIBRATION_FORMAT,
        "reference": f"{host} (same host)",
        "method": SAME_HOST_METHOD,
        "notes": [
            f"Declared by the campaign (source same_host: true), not measured: every rank's "
            f"trace names host {host!r}, so all ranks read one clock (offset 0, drift 0, "
            "uncertainty 0 ns)."
        ],
        "clocks": [
            {
                "ranks": sorted(set(ranks)),
                "host": host,
                "offset_ns": 0,
                "drift_ppb": 0,
                "uncertainty_ns": 0,
            }
        ],
    }
    validate(doc, "calibration", file=str(out))
    write_json(out, doc)
    return doc
