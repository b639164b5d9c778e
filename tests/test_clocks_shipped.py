"""The shipped decode capture set (resources/decode) calibrated from its own trace: the
derived interval holds the generator's true offset (its shipped calibration), and the
merged trace still yields a verified searched canary, as it does through the shipped
calibration file (the two searches' size and claim are compared)."""

from __future__ import annotations

import json

import pytest
from conftest import REPO

from tracecanary.cli import main

pytestmark = pytest.mark.slow

DECODE = REPO / "resources/decode"
CAPTURES = [str(DECODE / f"rank{r}.jsonl.gz") for r in range(4)]
BACKENDS = REPO / "config/backends.yaml"
BUDGETS = "0,1,2,4,8,16,32,64"  # the campaign's search budgets (config/campaign.yaml)


def _searched(tmp_path, calibration, name: str) -> dict:
    merged = tmp_path / f"{name}.jsonl.gz"
    assert main(["merge", *CAPTURES, "--calibration", str(calibration), "-o", str(merged)]) == 0
    canary, log = tmp_path / f"{name}.canary.json", tmp_path / f"{name}.search.json"
    code = main(
        ["search", str(merged), "--budgets", BUDGETS, "--backends", str(BACKENDS)]
        + ["-o", str(canary), "--log", str(log)]
    )
    assert code == 0
    return json.loads(canary.read_text())


def test_shipped_decode_calibrated_from_its_own_trace_yields_a_verified_searched_canary(tmp_path):
    derived_path = tmp_path / "derived.json"
    assert main(["calibrate-clocks", *CAPTURES, "-o", str(derived_path)]) == 0
    derived = json.loads(derived_path.read_text())
    shipped = json.loads((DECODE / "calibration.json").read_text())
    truth = {c["clock"]: c["offset_ns"] for c in shipped["clocks"]}
    for clock in derived["clocks"]:
        lo, hi = clock["offset_interval_ns"]
        assert lo <= truth[clock["clock"]] <= hi
    by_derived = _searched(tmp_path, derived_path, "derived")
    by_shipped = _searched(tmp_path, DECODE / "calibration.json", "shipped")
    assert by_derived["claim"] == by_shipped["claim"] == "verified"
    derived_unc = max(c["uncertainty_ns"] for c in derived["clocks"])
    assert by_derived["source"]["skew_uncertainty_ns"] == derived_unc
    assert by_derived["budget"]["skew_ns"] >= derived_unc
    # the looser clock bound costs at most a few times the shipped canary's bytes
    assert by_derived["stats"]["bytes_canary"] <= 4 * by_shipped["stats"]["bytes_canary"]
