"""Deterministic bytes, digests and atomic writes: the basis of content addressing.

Guarantees: ``canonical_json_bytes`` gives the same bytes for equal documents on every
machine (sorted keys, UTF-8, compact separators, shortest-repr floats, no NaN/Infinity,
trailing newline). ``atomic_output`` never leaves a partial file at the target path:
the target either holds the complete new content or is untouched.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20
# Snakemake's marker in a directory output: an empty file whose mtime stands for the
# directory's (snakemake.io.IOFile.touch writes it at the top of the output only)
SNAKEMAKE_MARKER = ".snakemake_timestamp"


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
    with open(path, "rb") as f:
        h = hashlib.sha256()
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def is_snakemake_marker(relative: str, st: os.stat_result) -> bool:
    """Whether a tree entry is Snakemake's own marker: ``.snakemake_timestamp`` at the
    top of the tree, an empty regular file. Anything else by that name (in a
    subdirectory, with content, a link) is content like any other file."""
    return relative == SNAKEMAKE_MARKER and stat.S_ISREG(st.st_mode) and st.st_size == 0


def sha256_tree(path: str | os.PathLike) -> str:
    """Digest of a directory: canonical JSON of {relative path: file digest}, sorted.

    Snakemake's marker (``is_snakemake_marker``: an empty ``.snakemake_timestamp`` at
    the top, written into directory outputs after a job) is bookkeeping, not content,
    and is left out."""
    root = Path(path)
    listing = {
        p.relative_to(root).as_posix(): sha256_file(p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and not is_snakemake_marker(p.relative_to(root).as_posix(), p.lstat())
    }
    return sha256_bytes(canonical_json_bytes(listing))


_KINDS = (
    (stat.S_ISLNK, "symlink"),
    (stat.S_ISFIFO, "FIFO"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISSOCK, "socket"),
)


def file_kind(mode: int) -> str:
    """'file', 'directory' or what else an ``lstat`` mode says the entry is."""
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    return next((name for test, name in _KINDS if test(mode)), "special file")


class NotRegular(Exception):
    """A path (or an entry of a tree) is not a regular file or directory."""

    def __init__(self, where: str, kind: str) -> None:
        super().__init__(f"{where} is a {kind}")
        self.where, self.kind = where, kind


def sha256_regular_file(path: str | os.PathLike) -> str:
    """SHA-256 of a regular file, never opening anything else: the final component is
    opened with O_NOFOLLOW | O_NONBLOCK (a symlink fails, a FIFO does not block) and
    checked with fstat before a byte is read. Raises NotRegular otherwise."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        if Path(path).is_symlink():
            raise NotRegular(str(path), "symlink") from None
        raise err
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(str(path), file_kind(mode))
        h = hashlib.sha256()
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def digest_regular_path(path: str | os.PathLike) -> str:
    """``digest_path`` for untrusted trees: the same digest for a regular file or a
    directory of regular files, but raises NotRegular (naming the entry) for a symlink,
    FIFO, device or socket at the path or anywhere under it; nothing else is opened."""
    root = Path(path)
    kind = file_kind(root.lstat().st_mode)
    if kind == "file":
        return sha256_regular_file(root)
    if kind != "directory":
        raise NotRegular(str(root), kind)
    listing = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in sorted(dirnames + filenames):
            entry = Path(dirpath) / name
            entry_stat = entry.lstat()
            entry_kind = file_kind(entry_stat.st_mode)
            if entry_kind == "directory":
                continue
            if entry_kind != "file":
                raise NotRegular(str(entry), entry_kind)
            relative = entry.relative_to(root).as_posix()
            if not is_snakemake_marker(relative, entry_stat):
                listing[relative] = sha256_regular_file(entry)
    return sha256_bytes(canonical_json_bytes(dict(sorted(listing.items()))))


def digest_path(path: str | os.PathLike) -> str:
    """Digest of a file, or of a directory tree (see ``sha256_tree``)."""
    return sha256_tree(path) if Path(path).is_dir() else sha256_file(path)


_REPLACE_DIRECTORIES: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "replace_directories", default=False
)


@contextlib.contextmanager
def replacing_directories(allowed: bool) -> Iterator[None]:
    """Within this block ``atomic_output(directory=True)`` may replace an existing
    non-empty directory (the CLI's ``--force``)."""
    token = _REPLACE_DIRECTORIES.set(bool(allowed))
    try:
        yield
    finally:
        _REPLACE_DIRECTORIES.reset(token)


def _host_tag() -> str:
    """A short tag of this host's name (``socket.gethostname()``: the kernel's node name,
    read without importing socket, 4 ms of a small command's start)."""
    if hasattr(os, "uname"):
        host = os.uname().nodename
    else:  # pragma: no cover - not POSIX
        import socket

        host = socket.gethostname()
    return sha256_bytes(host.encode("utf-8", "replace"))[:8]


def _temporary_prefix(target: Path) -> str:
    """``.<name>.tmp-<host>-<pid>-``: the naming pattern of this writer's temporaries,
    which tells a stale one (its process on this host is gone) from a live one."""
    return f".{target.name}.tmp-{_host_tag()}-{os.getpid()}-"


