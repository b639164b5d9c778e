"""Unlucky operators (issue 17, defects 3 and 4; stale temporaries): what ``-o`` may
replace. The checks live in the shared atomic writer (``canonical.atomic_output``), so
every command gets them; these tests drive real commands."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import small_trace, write_doc

from tracecanary.canonical import _host_tag, atomic_output


@pytest.fixture
def trace(tmp_path):
    return write_doc(small_trace(), tmp_path / "trace.json")


def _bystanders(folder):
    (folder / "notes.txt").write_text("someone's notes")
    (folder / "sub").mkdir()
    (folder / "sub" / "data.bin").write_bytes(b"\x00\x01")


def _snapshot(folder):
    return sorted(
        (p.relative_to(folder).as_posix(), p.read_bytes() if p.is_file() else None)
        for p in folder.rglob("*")
    )


def test_export_param_to_the_current_directory_is_refused_and_deletes_nothing(
    tmp_path, trace, run_cli, monkeypatch
):
    work = tmp_path / "work"
    work.mkdir()
    _bystanders(work)
    before = _snapshot(work)
    monkeypatch.chdir(work)
    for output in (".", str(work), "..", "sub/.."):
        code, _, err = run_cli("export-param", trace, "-o", output, "--force")
        assert code == 2, (output, err)
        assert "current directory or one of its ancestors" in err
        assert len(err.strip().splitlines()) == 1
    assert _snapshot(work) == before


def test_a_directory_output_refuses_an_existing_non_empty_directory_unless_forced(
    tmp_path, trace, run_cli
):
    out = tmp_path / "out"
    out.mkdir()
    _bystanders(out)
    before = _snapshot(out)
    code, _, err = run_cli("export-param", trace, "-o", out)
    assert code == 2 and "--force" in err and len(err.strip().splitlines()) == 1
    assert _snapshot(out) == before
    code, _, err = run_cli("export-param", trace, "-o", out, "--force")
    assert code == 0, err
    assert not (out / "notes.txt").exists() and (out / "export.json").is_file()


def test_a_directory_output_may_fill_an_existing_empty_directory(tmp_path, trace, run_cli):
    (tmp_path / "out").mkdir()
    assert run_cli("export-param", trace, "-o", tmp_path / "out")[0] == 0
    assert (tmp_path / "out" / "export.json").is_file()


def test_a_file_output_refuses_a_fifo_and_leaves_it_a_fifo(tmp_path, trace):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    cmd = [sys.executable, "-m", "tracecanary", "ingest", str(trace), "-o", str(fifo)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "not a regular file" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert fifo.is_fifo()


def test_a_file_output_refuses_an_existing_directory_with_one_line(tmp_path, trace, run_cli):
    (tmp_path / "d").mkdir()
    code, _, err = run_cli("ingest", trace, "-o", tmp_path / "d")
    assert code == 2 and "not a regular file" in err and "Traceback" not in err
    assert (tmp_path / "d").is_dir()


def test_a_file_output_refuses_a_symlink_in_its_place(tmp_path, trace, run_cli):
    (tmp_path / "real.parquet").write_bytes(b"keep")
    os.symlink(tmp_path / "real.parquet", tmp_path / "t.parquet")
    code, _, err = run_cli("ingest", trace, "-o", tmp_path / "t.parquet")
    assert code == 2 and "not a regular file" in err
    assert (tmp_path / "t.parquet").is_symlink()
    assert (tmp_path / "real.parquet").read_bytes() == b"keep"


def test_a_file_output_replaces_an_existing_regular_file(tmp_path, trace, run_cli):
    (tmp_path / "t.parquet").write_bytes(b"old")
    assert run_cli("ingest", trace, "-o", tmp_path / "t.parquet")[0] == 0
    assert (tmp_path / "t.parquet").read_bytes()[:4] == b"PAR1"


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_stale_temporaries_of_the_same_target_are_removed_and_nothing_else(
    tmp_path, trace, run_cli
):
    host = _host_tag()
    dead = _dead_pid()
    stale_file = tmp_path / f".t.parquet.tmp-{host}-{dead}-abc123"
    stale_dir = tmp_path / f".t.parquet.tmp-{host}-{dead}-def456"
    live = tmp_path / f".t.parquet.tmp-{host}-{os.getpid()}-live01"  # a writer still running
    other_target = tmp_path / f".u.parquet.tmp-{host}-{dead}-abc123"
    other_host = tmp_path / f".t.parquet.tmp-00000000-{dead}-abc123"
    foreign = tmp_path / ".t.parquet.tmp-notes"
    stale_file.write_bytes(b"half a parquet")
    stale_dir.mkdir()
    (stale_dir / "piece").write_bytes(b"x")
    for keep in (live, other_target, other_host, foreign):
        keep.write_bytes(b"not mine to delete")
    assert run_cli("ingest", trace, "-o", tmp_path / "t.parquet")[0] == 0
    assert not stale_file.exists() and not stale_dir.exists()
    for keep in (live, other_target, other_host, foreign):
        assert keep.read_bytes() == b"not mine to delete"


def test_a_killed_writer_leaves_a_temporary_the_next_write_removes(tmp_path):
    target = tmp_path / "out.json"
    script = (
        "import os, sys\n"
        "from tracecanary.canonical import atomic_output\n"
        f"with atomic_output({str(target)!r}) as tmp:\n"
        "    tmp.write_text('partial')\n"
        "    os._exit(9)\n"  # killed mid-write: no cleanup runs
    )
    subprocess.run([sys.executable, "-c", script], timeout=120)
    leftovers = list(tmp_path.glob(".out.json.tmp-*"))
    assert len(leftovers) == 1
    with atomic_output(target) as tmp:
        tmp.write_text("complete")
    assert target.read_text() == "complete"
    assert not list(tmp_path.glob(".out.json.tmp-*"))
