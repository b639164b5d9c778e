"""Progress bars (``tracecanary.progress``): shown on a terminal, silent when stderr is not
a TTY or with ``--quiet``. The commands run for real, as subprocesses, with stderr on a
pipe or on a pseudo-terminal (``pty``)."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest

from tracecanary import progress as progress_module

CLI = [sys.executable, "-m", "tracecanary"]


def _run_with_stderr_on_pty(argv: list[str], cwd) -> tuple[int, bytes]:
    """Run ``argv`` with stderr on a pseudo-terminal; (exit code, what the terminal got)."""
    master, slave = pty.openpty()
    # a real terminal has a size; a fresh pty is 0 x 0, where a bar has no room at all
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    proc = subprocess.Popen(
        argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: every holder of the terminal's other end has closed it
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=120), b"".join(chunks)


@pytest.fixture(scope="module")
def source_and_canary(tmp_path_factory):
    """The shipped adversarial trace and its lossless canary (real CLI runs)."""
    d = tmp_path_factory.mktemp("progress")
    subprocess.run([*CLI, "synth", "adversarial", "-o", "src.json"], cwd=d, check=True)
    subprocess.run(
        [*CLI, "compile", "src.json", "--lossless", "-o", "canary.json"],
        cwd=d,
        check=True,
        capture_output=True,
    )
    return d


def _verify_argv(extra: list[str] = ()) -> list[str]:
    return [*CLI, "verify-behavior", "src.json", "canary.json", "-o", "v.json", *extra]


def test_verify_behavior_draws_a_progress_bar_when_stderr_is_a_terminal(source_and_canary):
    code, seen = _run_with_stderr_on_pty(_verify_argv(), source_and_canary)
    assert code == 0
    assert b"simulate:" in seen and b"%|" in seen  # tqdm's bar: "simulate:  40%|####..."


def test_verify_behavior_shows_no_progress_when_stderr_is_a_pipe(source_and_canary):
    run = subprocess.run(_verify_argv(), cwd=source_and_canary, capture_output=True)
    assert run.returncode == 0
    assert b"simulate" not in run.stderr and b"%|" not in run.stderr
    assert b"\r" not in run.stderr


def test_quiet_silences_progress_on_a_terminal(source_and_canary):
    code, seen = _run_with_stderr_on_pty(_verify_argv(["--quiet"]), source_and_canary)
    assert code == 0
    assert b"simulate" not in seen and b"%|" not in seen


def test_progress_is_a_silent_pass_through_when_stderr_is_not_a_tty(monkeypatch):
    stream = io.StringIO()  # isatty() is False
    monkeypatch.setattr(sys, "stderr", stream)
    assert not progress_module.enabled()
    assert list(progress_module.progress(range(5), desc="x")) == [0, 1, 2, 3, 4]
    progress_module.note("a status line")
    assert stream.getvalue() == ""


def test_set_quiet_disables_progress_even_on_a_terminal(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    monkeypatch.setattr(sys, "stderr", stream)
    assert progress_module.enabled()
    progress_module.note("shown")
    assert "shown" in stream.getvalue()
    try:
        progress_module.set_quiet(True)
        assert not progress_module.enabled()
        before = stream.getvalue()
        list(progress_module.progress(range(3), desc="hidden"))
        progress_module.note("hidden")
        assert stream.getvalue() == before
    finally:
        progress_module.set_quiet(False)


def test_import_of_several_kineto_files_counts_files_on_a_terminal_only(tmp_path):
    from test_kineto_batch import rank_files

    paths = [str(p) for p in rank_files(tmp_path, 3)]
    argv = [*CLI, "import-kineto", *paths, "--jobs", "1"]
    code, seen = _run_with_stderr_on_pty([*argv, "-o", str(tmp_path / "tty")], tmp_path)
    assert code == 0
    assert b"import:" in seen and b"/3 " in seen  # "import:   0%|...| 0/3 [..."
    piped = subprocess.run([*argv, "-o", str(tmp_path / "pipe")], capture_output=True)
    assert piped.returncode == 0 and b"import:" not in piped.stderr


def test_quiet_is_offered_by_every_command_that_draws_progress():
    from tracecanary.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in (
        "search",
        "verify-behavior",
        "compile",
        "replay",
        "verify-report",
        "replay-physical",
        "sweep",
        "import-kineto",
    ):
        options = {s for a in sub.choices[name]._actions for s in a.option_strings}
        assert "--quiet" in options, name
    manifest = sub.choices["manifest"]
    actions = next(a for a in manifest._actions if a.dest == "action")
    for name in ("verify", "regenerate"):
        options = {s for a in actions.choices[name]._actions for s in a.option_strings}
        assert "--quiet" in options, name


def test_compile_shows_its_stages_on_a_terminal_and_nothing_on_a_pipe(source_and_canary):
    argv = [*CLI, "compile", "src.json", "--lossless", "-o"]
    code, seen = _run_with_stderr_on_pty([*argv, "tty.json"], source_and_canary)
    assert code == 0 and b"compile:" in seen and b"/3 " in seen  # load, compile, write
    piped = subprocess.run([*argv, "pipe.json"], cwd=source_and_canary, capture_output=True)
    assert piped.returncode == 0 and piped.stderr == b""
    assert (source_and_canary / "tty.json").read_bytes() == (
        source_and_canary / "pipe.json"
    ).read_bytes()


def test_quiet_given_to_one_in_process_command_does_not_silence_the_next(tmp_path, monkeypatch):
    from conftest import small_trace, write_doc

    from tracecanary.cli import main

    trace = write_doc(small_trace(), tmp_path / "t.json")
    assert (
        main(["compile", str(trace), "--lossless", "--quiet", "-o", str(tmp_path / "c.json")]) == 0
    )
    assert not progress_module.quiet()  # a workflow job or a test runs main again in-process
    monkeypatch.setattr(sys, "stderr", type("Tty", (io.StringIO,), {"isatty": lambda self: True})())
    assert progress_module.enabled()
