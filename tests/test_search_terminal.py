"""What `tracecanary search` prints on the terminal: why the canary is not smaller (the
blocking checks of the rejected candidates, as the search log records them) and a size
that matches the file written, with the log's size and why it differs."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import REPO

ADVERSARIAL = REPO / "resources" / "traces" / "adversarial.json"


def _search(run_cli, tmp_path):
    canary, log = tmp_path / "canary.json", tmp_path / "search.json"
    code, out, err = run_cli(
        "search", ADVERSARIAL, "--budgets", "0,8", "-o", canary, "--log", log, "--quiet"
    )
    assert code == 0, err
    return canary, json.loads(log.read_text()), err


def test_search_prints_the_blocking_checks_of_rejected_candidates_as_the_log_records_them(
    run_cli, tmp_path
):
    _, log, err = _search(run_cli, tmp_path)
    lines = err.splitlines()
    header = next(i for i, ln in enumerate(lines) if ln.startswith("not smaller:"))
    columns = lines[header + 1].split()
    assert columns == ["candidate", "check", "config", "source", "canary", "allowed"]
    rows = [ln.split() for ln in lines[header + 2 :] if ln.startswith("  ")]  # until "chosen"
    assert rows, err
    rejected = [c for c in log["candidates"] if c.get("blocking")]
    # one row per rejected candidate (its worst blocker), nearest miss first, at most 5
    worst = sorted(rejected, key=lambda c: c["blocking"][0]["excess"])[:5]
    assert len(rows) == len(worst)
    for row, candidate in zip(rows, worst, strict=True):
        block = candidate["blocking"][0]
        settings = ",".join(f"{k}={v}" for k, v in candidate["settings"].items())
        assert row[0] == f"{candidate['stage']}:{settings}"
        assert row[1:3] == [block["check"], block["config"]]
        assert [float(x) for x in row[3:6]] == [
            float(f"{block[k]:.4g}") for k in ("source", "canary", "allowed")
        ]


def test_search_prints_the_written_size_and_says_why_the_log_size_differs(run_cli, tmp_path):
    canary, log, err = _search(run_cli, tmp_path)
    chosen = next(ln for ln in err.splitlines() if ln.startswith("chosen: "))
    printed = int(re.match(r"chosen: ([\d,]+) B", chosen).group(1).replace(",", ""))
    assert printed == Path(canary).stat().st_size
    assert f"search log's {log['chosen']['bytes']:,} B" in chosen
    assert "verification receipt" in chosen
