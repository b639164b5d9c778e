"""The README's report command runs as written (on the default campaign, in a copy of the
checkout), and its landing page carries the campaign summary."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys

import pytest
from conftest import REPO

CHECKOUT_PARTS = (
    "Snakefile",
    "environment.yml",
    "workflow",
    "scripts",
    "config",
    "schemas",
    "resources/decode",
)


def readme_report_command() -> list[str]:
    """The README's report command line, as a reader would type it."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    lines = [line.strip() for line in text.splitlines()]
    commands = [line for line in lines if line.startswith("snakemake ") and "--report" in line]
    assert len(commands) == 1, commands
    return shlex.split(commands[0])


def copy_checkout(target):
    """The parts of the checkout a campaign reads (symlinked schemas resolved)."""
    for part in CHECKOUT_PARTS:
        src, dst = REPO / part, target / part
        if src.is_dir():
            shutil.copytree(src, dst, symlinks=False)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dst)
    return target


def test_readme_report_command_sets_the_cores_snakemake_requires():
    argv = readme_report_command()
    assert argv[0] == "snakemake" and "--cores" in argv and "report.html" in argv


@pytest.mark.slow
def test_readme_report_command_runs_as_written_on_the_default_campaign(tmp_path):
    checkout = copy_checkout(tmp_path / "checkout")
    snakemake = [sys.executable, "-m", "snakemake"]
    run = subprocess.run(
        [*snakemake, "--cores", "2", "--quiet"],  # the README's `snakemake --cores 2`
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    # as written, but on the default campaign (the full one takes minutes)
    argv = [
        a.replace("config/campaign.yaml", "config/config.yaml") for a in readme_report_command()
    ]
    report = subprocess.run(
        [*snakemake, *argv[1:]], cwd=checkout, capture_output=True, text=True, timeout=600
    )
    assert report.returncode == 0, report.stderr[-3000:]
    html = (checkout / "report.html").read_text(encoding="utf-8")
    summary = (checkout / "results/default/summary.md").read_text(encoding="utf-8")
    canary_size = re.search(r"\(([0-9,]+ B)\)", summary).group(1)
    assert 'class=\\"tc-page\\"' in html or 'class="tc-page"' in html
    assert canary_size in html  # the summary table is in the landing page's description
