"""load_program of a normalized Parquet reads only the columns matching uses and
converts them without holding two copies; the Program is the one the whole table
gives, and an unreadable table is still refused."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tracecanary.load import MATCHING_COLUMNS, load_program, read_matching_columns
from tracecanary.matching import build_program

REPO = Path(__file__).resolve().parents[1]
ADVERSARIAL = REPO / "resources" / "traces" / "adversarial.json"


def _whole_table_program(path: Path):
    """The program as built from every column of the table (the reference)."""
    side = json.loads(path.with_suffix(".meta.json").read_text())
    return build_program(
        pq.read_table(path).to_pandas(),
        groups={k: list(v) for k, v in side["groups"].items()},
        world_size=int(side["meta"]["world_size"]),
        clocks={int(k): v for k, v in side["clocks"].items()},
        notes=tuple(side["meta"].get("notes", [])),
    )


def _assert_same_program(a, b):
    pd.testing.assert_frame_equal(a.occurrences, b.occurrences)
    pd.testing.assert_frame_equal(a.members, b.members)
    assert (a.world_size, a.skew_known, a.skew_reason, a.notes) == (
        b.world_size,
        b.skew_known,
        b.skew_reason,
        b.notes,
    )


@pytest.mark.parametrize("source", ["adversarial", "small"])
def test_program_from_the_matching_columns_equals_the_whole_table_program(
    tmp_path, run_cli, trace_doc, source
):
    if source == "adversarial":
        trace = ADVERSARIAL
    else:
        trace = tmp_path / "small.json"
        trace.write_text(json.dumps(trace_doc))
    table = tmp_path / "t.parquet"
    code, _, err = run_cli("ingest", str(trace), "-o", str(table))
    assert code == 0, err
    read = read_matching_columns(table)
    all_names = pq.read_schema(table).names
    assert read.column_names == [c for c in all_names if c in MATCHING_COLUMNS]
    assert set(all_names) - set(read.column_names)  # something is really left unread
    _assert_same_program(load_program(table), _whole_table_program(table))


def test_unreadable_table_is_refused_in_one_line_and_nothing_is_written(tmp_path, run_cli):
    table = tmp_path / "t.parquet"
    code, _, err = run_cli("ingest", str(ADVERSARIAL), "-o", str(table))
    assert code == 0, err
    data = table.read_bytes()
    table.write_bytes(data[: len(data) // 2])  # truncated: no footer
    out = tmp_path / "c.json"
    code, _, err = run_cli("compile", str(table), "--lossless", "-o", str(out))
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "unreadable Parquet" in err and str(table) in err
    assert not out.exists()
