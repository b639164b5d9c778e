"""Round trip through ``import-param-results`` with fixtures in PARAM's output layout.

The row layout is the real rank-0 entry recorded in ../shared/param-basic-format.md §9
(PARAM commsTraceReplay at 1e115ff, gloo on CPU): ``commsArgs.toDict()`` plus
``dtype_size``, ``marker_stack`` (markers joined by spaces), ``quant_us``, ``dequant_us``,
``latency_us`` and ``global_latency_us``; one row per replayed op per recorded pass.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pyarrow.parquet as pq
import pytest

from tracecanary.cli import main
from tracecanary.formats.schemas import load_schema
from tracecanary.param.program import load_program_dir
from tracecanary.physical.samples import sample_program, write_program

# §9's real entry, verbatim except its marker: "canary:ar0" is not a canary:<occ> join key
FACTS_ENTRY = {
    "comms": "all_reduce", "in_msg_size": 1024, "out_msg_size": 1024, "dtype": "float",
    "world_size": 2, "dtype_size": 4, "marker_stack": "canary:ar0", "quant_us": 0.0,
    "dequant_us": 0.0, "latency_us": 646.07, "global_latency_us": 941.78,
}  # fmt: skip


def param_rows(program: Path, rank: int, passes: int) -> list[dict]:
    """What PARAM writes for ``rank`` after replaying ``program`` ``passes`` times."""
    entries = json.loads((program / f"{rank}.json").read_text())
    executed = load_program_dir(program)[rank].executed()
    rows = []
    for p in range(passes):
        for k, entry_index in enumerate(executed["entry"]):
            e = entries[entry_index]
            row = {key: e[key] for key in ("comms", "world_size", "pg_id") if key in e}
            if e["comms"] != "barrier":
                row.update(in_msg_size=e["in_msg_size"], out_msg_size=e["out_msg_size"])
                row.update(dtype=e["dtype"], dtype_size=4)
            for key in ("root", "in_split", "out_split", "startTime_ns"):
                if key in e:
                    row[key] = e[key]
            row.update(
                marker_stack=" ".join(e["markers"]),
                quant_us=0.0,
                dequant_us=0.0,
                latency_us=100.0 + 10 * k + p + 0.25 * rank,
                global_latency_us=150.0 + 10 * k + p,
            )
            rows.append(row)
    return rows


@pytest.fixture
def exported(tmp_path) -> tuple[Path, Path]:
    program = write_program(tmp_path / "prog", sample_program(2, small_ops=2))
    results = tmp_path / "param-out"
    results.mkdir()
    for rank in (0, 1):
        rows = param_rows(program, rank, passes=2)
        (results / f"replayedCommsPerf.rank{rank}.json").write_text(json.dumps(rows))
    return program, results


def _validate(archive: Path) -> dict:
    attempt = json.loads((archive / "attempt.json").read_text())
    jsonschema.validate(attempt, load_schema("attempt"))
    return attempt


def test_facts_entry_imports_with_a_canary_marker(tmp_path, capsys):
    results = tmp_path / "res"
    results.mkdir()
    entry = {**FACTS_ENTRY, "marker_stack": "canary:0"}
    (results / "replayedCommsPerf.rank0.json").write_text(json.dumps([entry, entry]))
    out = tmp_path / "attempt"
    assert main(["import-param-results", str(results), "-o", str(out)]) == 0
    attempt = _validate(out)
    assert (attempt["kind"], attempt["source"], attempt["status"]) == (
        "replay",
        "param",
        "complete",
    )
    rows = pq.read_table(out / "rows.parquet").to_pandas()
    assert list(rows["iteration"]) == [0, 1]
    assert list(rows["latency_ns"]) == [646070, 646070]
    assert list(rows["global_latency_ns"]) == [941780, 941780]
    assert list(rows["bytes"]) == [4096, 4096] and set(rows["dtype"]) == {"float32"}
    # what PARAM does not record stays unknown
    assert rows["start_ns"].isna().all() and rows["correct"].isna().all()
    assert attempt["files"]["rows.parquet"] and attempt["wall_time_ns"] is None


def test_round_trip_joins_every_row_to_its_program_entry(exported, tmp_path, capsys):
    program, results = exported
    out = tmp_path / "attempt"
    argv = ["import-param-results", str(results), "--program", str(program), "-o", str(out)]
    assert main([*argv, "--backend", "gloo"]) == 0
    attempt = _validate(out)
    assert attempt["iters"] == 2 and attempt["world_size"] == 2 and attempt["backend"] == "gloo"
    assert attempt["input"]["path"] == str(program)
    rows = pq.read_table(out / "rows.parquet").to_pandas()
    programs = load_program_dir(program)
    for rank in (0, 1):
        executed = programs[rank].executed().set_index("occ")
        mine = rows[rows["rank"] == rank]
        assert len(mine) == 2 * len(executed)
        for row in mine.itertuples():
            ref = executed.loc[row.occ]
            assert (row.entry, row.pg_id, row.op) == (ref["entry"], ref["pg_id"], ref["op"])
            assert (row.weight, row.phase) == (ref["weight"], ref["phase"])
    decode = rows[rows["phase"] == "decode"]
    assert set(decode["weight"]) == {1.0, 4.0}
    assert sorted(set(rows["iteration"])) == [0, 1]


@pytest.mark.parametrize(
    "marker, needle",
    [("Unamed/Unknown", "canary:<occ>"), ("canary:ar0", "canary:<occ>"), ("", "no markers")],
)
def test_row_without_a_canary_marker_is_refused(exported, tmp_path, capsys, marker, needle):
    _, results = exported
    path = results / "replayedCommsPerf.rank1.json"
    rows = json.loads(path.read_text())
    rows[3]["marker_stack"] = marker
    path.write_text(json.dumps(rows))
    out = tmp_path / "attempt"
    assert main(["import-param-results", str(results), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "rank1.json: record 3: field marker_stack" in err and needle in err
    assert not out.exists()


def test_marker_unknown_to_the_program_is_refused(exported, tmp_path, capsys):
    program, results = exported
    path = results / "replayedCommsPerf.rank0.json"
    rows = json.loads(path.read_text())
    rows[0]["marker_stack"] = "canary:999"
    path.write_text(json.dumps(rows))
    out = tmp_path / "attempt"
    code = main(["import-param-results", str(results), "--program", str(program), "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "record 0: field marker_stack" in err and "canary:999" in err
    assert not out.exists()


def test_row_whose_op_differs_from_the_program_is_refused(exported, tmp_path, capsys):
    program, results = exported
    path = results / "replayedCommsPerf.rank0.json"
    rows = json.loads(path.read_text())
    rows[0]["comms"] = "broadcast"
    path.write_text(json.dumps(rows))
    code = main(["import-param-results", str(results), "--program", str(program), "-o", "x"])
    err = capsys.readouterr().err
    assert code == 2 and "record 0: field comms" in err


def test_ops_param_skipped_make_the_import_failed_with_partial_rows(exported, tmp_path, capsys):
    program, results = exported
    path = results / "replayedCommsPerf.rank0.json"
    rows = json.loads(path.read_text())
    path.write_text(json.dumps([r for r in rows if r["comms"] != "all_to_allv"]))
    out = tmp_path / "attempt"
    code = main(["import-param-results", str(results), "--program", str(program), "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and "incomplete" in err
    attempt = _validate(out)
    assert attempt["status"] == "failed" and "rank 0" in attempt["reason"]
    assert attempt["rows_file"] == "partial/rows.parquet"
    assert (out / "partial" / "rows.parquet").is_file() and not (out / "rows.parquet").exists()


def test_non_finite_latency_is_refused(exported, tmp_path, capsys):
    _, results = exported
    path = results / "replayedCommsPerf.rank0.json"
    path.write_text(path.read_text().replace('"latency_us": 100.0', '"latency_us": NaN', 1))
    code = main(["import-param-results", str(results), "-o", str(tmp_path / "a")])
    err = capsys.readouterr().err
    assert code == 2 and "rank0.json" in err and len(err.strip().splitlines()) == 1
