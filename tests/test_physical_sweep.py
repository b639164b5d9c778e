"""nccl-tests-style ladders: rung arithmetic, the table, and one real 2-rank gloo ladder."""

from __future__ import annotations

import json

import jsonschema
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tracecanary.alphabeta.ladder import busbw_factor as bus_factor
from tracecanary.cli import main
from tracecanary.errors import InputError
from tracecanary.formats.schemas import load_schema
from tracecanary.physical.sweep import (
    format_table,
    ladder_counts,
    parse_size,
    table_from_rows,
)

SWEEP_COLUMNS = [
    ("collective", pa.string()),
    ("dtype", pa.string()),
    ("world_size", pa.int64()),
    ("bytes", pa.int64()),
    ("cycle", pa.int64()),
    ("iteration", pa.int64()),
    ("rank", pa.int64()),
    ("latency_ns", pa.int64()),
    ("correct", pa.bool_()),
]


def test_sizes_use_binary_units_like_nccl_tests():
    assert [parse_size(s, "f") for s in ("1", "4096", "64K", "64M", "1G", "8MiB")] == [
        1, 4096, 64 << 10, 64 << 20, 1 << 30, 8 << 20,
    ]  # fmt: skip
    with pytest.raises(InputError):
        parse_size("lots", "--max-bytes")


def test_ladder_rounds_down_to_whole_elements_and_skips_repeated_rungs():
    counts = ladder_counts("all_reduce", 1, 64 << 20, 2, 4, 4)
    assert counts[0] == 1  # 1, 2 and 4 bytes all become one float32 element
    assert [c * 4 for c in counts] == [4 << k for k in range(25)]
    # gathered/scattered/exchanged buffers hold a whole element per rank at least
    assert ladder_counts("all_gather", 1, 64, 2, 4, 4) == [4, 8, 16]
    assert ladder_counts("all_to_all", 100, 100, 2, 2, 3) == [48]


def test_bus_bandwidth_factors_are_nccl_tests_ones():
    assert bus_factor("all_reduce", 4) == pytest.approx(1.5)
    assert bus_factor("all_gather", 8) == pytest.approx(7 / 8)
    assert bus_factor("broadcast", 8) == bus_factor("sendrecv", 8) == 1.0


def _rows(latency):
    data = []
    for b in (1024, 4096):
        for cycle in (0, 1):
            for it in range(3):
                for rank in (0, 1):
                    data.append(("all_gather", "float32", 2, b, cycle, it, rank,
                                 latency(b, cycle, it, rank), not (b == 4096 and rank == 1 and it == 0)))  # fmt: skip
    return pd.DataFrame(data, columns=[c for c, _ in SWEEP_COLUMNS])


def test_table_time_is_mean_over_ranks_of_mean_over_iterations():
    rows = _rows(lambda b, c, i, r: 1000 * (b // 1024) + 100 * i + 50 * r + 10 * c)
    table = table_from_rows(rows)
    first = table.iloc[0]  # cycle 0, 1024 B: iterations 0..2 -> 100, ranks +0/+50
    assert first["time_us"] == pytest.approx((1000 + 100 + 25) / 1e3)
    assert first["algbw_gbps"] == pytest.approx(1024 / first["time_us"] / 1e3)
    assert first["busbw_gbps"] == pytest.approx(first["algbw_gbps"] / 2)
    assert first["count"] == 1024 // 4 // 2  # per-rank count, as nccl-tests prints it
    assert list(table["wrong"]) == [0, 1, 0, 1]
    text = format_table(rows, _attempt(cycles=2))
    data = [line.split() for line in text.splitlines() if not line.startswith("#")]
    assert [len(t) for t in data] == [9] * 4  # size count type redop root time algbw busbw #wrong
    assert data[1][:5] == ["4096", "512", "float", "none", "-1"] and data[1][8] == "1"
    assert "# Out of bounds values : 2 FAILED" in text


def _attempt(cycles):
    return {
        "world_size": 2, "backend": "gloo", "warmup": 1, "iters": 3,
        "sweep": {"collective": "all_gather", "min_bytes": 1024, "max_bytes": 4096,
                  "factor": 4.0, "cycles": cycles},
    }  # fmt: skip


def test_sweep_refuses_bad_options_before_launching(tmp_path, capsys):
    base = ["sweep", "--nproc", "2", "-o", str(tmp_path / "l")]
    for extra, field in [
        (["--collective", "all_reduce", "--dtype", "complex"], "--dtype"),
        (["--collective", "all_reduce", "--min-bytes", "8", "--max-bytes", "4"], "--min-bytes"),
        (["--collective", "all_reduce", "--factor", "1"], "--factor"),
        (["--collective", "all_reduce", "--physical-config", "fused64k"], "--physical-config"),
    ]:
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err
        assert f"field {field}" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "l").exists() and not list(tmp_path.iterdir())


@pytest.mark.slow
def test_real_ladder_writes_the_rows_contract_and_the_table(tmp_path, capsys):
    out = tmp_path / "ladder"
    argv = ["sweep", "--collective", "all_reduce", "--min-bytes", "1", "--max-bytes", "4K"]
    argv += ["--factor", "4", "--warmup", "1", "--iters", "3", "--cycles", "2"]
    argv += ["--backend", "gloo", "--nproc", "2", "--print-table", "-o", str(out)]
    assert main(argv) == 0
    printed, err = capsys.readouterr()
    attempt = json.loads((out / "attempt.json").read_text())
    jsonschema.validate(attempt, load_schema("attempt"))
    jsonschema.validate(
        json.loads((out / "environment.json").read_text()), load_schema("environment")
    )
    assert (attempt["kind"], attempt["status"], attempt["world_size"]) == ("sweep", "complete", 2)
    rungs = [4, 16, 64, 256, 1024, 4096]
    assert attempt["sweep"]["rungs_bytes"] == rungs
    table = pq.read_table(out / "rows.parquet")
    assert [(f.name, f.type) for f in table.schema] == SWEEP_COLUMNS  # exactly the contract
    rows = table.to_pandas()
    assert len(rows) == len(rungs) * 2 * 3 * 2  # rungs x cycles x iterations x ranks
    assert rows["correct"].all() and (rows["latency_ns"] > 0).all()
    assert sorted(set(rows["bytes"])) == rungs and set(rows["cycle"]) == {0, 1}
    assert list(rows.columns) == [c for c, _ in SWEEP_COLUMNS]
    assert rows.equals(
        rows.sort_values(["bytes", "cycle", "iteration", "rank"]).reset_index(drop=True)
    )
    lines = [line.split() for line in printed.splitlines() if not line.startswith("#")]
    assert len(lines) == len(rungs) * 2 and all(len(t) == 9 for t in lines)
    expected = table_from_rows(rows)
    assert [float(t[5]) for t in lines] == pytest.approx(list(expected["time_us"]), rel=0.01)
    assert "[tracecanary] sweep:" in err
