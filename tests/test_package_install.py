"""A non-editable install works anywhere: schemas and shipped defaults travel as package
data, so stages run from a directory outside the checkout with default paths."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, SHARED

LADDER = SHARED / "nccltests_samples" / "polaris_a100_8rank_all_reduce.txt"
DEFAULTS = REPO / "src" / "tracecanary" / "defaults"


def test_shipped_defaults_equal_the_config_copies_byte_for_byte():
    shipped = sorted(p.name for p in DEFAULTS.glob("*.yaml"))
    assert shipped, "no shipped defaults"
    for name in shipped:
        assert (DEFAULTS / name).read_bytes() == (REPO / "config" / name).read_bytes(), name


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, str]:
    """``pip install`` (not editable) of a clean copy of the checkout into a target folder;
    the environment that imports it (and nothing from ``src/``) first."""
    root = tmp_path_factory.mktemp("install")
    source = root / "source"  # a copy: building never writes into the checkout
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(
        REPO / "src",
        source / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
    )
    target = root / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
         "--no-build-isolation", "--target", str(target), str(source)],
        check=True, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(target), "PYTHONNOUSERSITE": "1"}
    return {"target": str(target), **env}


def _tracecanary(env: dict[str, str], cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    """``tracecanary ARGV`` in ``cwd``, refusing (exit 3) to run unless the package it
    imports is the installed copy."""
    run_env = {k: v for k, v in env.items() if k != "target"}
    guard = (
        "import sys, pathlib, tracecanary\n"
        "if not pathlib.Path(tracecanary.__file__).is_relative_to(sys.argv[1]):\n"
        "    print('imported', tracecanary.__file__, file=sys.stderr)\n"
        "    sys.exit(3)\n"
        "from tracecanary.cli import main\n"
        "sys.exit(main(sys.argv[2:]))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", guard, env["target"], *argv],
        cwd=cwd, env=run_env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


@pytest.mark.slow
def test_the_installed_copy_is_what_runs_not_the_checkout(installed, tmp_path):
    run_env = {k: v for k, v in installed.items() if k != "target"}
    probe = (
        "import tracecanary, tracecanary.formats.schemas as s, tracecanary.defaults as d; "
        "print(tracecanary.__file__); print(d.default_file('backends.yaml')); "
        "print(len(s.schema_names()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=run_env,
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    package, backends, schemas = out.stdout.split()
    assert Path(package).is_relative_to(installed["target"])
    assert Path(backends).is_relative_to(installed["target"])
    assert int(schemas) >= 15
    assert not Path(package).is_relative_to(REPO)


@pytest.mark.slow
def test_installed_package_compiles_searches_and_replays_outside_the_checkout(installed, tmp_path):
    work = tmp_path / "elsewhere"
    work.mkdir()
    shutil.copy(REPO / "resources" / "traces" / "adversarial.json", work / "trace.json")
    steps = [
        ("compile", "trace.json", "--lossless", "-o", "canary.json"),
        ("search", "trace.json", "--budgets", "0,1", "-o", "searched.json", "--log", "log.json"),
        ("replay", "trace.json", "-o", "report.json"),
        ("verify-behavior", "trace.json", "canary.json", "-o", "verification.json"),
    ]
    for argv in steps:
        done = _tracecanary(installed, work, *argv)
        assert done.returncode == 0, (argv, done.stderr)
    for name in ("canary.json", "searched.json", "log.json", "report.json", "verification.json"):
        assert (work / name).stat().st_size > 0, name


@pytest.mark.slow
@pytest.mark.skipif(not LADDER.is_file(), reason="../shared/nccltests_samples is absent")
def test_installed_package_fits_a_ladder_outside_the_checkout(installed, tmp_path):
    shutil.copy(LADDER, tmp_path / "ladder.txt")
    done = _tracecanary(installed, tmp_path, "alphabeta", "ladder.txt", "-o", "fit.json")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "fit.json").stat().st_size > 0
