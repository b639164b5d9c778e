"""TraceCanary sweep archives as alphabeta input (the contract the physical sweep writes):
attempt.json + rows.parquet with one row per (rung, cycle, iteration, rank)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from tracecanary.alphabeta.sweep import read_sweep
from tracecanary.canonical import sha256_file
from tracecanary.cli import main
from tracecanary.errors import ImportRefused
from tracecanary.parquet_io import write_parquet

RUNGS = [1 << k for k in range(12, 22, 2)]  # 4 KiB .. 1 MiB, five rungs
CYCLES, ITERS, WORLD = 3, 4, 2


def latency_ns(b: int, cycle: int, iteration: int, rank: int) -> int:
    # rank 1 is 700 ns slower; 20 us floor, 50 GB/s
    return 20_000 + b // 50 + 700 * rank + 30 * iteration + 11 * cycle


def write_archive(
    root: Path,
    *,
    status: str = "complete",
    incorrect: tuple | None = None,
    edit=None,
    record_digest: bool = False,
) -> Path:
    cols = {
        k: []
        for k in (
            "collective",
            "dtype",
            "world_size",
            "bytes",
            "cycle",
            "iteration",
            "rank",
            "latency_ns",
            "correct",
        )
    }
    for b in RUNGS:
        for c in range(CYCLES):
            for i in range(ITERS):
                for r in range(WORLD):
                    cols["collective"].append("all_reduce")
                    cols["dtype"].append("float32")
                    cols["world_size"].append(WORLD)
                    cols["bytes"].append(b)
                    cols["cycle"].append(c)
                    cols["iteration"].append(i)
                    cols["rank"].append(r)
                    cols["latency_ns"].append(latency_ns(b, c, i, r))
                    cols["correct"].append(incorrect != (b, c, i, r))
    if edit is not None:
        edit(cols)
    root.mkdir(parents=True)
    table = pa.table(
        {
            k: pa.array(
                v,
                pa.string()
                if k in ("collective", "dtype")
                else pa.bool_()
                if k == "correct"
                else pa.int64(),
            )
            for k, v in cols.items()
        }
    )
    write_parquet(table, root / "rows.parquet")
    attempt = {
        "format": "tracecanary.attempt/v1",
        "kind": "sweep",
        "status": status,
        "world_size": WORLD,
    }
    if record_digest:
        attempt["files"] = {"rows.parquet": "0" * 64}
    (root / "attempt.json").write_text(json.dumps(attempt))
    return root


def test_sweep_time_is_mean_over_iterations_of_max_over_ranks(tmp_path):
    ladder, meta = read_sweep(write_archive(tmp_path / "sw"), input_index=0, source="sw")
    assert meta["n_rows"] == len(RUNGS) * CYCLES * ITERS * WORLD
    assert len(ladder) == len(RUNGS) * CYCLES
    for row in ladder.itertuples():
        expected = np.mean([latency_ns(row.bytes, row.cycle, i, 1) for i in range(ITERS)]) / 1e3
        assert row.time_us == pytest.approx(expected)
    assert (ladder["wrong"] == 0).all()
    assert set(ladder["placement"]) == {"unspecified"}


def test_sweep_rung_with_an_incorrect_row_is_excluded(tmp_path):
    archive = write_archive(tmp_path / "sw", incorrect=(RUNGS[2], 1, 3, 0))
    out = tmp_path / "fit.json"
    assert main(["alphabeta", str(archive), "-o", str(out)]) == 0
    ladder = json.loads(out.read_text())["ladders"][0]
    rung = next(r for r in ladder["rungs"] if r["bytes"] == RUNGS[2])
    assert rung["excluded"] == "correctness_failed" and rung["wrong_total"] == 1
    assert ladder["fits"]["global"]["n_points"] == len(RUNGS) - 1
    assert ladder["n_cycles"] == CYCLES and ladder["world_size"] == WORLD
    # 50 GB/s by construction, every rung has three cycles
    assert ladder["fits"]["global"]["beta_gbps"] == pytest.approx(50.0, rel=1e-3)
    assert all(r["cv_pct"] is not None for r in ladder["rungs"])


def test_sweep_archive_not_complete_is_refused(tmp_path, capsys):
    archive = write_archive(tmp_path / "sw", status="failed")
    out = tmp_path / "fit.json"
    assert main(["alphabeta", str(archive), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "attempt.json" in err[0] and "field status" in err[0]
    assert not out.exists()


def test_sweep_with_mixed_world_sizes_in_one_ladder_is_refused(tmp_path):
    def widen(cols):
        cols["world_size"][9] = 4

    with pytest.raises(ImportRefused) as err:
        read_sweep(write_archive(tmp_path / "sw", edit=widen), input_index=0, source="sw")
    assert (err.value.record, err.value.field) == (10, "world_size")
    assert err.value.file.endswith("rows.parquet")


def test_sweep_with_a_missing_rank_row_is_refused(tmp_path):
    def drop(cols):
        for v in cols.values():
            del v[5]

    with pytest.raises(ImportRefused) as err:
        read_sweep(write_archive(tmp_path / "sw", edit=drop), input_index=0, source="sw")
    assert err.value.field == "rank" and "missing" in err.value.message


def test_sweep_with_a_non_positive_latency_is_refused(tmp_path):
    def zero(cols):
        cols["latency_ns"][3] = 0

    with pytest.raises(ImportRefused) as err:
        read_sweep(write_archive(tmp_path / "sw", edit=zero), input_index=0, source="sw")
    assert (err.value.record, err.value.field) == (4, "latency_ns")


def test_sweep_rows_differing_from_recorded_digest_are_refused(tmp_path):
    archive = write_archive(tmp_path / "sw", record_digest=True)
    with pytest.raises(ImportRefused) as err:
        read_sweep(archive, input_index=0, source="sw")
    assert err.value.field == "files" and sha256_file(archive / "rows.parquet") in err.value.message


@pytest.mark.slow
def test_real_gloo_sweep_archive_is_read_and_fitted(tmp_path):
    """A real ladder from `tracecanary sweep` (torch.distributed, gloo, 2 processes)."""
    from importlib.util import find_spec

    if find_spec("tracecanary.commands.sweep") is None:
        pytest.skip("the sweep command is not part of this checkout")
    archive = tmp_path / "ladder"
    args = ["sweep", "--collective", "all_gather", "--min-bytes", "1K", "--max-bytes", "64K"]
    args += ["--factor", "4", "--iters", "3", "--cycles", "2", "--warmup", "1"]
    args += ["--backend", "gloo", "--nproc", "2", "-o", str(archive)]
    assert main(args) == 0
    out = tmp_path / "fit.json"
    assert main(["alphabeta", str(archive), "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    (ladder,) = doc["ladders"]
    assert (ladder["collective"], ladder["world_size"], ladder["n_cycles"]) == ("all_gather", 2, 2)
    assert [r["bytes"] for r in ladder["rungs"]] == [1024, 4096, 16384, 65536]
    assert all(r["correctness_checked"] and r["excluded"] is None for r in ladder["rungs"])
    assert doc["inputs"][0]["kind"] == "sweep_archive"


@pytest.mark.slow
def test_real_sweep_with_corrupted_data_is_read_and_its_rungs_excluded(tmp_path):
    """A sweep whose ranks all finished but whose data check failed (corrupt-rank test aid)
    is evidence: alpha/beta reads it and excludes the failed rungs, never fits them."""
    archive = tmp_path / "ladder"
    args = ["sweep", "--collective", "all_reduce", "--min-bytes", "1K", "--max-bytes", "16K"]
    args += ["--factor", "4", "--iters", "2", "--cycles", "1", "--warmup", "1"]
    args += ["--backend", "gloo", "--nproc", "2", "--fault", "corrupt-rank=1", "-o", str(archive)]
    assert main(args) == 1
    attempt = json.loads((archive / "attempt.json").read_text())
    assert attempt["status"] == "failed" and attempt["correctness"]["incorrect_rows"] > 0
    out = tmp_path / "fit.json"
    assert main(["alphabeta", str(archive), "-o", str(out)]) == 0
    (ladder,) = json.loads(out.read_text())["ladders"]
    assert [r["excluded"] for r in ladder["rungs"]] == ["correctness_failed"] * 3
    assert ladder["fits"]["global"]["beta_gbps"] is None
