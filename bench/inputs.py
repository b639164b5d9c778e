"""Benchmark inputs, generated deterministically by the project's own synth commands and
cached under ``bench.common.WORK`` (a file that exists is reused: same arguments, same
bytes, so a cached input is the input the command would write again).

- ``training_trace``: ``tracecanary synth training --tp --pp --dp --steps`` (JSON Lines);
- ``decode_captures``: ``tracecanary synth decode --ranks R --ranks-per-host R
  --events-per-rank N --format jsonl`` (all ranks on one host, so one clock domain and
  known skew without a merge);
- ``program_pickle``: ``tracecanary ingest`` of those files, then the ``Program``
  (``tracecanary.load.load_program`` of the normalized table), pickled so that a
  benchmark child starts from the program without re-running ingest and matching.
"""

from __future__ import annotations

from pathlib import Path

from bench.common import WORK, run_child, tracecanary_cli

# bump when the generators change what they write (cached inputs are keyed by it)
GENERATOR_VERSION = 2


def training_trace(tp: int, pp: int, dp: int, steps: int) -> Path:
    """The training trace of that shape (cached)."""
    path = WORK / f"training_v{GENERATOR_VERSION}_tp{tp}_pp{pp}_dp{dp}_s{steps}.jsonl"
    if not path.exists():
        WORK.mkdir(parents=True, exist_ok=True)
        tracecanary_cli(
            "synth", "training", "--tp", str(tp), "--pp", str(pp), "--dp", str(dp),
            "--steps", str(steps), "-o", str(path),
        )  # fmt: skip
    return path


def decode_captures(ranks: int, events_per_rank: int) -> list[Path]:
    """The decode capture files (one per rank, one host; cached)."""
    out = WORK / f"decode_r{ranks}_e{events_per_rank}"
    files = [out / f"rank{r}.jsonl" for r in range(ranks)]
    if not all(f.exists() for f in files):
        WORK.mkdir(parents=True, exist_ok=True)
        tracecanary_cli(
            "synth", "decode", "--ranks", str(ranks), "--ranks-per-host", str(ranks),
            "--events-per-rank", str(events_per_rank), "--format", "jsonl", "-o", str(out),
        )  # fmt: skip
    return files


def program_pickle(name: str, inputs: list[Path]) -> Path:
    """Ingest ``inputs`` (one trace), build its Program in a child, pickle it (cached)."""
    path = WORK / f"{name}.program.pickle"
    if path.exists():
        return path
    table = WORK / f"{name}.parquet"
    run_child(
        f"""
import json, pickle
from tracecanary.ingest import ingest_files
from tracecanary.load import load_program
ingest_files({[str(p) for p in inputs]!r}, {str(table)!r})
program = load_program({str(table)!r})
tmp = {str(path)!r} + ".tmp"
open(tmp, "wb").write(pickle.dumps(program, protocol=5))
import os; os.replace(tmp, {str(path)!r})
print(json.dumps({{}}))
"""
    )
    return path


def decode_program(occurrences: int) -> Path:
    """Pickled Program of a 4-rank decode trace of about ``occurrences`` occurrences."""
    files = decode_captures(4, occurrences)
    return program_pickle(f"decode_r4_e{occurrences}", files)


LOAD_PROGRAM = "import pickle; program = pickle.loads(open({path!r}, 'rb').read())"
