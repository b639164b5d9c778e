"""A zoo program end to end by hand, as a user without the campaign would run it: a real
4-rank gloo capture of the tp_decode workload, searched, exported, its ladders derived from
the exports (and complete: calibrate-backends prices both programs from them), both
programs replayed through real collectives, compared by `compare-physical`, and exported
for Perfetto with the canary's attempt (checked by the Trace Event Format reading of
tests/test_chrome_trace.py)."""

from __future__ import annotations

import json

import pytest
from conftest import REPO
from test_chrome_trace import check_trace_event_format

from tracecanary.physical.ladders import sweep_argv
from tracecanary.sim.costs import curve_key
from tracecanary.sim.twin import op_table

pytestmark = pytest.mark.slow

SAME_HOST = {
    "format": "tracecanary.calibration/v1",
    "reference": "host",
    "method": "same-host",
    "clocks": [{"ranks": [0, 1, 2, 3], "offset_ns": 0, "drift_ppb": 0, "uncertainty_ns": 0}],
}


@pytest.fixture(scope="module")
def zoo_exports(tmp_path_factory):
    from tracecanary.cli import main

    root = tmp_path_factory.mktemp("zoo")
    cap = root / "capture"
    assert main(["capture", "--workload", "tp_decode", "--steps", "4", "-o", str(cap)]) == 0
    imported = root / "import"
    assert (
        main(["import-kineto", *map(str, sorted(cap.glob("rank*.json.gz"))), "-o", str(imported)])
        == 0
    )
    (root / "same-host.json").write_text(json.dumps(SAME_HOST))
    merged = root / "merged.jsonl.gz"
    captures = [str(p) for p in sorted(imported.glob("rank*.json"))]
    argv = ["merge", *captures, "--calibration", str(root / "same-host.json"), "-o", str(merged)]
    assert main(argv) == 0
    canary = root / "canary.json"
    argv = ["search", str(merged), "--budgets", "0,8", "-o", str(canary), "--quiet"]
    assert main([*argv, "--log", str(root / "search.json")]) == 0
    exports = {"canary": root / "param-canary", "full": root / "param-full"}
    assert main(["export-param", str(canary), "-o", str(exports["canary"])]) == 0
    argv = ["export-param", str(merged), "--execution", "full", "-o", str(exports["full"])]
    assert main(argv) == 0
    return {"root": root, "merged": merged, "canary_json": canary, "exports": exports}


def test_derived_ladders_cover_every_call_and_calibrate_both_programs(zoo_exports, run_cli):
    root = zoo_exports["root"]
    programs = [zoo_exports["exports"]["canary"], zoo_exports["exports"]["full"]]
    out = root / "ladders.json"
    argv = ["derive-ladders", *programs, "--config", "native", "--warmup", "0", "--iters", "1"]
    code, stdout, err = run_cli(*argv, "--cycles", "1", "-o", out)
    assert code == 0, err
    doc = json.loads(out.read_text())
    used = {}
    for program in programs:
        table = op_table(program)
        for op, dtype, size, nbytes in zip(
            table["op"], table["dtype"], table["group_size"], table["bytes"], strict=True
        ):
            key = curve_key(op, dtype, int(size))
            lo, hi = used.get(key, (nbytes, nbytes))
            used[key] = (min(lo, nbytes), max(hi, nbytes))
    derived = {(x["collective"], x["dtype"], x["nproc"]): x for x in doc["ladders"]}
    assert set(derived) == set(used)  # what the exports use, nothing else
    for key, (lo, hi) in used.items():  # at the sizes they use
        assert derived[key]["min_bytes"] <= lo and hi <= derived[key]["max_bytes"]
        assert derived[key]["max_bytes"] <= 4 * max(hi, 1)
    assert stdout.count("tracecanary sweep ") == len(derived)
    ladders = []
    for ladder in doc["ladders"]:
        target = root / "sweeps" / ladder["id"]
        code, _, err = run_cli(*sweep_argv(ladder, backend="gloo", output=str(target)), "--quiet")
        assert code == 0, err
        ladders.append(target)
    calibrated = root / "calibrated.yaml"
    argv = ["calibrate-backends", *ladders, "--physical-configs", REPO / "config/physical.yaml"]
    argv += ["--config", "native", "--program", programs[0], "--program", programs[1]]
    code, _, err = run_cli(*argv, "-o", calibrated)
    assert code == 0, err  # no call of either program is left without a curve


def test_compare_physical_and_perfetto_export_of_a_replayed_zoo_program(zoo_exports, run_cli):
    root = zoo_exports["root"]
    attempts = {}
    for program in ("canary", "full"):
        attempts[program] = root / "attempts" / program
        argv = ["replay-physical", zoo_exports["exports"][program], "--nproc", "4"]
        argv += ["--warmup", "0", "--iters", "1", "--quiet"]
        code, _, err = run_cli(*argv, "-o", attempts[program])
        assert code == 0, err
    report_path = root / "physical.json"
    argv = ["compare-physical", attempts["canary"], attempts["full"], "--max-runtime-ratio", "10"]
    code, stdout, err = run_cli(*argv, "-o", report_path)
    assert code == 0, err
    report = json.loads(report_path.read_text())
    (ratio,) = report["runtime_reduction"].values()
    assert report["runtime_reduction"] == {"native": ratio} and ratio > 0
    assert f"canary/full pass time native: {ratio:.3g}" in stdout
    trace = root / "perfetto.json"
    argv = ["export-perfetto", zoo_exports["merged"], zoo_exports["canary_json"]]
    code, _, err = run_cli(*argv, "--attempt", attempts["canary"], "-o", trace)
    assert code == 0, err
    doc = json.loads(trace.read_text())
    names = check_trace_event_format(doc)
    physical = [e for e in doc["traceEvents"] if e.get("cat") == "physical"]
    assert physical and {e["pid"] - 3_000_000 for e in physical} == {0, 1, 2, 3}
    assert {names["process"][1_000_000 + r] for r in range(4)} == {
        f"source · rank {r}" for r in range(4)
    }
