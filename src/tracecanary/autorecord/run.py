"""``run_recorded``: run a user's command with recording active, merge its captures (see
the package doc for what is recorded and what DIR holds)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tracecanary.autorecord import RECORD_DIR_ENV, REFUSED_SUFFIX
from tracecanary.canonical import atomic_output, sha256_file, write_json
from tracecanary.errors import InputError, RunFailed
from tracecanary.formats.ids import RECORDED_RUN_FORMAT
from tracecanary.record_completeness import IncompleteRecording, completeness_notes

HOOK_DIR = Path(__file__).resolve().parent / "hook"
MERGED_NAME = "merged.jsonl.gz"
STDERR_TAIL_LINES = 5


def recording_env(staging: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with recording into ``staging``
    switched on for every Python process started with it."""
    env = dict(os.environ if base is None else base)
    env[RECORD_DIR_ENV] = str(staging)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HOOK_DIR), env.get("PYTHONPATH")) if p)
    return env


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-STDERR_TAIL_LINES:]) or "(no output on stderr)"


def run_recorded(cmd: list[str], out_dir: str | os.PathLike, *, timeout_s: float) -> dict:
    """Run ``cmd`` recorded, then merge; returns the ``capture.json`` document written
    into ``out_dir`` (see the package doc for the guarantees)."""
    from tracecanary.formats.schemas import validate
    from tracecanary.merge import merge_captures

    if not cmd:
        raise InputError("give the command to record after --, e.g. -- python train.py", field="--")
    if timeout_s <= 0:
        raise InputError("--timeout must be > 0", field="timeout")
    with tempfile.TemporaryDirectory(prefix="tracecanary-record-") as staging_name:
        staging = Path(staging_name)
        started = time.monotonic()
        try:
            run = subprocess.run(
                cmd,
                env=recording_env(staging),
                stdin=subprocess.DEVNULL,
                stdout=None,  # the user's program talks to the user
                stderr=subprocess.PIPE,
                text=True,
                timeout=timeout_s,
            )
        except FileNotFoundError:
            raise InputError("no such program", file=cmd[0], field="--") from None
        except subprocess.TimeoutExpired:
            raise RunFailed(f"the command ran over --timeout {timeout_s} s; nothing kept") from None
        wall_s = round(time.monotonic() - started, 3)
        sys.stderr.write(run.stderr)
        if run.returncode != 0:
            raise RunFailed(
                f"the command exited {run.returncode}; nothing kept: {_tail(run.stderr)}"
            )
        refused = sorted(staging.glob(f"rank*{REFUSED_SUFFIX}"))
        if refused:
            reason = refused[0].read_text().strip()
            raise IncompleteRecording(
                f"{len(refused)} of the run's ranks refused their recording; {reason}",
                field="completeness",
            )
        captures = sorted(staging.glob("rank*.json"), key=lambda p: int(p.stem[4:]))
        if not captures:
            raise RunFailed(
                "the command recorded no collectives: no process called "
                "torch.distributed.init_process_group (through torch.distributed) and exited "
                "normally; run the program itself (python or torchrun), not a shell wrapper"
            )
        with atomic_output(out_dir, directory=True) as tmp:
            os.chmod(tmp, 0o755)  # mkdtemp makes it private; the result is a plain directory
            kept = []
            for capture in captures:
                target = Path(tmp) / capture.name
                target.write_bytes(capture.read_bytes())
                kept.append(str(target))
            summary = merge_captures(kept, Path(tmp) / MERGED_NAME)
            doc = {
                "format": RECORDED_RUN_FORMAT,
                "command": list(cmd),
                "exit_code": run.returncode,
                "wall_s": wall_s,
                "ranks": len(captures),
                "merged": {
                    "file": MERGED_NAME,
                    "events": summary["events"],
                    "collectives": summary["occurrences"],
                    "skew": summary["skew"],
                },
                "completeness": completeness_notes(summary["notes"]),
                "files": {p.name: sha256_file(p) for p in sorted(Path(tmp).iterdir())},
                "environment": {"python": platform.python_version(), "host": platform.node()},
            }
            validate(doc, "recorded-run", file="capture.json")
            write_json(Path(tmp) / "capture.json", doc)
    return doc
