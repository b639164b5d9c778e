"""``tracecanary doctor``: the real command on this machine, and checks that truly fail.

The first test runs ``python -m tracecanary doctor`` as a separate process (what a user
types); the others run the same CLI in-process (``run_cli``), which is what they are about
and saves a Python + torch start per test."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO


def _doctor(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tracecanary", "doctor", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def test_doctor_passes_on_this_machine_and_lists_every_area(tmp_path):
    out = _doctor("--workdir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    for row in (
        "torch.distributed gloo",
        "snakemake executable",
        "SLURM executor plugin",
        "Chromium",
        f"write access to {tmp_path}",
        "schemas",
        "shipped defaults",
        "max_events",
        "python",
        "torch build",
    ):
        assert row in out.stdout, row
    assert out.stderr == ""
    assert list(tmp_path.iterdir()) == [], "doctor left its probe file behind"


class _Done:
    """The exit code and output of one in-process CLI run, named like CompletedProcess."""

    def __init__(self, code: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = code, stdout, stderr


@pytest.fixture
def doctor(run_cli, monkeypatch):
    """``tracecanary doctor ARGS`` in-process, with ``env`` set for the call."""

    def _run(*args: str, env: dict | None = None) -> _Done:
        for name, value in (env or {}).items():
            monkeypatch.setenv(name, value)
        return _Done(*run_cli("doctor", *args))

    return _run


def test_doctor_json_reports_declared_libraries_with_their_versions(tmp_path, doctor):
    out = doctor("--workdir", str(tmp_path), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    by_name = {c["name"]: c for c in doc["checks"]}
    assert doc["ok"] is True
    assert by_name["torch"]["required"] and "needs ==2.13.0" in by_name["torch"]["found"]
    assert by_name["snakemake-executor-plugin-slurm"]["ok"]
    # optional pieces are reported, never counted as failures
    assert by_name["torch.distributed NCCL"]["required"] is False
    assert by_name["CUDA devices"]["required"] is False


def test_doctor_exits_1_naming_a_workdir_below_a_regular_file(tmp_path, doctor):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    out = doctor("--workdir", str(blocker / "results"))
    assert out.returncode == 1
    assert f"missing: write access to {blocker / 'results'}" in out.stderr
    assert "is a file" in out.stderr and "fix:" in out.stderr
    assert blocker.read_text() == "not a directory"


def test_doctor_accepts_an_absent_workdir_under_a_writable_parent_without_creating_it(tmp_path, doctor):
    target = tmp_path / "not" / "yet"
    out = doctor("--workdir", str(target))
    assert out.returncode == 0, out.stderr
    assert "can be made" in out.stdout and not (tmp_path / "not").exists()


def test_doctor_exits_1_on_an_invalid_limits_override(tmp_path, doctor):
    out = doctor("--workdir", str(tmp_path), env={"TRACECANARY_LIMITS": "max_bogus=3"})
    assert out.returncode == 1
    assert "missing: TRACECANARY_LIMITS" in out.stderr and "max_bogus" in out.stderr


def test_doctor_shows_a_limits_override_in_force(tmp_path, doctor):
    out = doctor("--workdir", str(tmp_path), env={"TRACECANARY_LIMITS": "max_events=1e9"})
    assert out.returncode == 0, out.stderr
    assert "1,000,000,000 (overridden)" in out.stdout
