"""The replayer's dispatch lateness (sim/dispatch.py): a calibration program built from the
priced programs' step transitions, replayed for real (gloo), measured into the calibrated
backends and added by the twin; refusals by name."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tracecanary.cli import main
from tracecanary.errors import InputError
from tracecanary.physical.samples import bench_program, write_program
from tracecanary.sim.backends import backends_from_content, load_backends
from tracecanary.sim.twin import (
    dispatch_lateness_ns,
    op_table,
    plan_steps,
    simulate_twin,
    step_signatures,
)

PHYSICAL_YAML = Path(__file__).resolve().parents[1] / "config" / "physical.yaml"
NATIVE = {"mode": "native", "op_barrier": False}


def _doc(dispatch: dict | None) -> dict:
    points = [{"bytes": b, "monotone_us": v, "median_us": v, "n_cycles": 3, "cv_pct": 1.0}
              for b, v in ((1000, 10.0), (100_000, 100.0))]  # fmt: skip
    curve = {
        "collective": "all_reduce", "dtype": "float32", "group_size": 2,
        "placement": "unspecified", "points": points, "segments": [],
        "error": {"stated_error_pct": 1.0}, "excluded_rungs": [],
        "ladders": [{"name": "x", "sha256": "0" * 64}], "notes": [],
    }  # fmt: skip
    measured = {
        "method": "tracecanary.calibrate-backends/v1", "evidence": "gloo", "env": {},
        "replay": NATIVE, "costs": [curve],
    }  # fmt: skip
    if dispatch is not None:
        measured["dispatch"] = dispatch
    return {
        "format": "tracecanary.backends/v1",
        "configs": {"c": {"overlap_efficiency": 0.0, "contention": 0.0, "measured": measured}},
    }


def _table(sizes: list[int]):
    import pandas as pd

    n = len(sizes)
    return pd.DataFrame(
        {"occ": range(n), "op": ["all_reduce"] * n, "bytes": sizes, "dtype": ["float32"] * n,
         "group_size": [2] * n, "pg_id": [0] * n, "root": [-1] * n, "weight": [1.0] * n,
         "start_ns": [-1] * n, "skew_ns": [0] * n}
    )  # fmt: skip


SMALL, BIG = "all_reduce:float32:2:1000:1", "all_reduce:float32:2:100000:1"
DISPATCH = {
    "method": "tracecanary.dispatch-transitions/v1",
    "attempts": [{"input_digest": "d", "rows_sha256": "0" * 64}],
    "contexts": [{"prev2": SMALL, "prev": SMALL, "step": BIG, "lateness_us": 7.0, "n": 3}],
    "transitions": [{"prev": BIG, "step": SMALL, "lateness_us": 50.0, "n": 3}],
    "steps": [
        {"step": SMALL, "lateness_us": 5.0, "n": 6},
        {"step": BIG, "lateness_us": -20.0, "n": 3},
    ],
}


def test_twin_adds_the_lateness_of_the_deepest_measured_history_after_the_first_step():
    cfg = backends_from_content(_doc(DISPATCH)).configs["c"]
    table = _table([100_000, 1000, 1000, 100_000, 100_000])
    with_term = simulate_twin(table, cfg)
    ladders_only = simulate_twin(table, cfg, dispatch=False)
    assert ladders_only.latency_ns.tolist() == [100_000, 10_000, 10_000, 100_000, 100_000]
    # first step: none; BIG->SMALL: its transition (50 us, no deeper history exists);
    # BIG,SMALL->SMALL: neither context nor transition measured, SMALL's signature (5 us);
    # SMALL,SMALL->BIG: its context (7 us); SMALL,BIG->BIG: BIG's signature (-20 us)
    assert with_term.latency_ns.tolist() == [100_000, 60_000, 15_000, 107_000, 80_000]
    assert with_term.unmatched_contexts == 2 and with_term.dispatch
    assert with_term.pass_ns == ladders_only.pass_ns + 42_000
    assert with_term.metrics_us()["unmatched_contexts"] == 2


def test_twin_refuses_a_step_whose_signature_was_never_measured():
    cfg = backends_from_content(_doc(DISPATCH)).configs["c"]
    with pytest.raises(InputError, match="no dispatch measurement for step all_reduce:float32:2:"
                       "5000:1") as err:  # fmt: skip
        simulate_twin(_table([1000, 5000]), cfg)
    assert "configs/c" in err.value.one_line()


def test_dispatch_lateness_never_makes_a_step_cost_less_than_nothing():
    late, unmatched = dispatch_lateness_ns(DISPATCH, [SMALL, BIG], config="c")
    assert late.tolist() == [0.0, -20_000.0] and unmatched == 1  # no transition SMALL->BIG
    doc = json.loads(json.dumps(DISPATCH))
    doc["steps"][1]["lateness_us"] = -1e6
    cfg = backends_from_content(_doc(doc)).configs["c"]
    assert simulate_twin(_table([1000, 100_000]), cfg).latency_ns.tolist() == [10_000, 0]


def test_dispatch_document_is_validated_by_the_backends_schema(tmp_path):
    from tracecanary.errors import SchemaError

    path = tmp_path / "b.json"
    path.write_text(json.dumps(_doc(DISPATCH)))
    assert load_backends(path).configs["c"].dispatch["transitions"][0]["lateness_us"] == 50.0
    bad = json.loads(json.dumps(DISPATCH))
    bad["transitions"][0]["n"] = 0
    path.write_text(json.dumps(_doc(bad)))
    with pytest.raises(SchemaError, match="dispatch"):
        load_backends(path)


@pytest.mark.parametrize("config", ["native", "fused64k"])
def test_calibration_program_repeats_every_step_transition_of_the_priced_programs(tmp_path, config):
    from tracecanary.physical.config import resolve_config

    program = write_program(tmp_path / "p", bench_program(2, motifs=2))
    record = resolve_config(PHYSICAL_YAML, config, "gloo")
    replay = {"mode": record["mode"], "op_barrier": False}
    replay.update({k: record[k] for k in ("bucket_bytes",) if k in record})
    out = tmp_path / "cal"
    assert main(["dispatch-program", str(program), "--config", config, "--physical-configs",
                 str(PHYSICAL_YAML), "--repeats", "3", "-o", str(out)]) == 0  # fmt: skip
    source = op_table(program)
    src_sigs = step_signatures(source, plan_steps(source, replay))
    cal = op_table(out)
    cal_sigs = step_signatures(cal, plan_steps(cal, replay))
    runs = [tuple(src_sigs[i : i + 3]) for i in range(len(src_sigs) - 2)]
    got = [tuple(cal_sigs[i : i + 3]) for i in range(len(cal_sigs) - 2)]
    for run in set(runs):  # every two-step history of the source, repeated
        assert got.count(run) >= 3
    assert set(cal["weight"]) == {1.0} and (cal["start_ns"] == -1).all()
    # the output exists now: a second run refuses to replace it without --force
    assert main(["dispatch-program", str(program), "--config", config, "--physical-configs",
                 str(PHYSICAL_YAML), "-o", str(out)]) == 2  # fmt: skip


@pytest.mark.slow
def test_calibrate_backends_measures_dispatch_from_a_real_calibration_replay(
    tmp_path, gloo_float32_ladders
):
    program = write_program(tmp_path / "p", bench_program(2, motifs=1))
    # real gloo ladders of the program's collectives (the session's shared sweep)
    ladders = [gloo_float32_ladders[c] for c in ("all_reduce", "all_gather", "reduce_scatter")]
    cal, attempt = tmp_path / "cal", tmp_path / "attempt"
    assert main(["dispatch-program", str(program), "--config", "native", "--physical-configs",
                 str(PHYSICAL_YAML), "--repeats", "2", "-o", str(cal)]) == 0  # fmt: skip
    assert main(["replay-physical", str(cal), "--nproc", "2", "--warmup", "0", "--iters", "1",
                 "--physical-config", "native", "--physical-configs", str(PHYSICAL_YAML),
                 "-o", str(attempt)]) == 0  # fmt: skip
    base = ["calibrate-backends", *ladders, "--physical-configs", str(PHYSICAL_YAML),
            "--backend", "gloo", "--program", str(program)]  # fmt: skip
    out = tmp_path / "b.yaml"
    assert main([*base, "--config", "native", "--dispatch", f"native={attempt}",
                 "-o", str(out)]) == 0  # fmt: skip
    cfg = load_backends(out).configs["native"]
    rows_sha = json.loads((attempt / "attempt.json").read_text())["files"]["rows.parquet"]
    assert [a["rows_sha256"] for a in cfg.dispatch["attempts"]] == [rows_sha]
    table = op_table(program)
    sigs = step_signatures(table, plan_steps(table, NATIVE))
    measured = {(t["prev2"], t["prev"], t["step"]) for t in cfg.dispatch["contexts"]}
    assert {tuple(sigs[i : i + 3]) for i in range(len(sigs) - 2)} <= measured
    priced = simulate_twin(table, cfg)
    assert priced.dispatch and priced.unmatched_contexts == 0
    assert np.isfinite(priced.metrics_us()["mean"])
    # the native attempt is no evidence for the fused configuration: refused, nothing written
    out2 = tmp_path / "b2.yaml"
    assert main([*base, "--config", "native", "--config", "fused64k", "--dispatch",
                 f"fused64k={attempt}", "-o", str(out2)]) == 2  # fmt: skip
    assert not out2.exists()
    # a calibration program changed since its replay is no evidence: refused, nothing written
    (cal / "0.json").write_text((cal / "0.json").read_text() + " ")
    assert main([*base, "--config", "native", "--dispatch", f"native={attempt}",
                 "-o", str(out2)]) == 2  # fmt: skip
    assert not out2.exists()
    # a configuration that is not calibrated here is refused by name
    assert main([*base, "--config", "native", "--dispatch", f"chunked4={attempt}",
                 "-o", str(out2)]) == 2  # fmt: skip
    assert not out2.exists()


def test_dispatch_program_refuses_programs_whose_process_groups_differ(tmp_path):
    one = write_program(tmp_path / "a", bench_program(2, motifs=1))
    # the same ops on a process group with another id
    files = [[{**e, "pg_id": 7} for e in f] for f in bench_program(2, motifs=1)]
    two = write_program(tmp_path / "b", files)
    out = tmp_path / "cal"
    argv = ["dispatch-program", str(one), str(two), "--config", "native"]
    assert main([*argv, "--physical-configs", str(PHYSICAL_YAML), "-o", str(out)]) == 2
    assert not out.exists()
