"""load_program of a normalized Parquet reads only the columns matching uses and
converts them without holding two copies; the Program is the one the whole table
gives, and an unreadable table is still refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from tracecanary.errors import InputError, MergeError
from tracecanary.load import MATCHING_COLUMNS, TEXT_MATCHING_COLUMNS, ParquetColumns, load_program
from tracecanary.matching import build_program
from tracecanary.parquet_io import exact_nullable_int
from tracecanary.program import MEMBER_COLUMNS, make_program

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
    read = list(ParquetColumns(table))
    all_names = pq.read_schema(table).names
    assert read == [c for c in all_names if c in MATCHING_COLUMNS]
    assert set(all_names) - set(read)  # something is really left unread
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


def _ingested(tmp_path, run_cli) -> Path:
    table = tmp_path / "t.parquet"
    code, _, err = run_cli("ingest", str(ADVERSARIAL), "-o", str(table))
    assert code == 0, err
    return table


def test_columns_are_read_from_the_file_only_when_matching_asks_for_them(tmp_path, run_cli):
    table = _ingested(tmp_path, run_cli)
    lazy = ParquetColumns(table)
    assert list(lazy) == [c for c in pq.read_schema(table).names if c in MATCHING_COLUMNS]
    assert "latency_ns" in lazy and lazy._read == {}  # membership reads nothing
    del lazy["latency_ns"]
    assert "latency_ns" not in lazy and lazy._read == {}  # dropped unread
    rank = lazy["rank"]
    assert list(lazy._read) == ["rank"]
    assert lazy.pop("rank") is rank and "rank" not in lazy and lazy._read == {}
    with pytest.raises(KeyError):
        lazy["no_such_column"]


def test_each_column_read_alone_is_the_whole_table_conversion_with_ranks_as_members_hold(
    tmp_path, run_cli
):
    table = _ingested(tmp_path, run_cli)
    lazy = ParquetColumns(table)
    names = list(lazy)
    text = [c for c in names if c in TEXT_MATCHING_COLUMNS]
    arrow = pq.read_table(table, columns=names, read_dictionary=text)
    whole = arrow.to_pandas()
    if "arrival_ns" in whole:  # as the loader converts it: exact, not float64
        whole["arrival_ns"] = exact_nullable_int(arrow, "arrival_ns")
    alone = {name: lazy[name] for name in names}
    assert list(alone) == list(whole.columns)
    for name in whole.columns:
        if name == "rank":
            assert str(alone[name].dtype) == MEMBER_COLUMNS["rank"]
            assert np.array_equal(alone[name].to_numpy(), whole[name].to_numpy())
        else:
            pd.testing.assert_series_equal(alone[name], whole[name])


def test_a_loaded_program_holds_member_occurrences_and_ranks_as_int32(tmp_path, run_cli):
    program = load_program(_ingested(tmp_path, run_cli))
    assert {c: str(t) for c, t in program.members.dtypes.items()} == MEMBER_COLUMNS
    assert MEMBER_COLUMNS["occ"] == MEMBER_COLUMNS["rank"] == "int32"


def test_a_rank_past_the_members_int32_is_refused_naming_the_field_not_wrapped():
    with pytest.raises(InputError) as err:
        make_program(
            {"op": ["all_reduce"], "bytes": [8], "dtype": ["float32"], "group": ["g"],
             "group_size": [1], "gap_ns": [0]},
            {"occ": [0], "rank": [2**31], "skew_ns": [0]},
            world_size=2**31 + 1,
            skew_known=False,
        )  # fmt: skip
    assert err.value.exit_code == 2 and err.value.field == "rank" and "2147483648" in str(err.value)
    frame = pd.DataFrame(
        {"rank": [2**31], "op": ["all_reduce"], "bytes": [8], "dtype": ["float32"],
         "group": ["g"], "issue_ns": [0], "latency_ns": [None], "overlap_ns": [None]}
    )  # fmt: skip
    with pytest.raises(MergeError) as err:
        build_program(frame, groups={"g": [2**31]}, world_size=2**31 + 1, clocks={})
    assert err.value.field == "rank" and "2147483648" in str(err.value)
