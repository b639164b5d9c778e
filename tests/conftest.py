"""Shared fixtures: small native traces built in code, the CLI run in-process."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tracecanary.cli import main

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def small_trace(n_steps: int = 3, *, with_gap: bool = False) -> dict:
    """A 2-rank trace with one shared clock: all_reduce + broadcast + send/recv per step."""
    events = []
    for rank in (0, 1):
        seq = 0
        t = 1_000 + rank * 50
        for step in range(n_steps):
            for op, extra in (
                ("all_reduce", {}),
                ("broadcast", {"root": 0}),
                ("send" if rank == 0 else "recv", {"peer": 1 - rank}),
            ):
                event = {
                    "rank": rank,
                    "seq": seq,
                    "op": op,
                    "bytes": 4096,
                    "dtype": "float32",
                    "group": "world",
                    "phase": "decode",
                    "ts_ns": t,
                    "overlap_ns": 100 * step,
                    **extra,
                }
                if with_gap and seq > 0:
                    event["gap_ns"] = 10_000
                events.append(event)
                seq += 1
                t += 10_000
    return {
        "format": "tracecanary.trace/v1",
        "meta": {
            "world_size": 2,
            "source": "tests/conftest.py small_trace",
            "clock_domains": [{"id": "host0", "ranks": [0, 1], "host": "host0"}],
            "notes": [],
        },
        "groups": [{"id": "world", "ranks": [0, 1]}],
        "events": events,
    }


def write_doc(doc: dict, path: Path, *, jsonl: bool = False) -> Path:
    if jsonl:
        header = {k: v for k, v in doc.items() if k != "events"}
        lines = [json.dumps(header)] + [json.dumps(e) for e in doc["events"]]
        path.write_text("\n".join(lines) + "\n")
    else:
        path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def trace_doc() -> dict:
    return copy.deepcopy(small_trace())


@pytest.fixture
def run_cli(capsys):
    """Run the CLI in-process; return (exit code, stdout, stderr)."""

    def _run(*argv: str) -> tuple[int, str, str]:
        code = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return code, out, err

    return _run
