"""The benchmark driver end to end: ``python -m bench --quick --only bench_ingest
bench_sim`` prints one table and writes the results file (inputs and results go to a
temporary directory, never into the checkout)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_bench_quick_prints_the_table_and_writes_results(tmp_path):
    results = tmp_path / "results.json"
    own = REPO / "bench" / "results.json"
    own_before = own.stat().st_mtime_ns if own.exists() else None
    env = dict(os.environ)
    env["TRACECANARY_BENCH_DIR"] = str(tmp_path / "work")
    env["TRACECANARY_BENCH_RESULTS"] = str(results)
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", "bench_ingest", "bench_sim"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    header = lines[0].split()
    assert header[:4] == ["case", "figure", "unit", "comparator"]
    assert header[-2:] == ["peak", "MiB"]
    assert any(line.startswith("ingest 200,000-event JSONL") for line in lines)
    sim_rows = [line for line in lines if line.startswith("sim 200,000 occurrences, config ")]
    assert len(sim_rows) == 5  # one per default configuration
    assert "ERROR" not in proc.stdout

    doc = json.loads(results.read_text())
    assert doc["quick"] is True
    assert set(doc["machine"]) >= {"cpu", "cores", "memory", "python"}
    cases = [r["case"] for r in doc["rows"]]
    assert sum(c.startswith("ingest") for c in cases) == 1
    assert sum(c.startswith("sim ") for c in cases) == 6
    for r in doc["rows"]:
        assert "error" not in r
        assert isinstance(r["figure"], int | float) and r["figure"] > 0
        assert r["peak_rss_mb"] > 0
    ingest = next(r for r in doc["rows"] if r["case"].startswith("ingest"))
    assert ingest["unit"] == "events/s" and ingest["comparator_figure"] > 0
    assert ingest["ratio"] == pytest.approx(ingest["figure"] / ingest["comparator_figure"], 0.05)
    # the checkout's own results file is untouched by the test
    assert (own.stat().st_mtime_ns if own.exists() else None) == own_before


def test_the_campaign_bench_copies_the_tree_with_its_links(tmp_path):
    """The copy the campaign bench runs in keeps tracked links (``schemas`` points into
    the package): the copied Snakefile validates its config against it."""
    from bench.bench_campaign import copy_tree

    copy_tree(tmp_path)
    assert (tmp_path / "schemas").is_symlink()
    assert (tmp_path / "schemas" / "config.schema.json").is_file()
    assert (tmp_path / "Snakefile").is_file() and not (tmp_path / "bench").exists()
