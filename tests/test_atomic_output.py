"""atomic_output: all or nothing, parents included, readable by others."""

from __future__ import annotations

import stat

import pytest

from tracecanary.canonical import atomic_output
from tracecanary.cli import main


def test_failure_removes_the_parent_directories_it_made(tmp_path):
    target = tmp_path / "a" / "b" / "out.json"
    with pytest.raises(RuntimeError), atomic_output(target) as tmp:
        tmp.write_text("partial")
        raise RuntimeError("stage failed")
    assert list(tmp_path.iterdir()) == []


def test_failure_keeps_parents_that_existed_or_gained_other_files(tmp_path):
    (tmp_path / "a").mkdir()
    target = tmp_path / "a" / "b" / "out"
    with pytest.raises(RuntimeError), atomic_output(target, directory=True) as tmp:
        (tmp / "piece").write_text("x")
        (tmp_path / "a" / "b" / "other").write_text("someone else's")
        raise RuntimeError("stage failed")
    assert sorted(p.name for p in (tmp_path / "a" / "b").iterdir()) == ["other"]


def test_success_gives_world_readable_files_and_directories(tmp_path):
    with atomic_output(tmp_path / "d", directory=True) as tmp:
        (tmp / "f").write_text("x")
    with atomic_output(tmp_path / "f") as tmp:
        tmp.write_text("x")
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o644


def test_a_refused_ingest_leaves_no_output_directory(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "tracecanary.trace/v1"')
    out = tmp_path / "results" / "deep" / "t.parquet"
    assert main(["ingest", str(bad), "-o", str(out)]) == 2
    assert not (tmp_path / "results").exists()
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_the_current_directory_and_its_ancestors_are_never_an_output(tmp_path, monkeypatch):
    from tracecanary.errors import InputError

    (tmp_path / "keep.txt").write_text("x")
    monkeypatch.chdir(tmp_path)
    for target in (".", tmp_path, tmp_path.parent, "a/.."):
        with pytest.raises(InputError, match="current directory"):
            with atomic_output(target, directory=True, replace=True):
                pass
    assert (tmp_path / "keep.txt").read_text() == "x"


def test_a_non_empty_directory_is_replaced_only_when_allowed(tmp_path):
    from tracecanary.canonical import replacing_directories
    from tracecanary.errors import InputError

    out = tmp_path / "out"
    out.mkdir()
    (out / "theirs").write_text("x")
    with pytest.raises(InputError, match="--force"), atomic_output(out, directory=True):
        pass
    assert (out / "theirs").exists()
    with replacing_directories(True), atomic_output(out, directory=True) as tmp:
        (tmp / "mine").write_text("y")
    assert sorted(p.name for p in out.iterdir()) == ["mine"]


def test_a_file_output_never_replaces_a_fifo(tmp_path):
    import os

    from tracecanary.errors import InputError

    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(InputError, match="not a regular file"), atomic_output(tmp_path / "pipe"):
        pass
    assert (tmp_path / "pipe").is_fifo()
    assert [p.name for p in tmp_path.iterdir()] == ["pipe"]


@pytest.mark.parametrize("directory", [False, True])
def test_a_temporary_is_private_named_for_its_writer_and_never_an_existing_path(
    tmp_path, monkeypatch, directory
):
    from tracecanary import canonical

    target = tmp_path / "out"
    prefix = canonical._temporary_prefix(target)
    taken_file = tmp_path / f"{prefix}{'00' * 8}"
    taken_file.write_text("someone else's")
    taken_link = tmp_path / f"{prefix}{'01' * 8}"
    taken_link.symlink_to(tmp_path / "elsewhere")
    draws = iter([b"\x00" * 8, b"\x01" * 8, b"\x02" * 8])
    monkeypatch.setattr(canonical.os, "urandom", lambda n: next(draws))
    made = canonical._new_temporary(target, directory=directory)
    assert made == tmp_path / f"{prefix}{'02' * 8}"
    assert stat.S_IMODE(made.stat().st_mode) == (0o700 if directory else 0o600)
    assert made.is_dir() == directory
    assert taken_file.read_text() == "someone else's"
    assert taken_link.is_symlink() and not (tmp_path / "elsewhere").exists()
