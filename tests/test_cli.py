"""The CLI itself: discovery of every stage, fast startup, one-line errors."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def test_cli_startup_imports_no_heavy_libraries():
    """Building the parser must not import torch, matplotlib, pandas or snakemake:
    every `tracecanary` call would pay seconds for stages it does not run."""
    code = (
        "import sys; from tracecanary.cli import build_parser; build_parser(); "
        "print(','.join(m for m in ('torch', 'matplotlib', 'pandas', 'snakemake', 'scipy') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert out.stdout.strip() == "", f"imported at startup: {out.stdout.strip()}"


def test_every_stage_is_a_subcommand():
    from tracecanary.cli import build_parser

    parser = build_parser()
    names = set(parser._subparsers._group_actions[0].choices)  # noqa: SLF001
    assert {"ingest", "merge", "hash", "synth", "manifest", "export-param"} <= names


def test_missing_input_file_is_one_line_exit_2(run_cli, tmp_path):
    code, _, err = run_cli("ingest", tmp_path / "nope.json", "-o", tmp_path / "o.parquet")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no such file" in err


def test_cli_collective_choices_are_the_stage_modules_vocabulary():
    from tracecanary.alphabeta.ladder import COLLECTIVES as LADDER
    from tracecanary.commands import alphabeta, sweep
    from tracecanary.physical.sweep import COLLECTIVES as SWEEP

    assert alphabeta.COLLECTIVES == LADDER
    assert sweep.COLLECTIVES == SWEEP
