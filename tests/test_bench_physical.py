"""The physical-replay benchmark: how a pass is split into parts (from a rows table
written here), and ``python -m bench --quick --only bench_physical`` end to end (real
synth, search, export and gloo replays; inputs and results in a temporary directory)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_physical import pass_breakdown  # noqa: E402

MS = 1_000_000


def _archive(tmp_path: Path, ops: list[tuple[int, str, float, int, int]]) -> Path:
    """An attempt archive of two ranks: ``ops`` = (iteration, phase, weight, start_ms,
    end_ms) per occurrence (occurrence = position within its iteration); rank 1 starts
    1 ms later and ends at the same time."""
    cols: dict[str, list] = {
        k: [] for k in ("occ", "iteration", "phase", "weight", "start_ns", "end_ns", "rank")
    }
    per_iteration: dict[int, int] = {}
    for iteration, phase, weight, start, end in ops:
        occ = per_iteration.get(iteration, 0)
        per_iteration[iteration] = occ + 1
        for rank in (0, 1):
            cols["occ"].append(occ)
            cols["iteration"].append(iteration)
            cols["phase"].append(phase)
            cols["weight"].append(weight)
            cols["start_ns"].append((start + rank) * MS)
            cols["end_ns"].append(end * MS)
            cols["rank"].append(rank)
    table = pa.table(cols)
    table = table.append_column(
        "latency_ns",
        pa.array([e - s for s, e in zip(cols["start_ns"], cols["end_ns"], strict=True)]),
    )
    archive = tmp_path / "attempt"
    archive.mkdir()
    pq.write_table(table, archive / "rows.parquet")
    (archive / "attempt.json").write_text(
        json.dumps({"status": "complete", "wall_time_ns": 12 * 10**9})
    )
    return archive


def test_pass_breakdown_charges_every_gap_to_the_next_occurrence_and_adds_up(tmp_path):
    # iteration 0: prefill 0-10, (gap) decode weight 1 12-20, steady 21-25, weight 1 25-30
    # iteration 1: the same, every time doubled
    pass0 = [("prefill", 1.0, 0, 10), ("decode", 1.0, 12, 20), ("decode", 4.5, 21, 25),
             ("decode", 1.0, 25, 30)]  # fmt: skip
    ops = [(0, p, w, s, e) for p, w, s, e in pass0]
    ops += [(1, p, w, 2 * s + 100, 2 * e + 100) for p, w, s, e in pass0]
    b = pass_breakdown(_archive(tmp_path, ops))
    assert b["pass_ms"] == pytest.approx((30 + 60) / 2)  # median of the two passes
    # charges: prefill 10 | 20, decode weight 1: (20-10)+(30-25) = 15 | 30, steady 5 | 10
    assert b["prefill"] == {"ms": 15.0, "inside_ms": 15.0, "occurrences": 1}
    assert b["decode_whole"]["ms"] == pytest.approx(22.5)
    assert b["decode_whole"]["occurrences"] == 2
    assert b["decode_steady"]["ms"] == pytest.approx(7.5)
    assert b["decode_steady"]["occurrences"] == 1
    # inside = the slowest rank's latency (rank 0 starts first): 8+5 | 16+10 for weight 1
    assert b["decode_whole"]["inside_ms"] == pytest.approx((13 + 26) / 2)
    total = b["prefill"]["ms"] + b["decode_whole"]["ms"] + b["decode_steady"]["ms"]
    assert total == pytest.approx(b["pass_ms"])
    assert b["attempt_s"] == 12.0 and b["status"] == "complete"


def test_pass_breakdown_of_a_full_program_has_no_steady_part(tmp_path):
    ops = [(0, "prefill", 1.0, 0, 4), (0, "decode", 1.0, 4, 6), (0, "decode", 1.0, 7, 9)]
    b = pass_breakdown(_archive(tmp_path, ops))
    assert "decode_steady" not in b
    assert b["decode_whole"] == {"ms": 5.0, "inside_ms": 4.0, "occurrences": 2}
    assert b["pass_ms"] == pytest.approx(9.0)


@pytest.mark.slow
def test_bench_physical_quick_replays_canary_and_full_program_and_prints_the_ratio(tmp_path):
    results = tmp_path / "results.json"
    env = dict(os.environ)
    env["TRACECANARY_BENCH_DIR"] = str(tmp_path / "work")
    env["TRACECANARY_BENCH_RESULTS"] = str(results)
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", "bench_physical"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ERROR" not in proc.stdout, proc.stdout[-2000:]
    assert any(
        line.startswith("physical replay native: canary pass") for line in proc.stdout.splitlines()
    )
    (r,) = json.loads(results.read_text())["rows"]
    assert r["unit"] == "ms" and r["figure"] > 0 and r["comparator_figure"] > 0
    assert r["ratio"] == pytest.approx(r["figure"] / r["comparator_figure"], abs=0.002)
    assert r["target"] == "<= 0.1" and r["met"] in ("True (quick size)", "False (quick size)")
    assert "canary claim verified" in r["notes"]
    # the canary replayed executes fewer occurrences than the program it stands for
    executed, logical = (
        int(x.replace(",", "")) for x in r["case"].split("(")[1].split(" occ")[0].split(" of ")
    )
    assert 0 < executed < logical
    # both attempts completed, every row checked correct (replay-physical exit 0)
    attempts = sorted((tmp_path / "work").rglob("attempt.json"))
    assert len(attempts) == 2
    for a in attempts:
        doc = json.loads(a.read_text())
        assert doc["status"] == "complete" and doc["correctness"]["incorrect_rows"] == 0
        assert doc["physical_config"]["name"] == "native"
