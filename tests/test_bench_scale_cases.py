"""``python -m bench.bench_scale --cases``: a selection runs the cases named with the
comparators their rows need, in run order, and refuses a name it does not know."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.bench_scale import CASES, selected_cases

REPO = Path(__file__).resolve().parents[1]


def test_a_large_case_runs_with_the_1m_and_10m_cases_its_projection_needs():
    assert selected_cases(["100m-16k"]) == ("1m", "10m", "100m-16k")


def test_the_10m_case_runs_with_the_1m_case_its_time_ratio_is_against():
    assert selected_cases(["10m"]) == ("1m", "10m")


def test_no_selection_runs_every_case_in_run_order():
    assert selected_cases(None) == CASES
    assert selected_cases(["100m-16k", "100m-1024"]) == CASES


def test_an_unknown_case_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match="unknown case.*'100M'.*known: 1m, 10m"):
        selected_cases(["100M"])


def test_the_command_line_refuses_an_unknown_case_with_exit_2():
    proc = subprocess.run(
        [sys.executable, "-m", "bench.bench_scale", "--full", "--cases", "1m,bogus"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "unknown case(s) ['bogus']" in proc.stderr.splitlines()[-1]
