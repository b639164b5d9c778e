"""The simulator twin of a physical replay: every replayer mode as a program transform,
priced by costs calibrated from gloo ladders swept here (real torch.distributed runs)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tracecanary.cli import main
from tracecanary.physical.samples import bench_program, write_program
from tracecanary.sim.backends import backends_from_content, load_backends
from tracecanary.sim.twin import op_table, plan_steps, simulate_twin

PHYSICAL_YAML = Path(__file__).resolve().parents[1] / "config" / "physical.yaml"
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")


@pytest.fixture(scope="module")
def gloo_ladders(gloo_float32_ladders) -> list[str]:
    """float32 ladders of the bench program's collectives (and the decomposition's), 2 ranks,
    256 B-4 MiB (the session's shared sweep, conftest.gloo_float32_ladders)."""
    return [gloo_float32_ladders[coll] for coll in COLLECTIVES]


@pytest.fixture(scope="module")
def program_dir(tmp_path_factory) -> Path:
    return write_program(tmp_path_factory.mktemp("prog") / "p", bench_program(2, motifs=2))


@pytest.fixture(scope="module")
def calibrated(gloo_ladders, tmp_path_factory):
    out = tmp_path_factory.mktemp("cal") / "backends.yaml"
    names = ["native", "fused64k", "chunked4", "decomposed", "native_barrier"]
    argv = ["calibrate-backends", *gloo_ladders, "--physical-configs", str(PHYSICAL_YAML)]
    argv += [x for n in names for x in ("--config", n)] + ["--backend", "gloo", "-o", str(out)]
    assert main(argv) == 0
    return load_backends(out)


@pytest.mark.slow
def test_calibrated_configurations_follow_the_physical_ones(calibrated, gloo_ladders):
    assert sorted(calibrated.configs) == [
        "chunked4", "decomposed", "fused64k", "native", "native_barrier"
    ]  # fmt: skip
    assert calibrated.configs["chunked4"].replay == {
        "mode": "chunked",
        "op_barrier": False,
        "chunks": 4,
    }
    assert calibrated.configs["native_barrier"].replay["op_barrier"] is True
    native = calibrated.content["configs"]["native"]["measured"]
    assert {c["collective"] for c in native["costs"]} == set(COLLECTIVES)
    for curve in native["costs"]:
        assert curve["group_size"] == 2 and curve["dtype"] == "float32"
        assert len(curve["ladders"]) == 1 and len(curve["ladders"][0]["sha256"]) == 64


@pytest.mark.slow
def test_twin_modes_transform_the_program_before_pricing(calibrated, program_dir):
    table = op_table(program_dir)
    native = simulate_twin(table, calibrated.configs["native"])
    chunked = simulate_twin(table, calibrated.configs["chunked4"])
    fused = simulate_twin(table, calibrated.configs["fused64k"])
    decomposed = simulate_twin(table, calibrated.configs["decomposed"])
    assert native.calls == native.steps == len(table)
    assert chunked.calls == 4 * len(table)
    # the 16 small all_reduces of each motif (4 KiB each) fuse into one 64 KiB bucket
    assert fused.steps == len(table) - 2 * 15
    # all_reduce -> 2 calls, all_gather / reduce_scatter -> one call per member (2 ranks)
    assert decomposed.calls == 2 * len(table)
    costs = calibrated.configs["native"].costs
    big = table.index[(table["op"] == "all_reduce") & (table["bytes"] == 1 << 20)][0]
    quarter, _ = costs.curves[("all_reduce", "float32", 2)].cost_us(np.array([1 << 18]))
    assert chunked.latency_ns[big] == int(np.rint(4 * quarter[0] * 1000.0))
    whole, _ = costs.curves[("all_reduce", "float32", 2)].cost_us(np.array([1 << 20]))
    assert native.latency_ns[big] == int(np.rint(whole[0] * 1000.0))
    assert native.pass_ns == int(np.sum(np.rint(native.latency_ns)))


@pytest.mark.slow
def test_twin_refuses_a_mode_whose_calls_have_no_ladder(gloo_ladders, program_dir, tmp_path):
    from tracecanary.errors import InputError

    out = tmp_path / "b.json"
    argv = ["calibrate-backends", gloo_ladders[0], "--physical-configs", str(PHYSICAL_YAML)]
    argv += ["--config", "decomposed", "--backend", "gloo", "-o", str(out)]
    assert main(argv) == 0  # all_reduce evidence only
    with pytest.raises(InputError, match="reduce_scatter float32 on 2 ranks"):
        simulate_twin(op_table(program_dir), load_backends(out).configs["decomposed"])
    # and calibrate-backends --program refuses it by name, writing nothing
    out2 = tmp_path / "b2.json"
    assert main([*argv[:-1], str(out2), "--program", str(program_dir)]) == 2
    assert not out2.exists()


def test_fused_plan_matches_the_replayer_bucket_plan(program_dir):
    from tracecanary.param.program import load_program_dir
    from tracecanary.physical import strategies

    rank0 = load_program_dir(program_dir)[0]
    specs = [
        strategies.OpSpec(
            index=i,
            op=r.op,
            in_elems=0,
            out_elems=0,
            info=r.dtype,
            pg_id=int(r.pg_id),
            members=(),
            root=int(r.root),
            src=-1,
            dst=-1,
            in_split=None,
            out_split=None,
            nbytes=int(r.bytes),
        )  # fmt: skip
        for i, r in enumerate(rank0.executed().itertuples(index=False))
    ]
    for bucket in (4096, 65536, 1 << 22):
        want = strategies.plan_buckets(specs, bucket)
        got = plan_steps(op_table(program_dir), {"mode": "fused", "bucket_bytes": bucket})
        assert got == want


def _measured_doc(costs_us: dict[int, float], replay: dict) -> dict:
    points = [{"bytes": b, "monotone_us": v, "median_us": v, "n_cycles": 3, "cv_pct": 1.0}
              for b, v in sorted(costs_us.items())]  # fmt: skip
    curve = {
        "collective": "all_reduce", "dtype": "float32", "group_size": 2,
        "placement": "unspecified", "points": points, "segments": [],
        "error": {"stated_error_pct": 1.0}, "excluded_rungs": [],
        "ladders": [{"name": "x", "sha256": "0" * 64}], "notes": [],
    }  # fmt: skip
    return {
        "format": "tracecanary.backends/v1",
        "configs": {
            "c": {
                "overlap_efficiency": 0.0,
                "contention": 0.0,
                "measured": {
                    "method": "tracecanary.calibrate-backends/v1",
                    "evidence": "gloo",
                    "env": {},
                    "replay": replay,
                    "costs": [curve],
                },
            }  # fmt: skip
        },
    }


def _table(starts: list[int], skews: list[int], nbytes: int = 1000):
    import pandas as pd

    n = len(starts)
    return pd.DataFrame(
        {
            "occ": range(n),
            "op": ["all_reduce"] * n,
            "bytes": [nbytes] * n,
            "dtype": ["float32"] * n,
            "group_size": [2] * n,
            "pg_id": [0] * n,
            "root": [-1] * n,
            "weight": [1.0] * n,
            "start_ns": starts,
            "skew_ns": skews,
        }  # fmt: skip
    )


def test_timestamped_replay_adds_the_ranks_start_spread_and_waits_for_recorded_starts():
    cfg = backends_from_content(
        _measured_doc({1000: 10.0}, {"mode": "native", "op_barrier": False})
    )
    table = _table([0, 100_000], [2_000, 0])
    plain = simulate_twin(table, cfg.configs["c"])
    stamped = simulate_twin(table, cfg.configs["c"], timestamped=True)
    assert plain.latency_ns.tolist() == [10_000, 10_000] and plain.pass_ns == 20_000
    assert stamped.latency_ns.tolist() == [12_000, 10_000] and stamped.pass_ns == 110_000
    barrier = backends_from_content(
        _measured_doc({1000: 10.0}, {"mode": "native", "op_barrier": True})
    )
    aligned = simulate_twin(table, barrier.configs["c"], timestamped=True)
    assert aligned.latency_ns.tolist() == [10_000, 10_000]


def test_twin_refuses_a_modelled_configuration():
    from tracecanary.errors import InputError

    with pytest.raises(InputError, match="modelled, not measured"):
        simulate_twin(_table([0], [0]), load_backends(None).select()[0])


def test_calibrated_document_validates_against_the_schema(tmp_path):
    doc = _measured_doc(
        {1000: 10.0, 2000: 15.0}, {"mode": "fused", "op_barrier": False, "bucket_bytes": 64}
    )
    path = tmp_path / "b.json"
    path.write_text(json.dumps(doc))
    assert load_backends(path).configs["c"].measured
    doc["configs"]["c"]["measured"]["replay"]["mode"] = "teleport"
    path.write_text(json.dumps(doc))
    from tracecanary.errors import SchemaError

    with pytest.raises(SchemaError, match="mode"):
        load_backends(path)