def _new_temporary(target: Path, *, directory: bool) -> Path:
    """A file (mode 0600) or directory (0700) beside ``target``, named
    ``_temporary_prefix(target)`` + 16 random hex digits, made by this call and no other
    (created exclusively, a symlink never followed: ``tempfile.mkstemp``'s guarantees,
    without the import of ``tempfile``, ``shutil`` and ``random`` that every command
    paid for, some 5 ms)."""
    prefix = _temporary_prefix(target)
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):  # a clash needs the same 64 random bits: a retry is for form's sake
        path = target.parent / f"{prefix}{os.urandom(8).hex()}"
        try:
            if directory:
                os.mkdir(path, 0o700)
            else:
                os.close(os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o600))
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"no unused temporary name beside {target}")


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def remove_stale_temporaries(target: Path) -> list[Path]:
    """Remove temporaries of ``target`` left by a writer that was killed: only entries
    beside it named ``.<name>.tmp-<this host>-<pid>-*`` whose process no longer runs.
    Returns what was removed; never touches anything else."""
    prefix = f".{target.name}.tmp-{_host_tag()}-"
    removed: list[Path] = []
    if target.parent.name.startswith(".") and ".tmp-" in target.parent.name:
        return removed  # inside a temporary directory being filled: nothing stale there
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        pid_text = entry.name[len(prefix) :].split("-", 1)[0]
        if not pid_text.isdigit() or _process_alive(int(pid_text)):
            continue
        path = Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            import shutil  # only where a directory is removed: a file output needs none

            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
        removed.append(path)
    return removed


def check_output_target(target: Path, *, directory: bool, replace: bool = False) -> None:
    """Refuse (InputError, exit 2) an output target this command must not replace: the
    current directory or one of its ancestors; for a file output anything existing
    that is not a regular file (a FIFO, device, socket, directory or symlink); for a
    directory output anything existing that is not a plain directory, and a non-empty
    directory unless ``replace`` (``--force``)."""
    from tracecanary.errors import InputError

    where = {"file": str(target), "field": "output"}
    resolved = target.resolve()
    cwd = Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents or not target.name:
        raise InputError("the output is the current directory or one of its ancestors", **where)
    try:
        st = target.lstat()
    except FileNotFoundError:
        return
    if directory:
        if not stat.S_ISDIR(st.st_mode):
            raise InputError("exists and is not a directory; refusing to replace it", **where)
        if not replace and any(target.iterdir()):
            raise InputError(
                "is an existing non-empty directory; refusing to replace it "
                "(pass --force to replace it)",
                **where,
            )
    elif not stat.S_ISREG(st.st_mode):
        raise InputError(
            "exists and is not a regular file (a directory, FIFO, device, socket or "
            "symlink); refusing to replace it",
            **where,
        )


def check_outputs_spare_inputs(outputs: dict[str, str], inputs: list[str]) -> None:
    """Refuse (InputError, exit 2) an output that is one of the command's inputs (the same
    path, a link to it, the same file under another name) or a directory holding one:
    writing it would replace what is being read (``-o rank0.jsonl.gz rank0.jsonl.gz``,
    ``-o DIR --force`` with an input in DIR). ``outputs`` maps each output option to its
    path; ``inputs`` are the command's other arguments, of which only existing paths
    count. Costs a ``stat`` and a ``resolve`` per argument, before anything runs."""
    existing = []
    for text in inputs:
        try:
            st = os.stat(text)
        except (OSError, ValueError):  # not a path (a name, a number), or not there
            continue
        existing.append((text, Path(text).resolve(), (st.st_dev, st.st_ino)))
    if not existing:
        return
    from tracecanary.errors import InputError

    cwd = Path.cwd().resolve()
    for option, output in outputs.items():
        target = Path(output).resolve()
        if target == cwd or target in cwd.parents:
            continue  # refused as such by check_output_target, whatever it holds
        try:
            st = os.stat(output)
            identity = (st.st_dev, st.st_ino)
        except (OSError, ValueError):
            identity = None
        for text, resolved, input_identity in existing:
            if resolved == target or input_identity == identity:
                what = f"is the input {text}"
            elif target in resolved.parents:
                what = f"contains the input {text}"
            else:
                continue
            raise InputError(
                f"{what}; refusing to write over an input (choose another output)",
                file=output,
                field=option,
            )


def check_output_before_running(path: str | os.PathLike, *, directory: bool = False) -> None:
    """``check_output_target`` as ``atomic_output`` will apply it (``--force`` from
    ``replacing_directories``), for a command that runs something long (a user's program)
    before it writes: an output it would refuse is refused before anything runs."""
    check_output_target(Path(path), directory=directory, replace=_REPLACE_DIRECTORIES.get())


@contextlib.contextmanager
def atomic_output(
    path: str | os.PathLike,
    *,
    directory: bool = False,
    replace: bool | None = None,
    mode: int = 0o644,
) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success.

    On any exception the temporary file or directory is removed, parent directories made
    for it are removed again, and ``path`` is left as it was, so a failed stage never
    leaves partial output behind. The result is world-readable (0644, directories 0755)
    unless ``mode`` says otherwise (a private key: 0600, never readable by others, not
    even for a moment).

    Before anything is written the target is checked (``check_output_target``): never
    the current directory or an ancestor, never an existing non-regular file, and never
    an existing non-empty directory unless ``replace`` (default: the ``--force`` of
    ``replacing_directories``). Temporaries of the same target left by a killed writer
    are removed (``remove_stale_temporaries``).
    """
    target = Path(path)
    if replace is None:
        replace = _REPLACE_DIRECTORIES.get()
    check_output_target(target, directory=directory, replace=replace)
    made = [d for d in (target.parent, *target.parent.parents) if not d.exists()]
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(target)
    tmp = _new_temporary(target, directory=directory)
    try:
        yield tmp
        check_output_target(target, directory=directory, replace=replace)
        if directory:
            os.chmod(tmp, 0o755)
            if target.exists():
                import shutil

                shutil.rmtree(target)
            os.replace(tmp, target)
        else:
            os.chmod(tmp, mode)
            os.replace(tmp, target)
    except BaseException:
        if tmp.is_dir():
            import shutil

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
