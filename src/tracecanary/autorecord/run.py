"""``run_recorded``: run a user's command with recording active, merge its captures (see
the package doc for what is recorded and what DIR holds)."""

from __future__ import annotations

import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tracecanary.autorecord import INCOMPLETE_SUFFIX, RECORD_DIR_ENV, REFUSED_SUFFIX
from tracecanary.canonical import (
    atomic_output,
    check_output_before_running,
    file_kind,
    sha256_file,
    write_json,
)
from tracecanary.errors import (
    InputError,
    ResourceLimitExceeded,
    RunFailed,
    TraceCanaryError,
)
from tracecanary.formats.ids import RECORDED_RUN_FORMAT
from tracecanary.limits import current_limits
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


_RANK_CAPTURE = re.compile(r"rank(0|[1-9][0-9]{0,8})\.json")
_RANK_REFUSAL = re.compile(r"rank(0|[1-9][0-9]{0,8})" + re.escape(REFUSED_SUFFIX))
_RANK_INCOMPLETE = re.compile(r"rank(0|[1-9][0-9]{0,8})" + re.escape(INCOMPLETE_SUFFIX))
REFUSAL_BYTES = 1 << 16  # a refusal is one line of reason


def _read_regular(path: Path, cap: int, limit_name: str) -> bytes:
    """The bytes of ``path``, a regular file of at most ``cap`` bytes; anything else (a
    FIFO, a symlink, a device, a larger file) is refused, exit 2, naming it, before a
    byte is read: opened with O_NOFOLLOW | O_NONBLOCK (a FIFO does not block, a link is
    not followed), checked with fstat, read up to ``cap`` + 1 bytes."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    where = "in the recording directory"
    try:
        fd = os.open(path, flags)
    except OSError:
        kind = file_kind(path.lstat().st_mode) if os.path.lexists(path) else "missing file"
        raise InputError(f"is a {kind} {where}, not a regular file", file=str(path)) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = file_kind(st.st_mode)
            raise InputError(f"is a {kind} {where}, not a regular file", file=str(path))
        if st.st_size > cap:
            raise ResourceLimitExceeded(
                f"is {st.st_size} bytes, over {limit_name}={cap}", file=str(path)
            )
        data = f.read(cap + 1)
    if len(data) > cap:  # grew while read
        raise ResourceLimitExceeded(f"is over {limit_name}={cap}", file=str(path))
    return data


def _recorded_files(staging: Path) -> tuple[list[Path], list[Path]]:
    """The rank captures (``rank<N>.json``, by rank) and refusals (``rank<N>.refused.txt``,
    beside ``rank<N>.incomplete.json``) the run left in ``staging``. Any other name
    (``rank_x.json``, a stray file) is refused, exit 2, naming it; so are dot-files other
    than a writer's temporaries. Nothing is opened here."""
    captures, refusals = [], []
    for name in sorted(os.listdir(staging)):
        path = staging / name
        if name.startswith(".") and ".tmp-" in name:
            continue  # a temporary of a rank killed while writing
        if _RANK_CAPTURE.fullmatch(name):
            captures.append(path)
        elif _RANK_REFUSAL.fullmatch(name):
            refusals.append(path)
        elif _RANK_INCOMPLETE.fullmatch(name):
            continue  # kept for the user with the refusal, never read
        else:
            raise InputError(
                "is not a file the recorder writes (rank<N>.json, rank<N>"
                f"{REFUSED_SUFFIX}): the program left it in ${RECORD_DIR_ENV}",
                file=str(path),
            )
    captures.sort(key=lambda p: int(p.name[4:-5]))
    return captures, refusals


def run_recorded(cmd: list[str], out_dir: str | os.PathLike, *, timeout_s: float) -> dict:
    """Run ``cmd`` recorded, then merge; returns the ``capture.json`` document written
    into ``out_dir`` (see the package doc for the guarantees). ``out_dir`` is checked
    before the command runs. Where the run fails after a rank recorded anything, the
    per-rank recordings are kept in their staging directory and the error says where."""
    if not cmd:
        raise InputError("give the command to record after --, e.g. -- python train.py", field="--")
    if not timeout_s > 0:
        raise InputError("--timeout must be > 0", field="timeout")
    check_output_before_running(out_dir, directory=True)
    staging = Path(tempfile.mkdtemp(prefix="tracecanary-record-"))
    try:
        doc = _run_and_merge(cmd, out_dir, timeout_s, staging)
    except BaseException as err:
        if not any(os.scandir(staging)):
            shutil.rmtree(staging, ignore_errors=True)
        elif isinstance(err, TraceCanaryError):
            err.message += f"; the per-rank recordings are kept in {staging}"
            err.args = (err.one_line(),)
        raise
    shutil.rmtree(staging, ignore_errors=True)
    return doc


def _run_and_merge(cmd: list[str], out_dir, timeout_s: float, staging: Path) -> dict:
    """``run_recorded`` with its staging directory made."""
    from tracecanary.formats.schemas import validate
    from tracecanary.merge import merge_captures

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
        raise RunFailed(f"the command ran over --timeout {timeout_s} s; nothing written") from None
    wall_s = round(time.monotonic() - started, 3)
    sys.stderr.write(run.stderr)
    if run.returncode != 0:
        raise RunFailed(
            f"the command exited {run.returncode}; nothing written: {_tail(run.stderr)}"
        )
    captures, refused = _recorded_files(staging)
    if refused:
        reason = _read_regular(refused[0], REFUSAL_BYTES, "REFUSAL_BYTES")
        raise IncompleteRecording(
            f"{len(refused)} of the run's ranks refused their recording; "
            + reason.decode("utf-8", "replace").strip(),
            field="completeness",
        )
    if not captures:
        raise RunFailed(
            "the command recorded no collectives: no process called "
            "torch.distributed.init_process_group (through torch.distributed) and exited "
            "normally; run the program itself (python or torchrun), not a shell wrapper"
        )
    cap = current_limits().max_json_document_bytes
    contents = [_read_regular(p, cap, "max_json_document_bytes") for p in captures]
    with atomic_output(out_dir, directory=True) as tmp:
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the result is a plain directory
        kept = []
        for capture, data in zip(captures, contents, strict=True):
            target = Path(tmp) / capture.name
            target.write_bytes(data)
            kept.append(str(target))
        del contents
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
