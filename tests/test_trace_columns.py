"""A JSON trace read straight into columns (``trace_columns``) gives the program and the
refusals that ingest's normalized table gives, without importing pandas or pyarrow."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import small_trace, write_doc
from test_ingest_refusals import CASES, _mutate

from tracecanary.errors import InputError
from tracecanary.ingest import ingest_files
from tracecanary.load import ParquetColumns, load_program, program_from_series
from tracecanary.program import MEMBER_COLUMNS, OCCURRENCE_COLUMNS
from tracecanary.trace_columns import reads_as_columns


def _through_ingest(path, tmp_path):
    """The program of ``path`` the way a large trace is read: ingest, then matching of
    the normalized table."""
    out = tmp_path / "via-ingest.parquet"
    result = ingest_files([str(path)], out)
    return program_from_series(
        ParquetColumns(out, skip_empty_optional=True), json.loads(result.sidecar.read_text())
    )


def _assert_same_program(a, b):
    assert a.column_names == b.column_names
    for name in OCCURRENCE_COLUMNS:
        x, y = a.column(name), b.column(name)
        assert x.dtype == y.dtype or OCCURRENCE_COLUMNS[name] == "str", name
        assert x.tolist() == y.tolist(), name
    for name, dtype in MEMBER_COLUMNS.items():
        x, y = a.member_column(name), b.member_column(name)
        assert str(x.dtype) == str(y.dtype) == dtype, name
        np.testing.assert_array_equal(x, y, err_msg=name)
    for attribute in ("world_size", "skew_known", "skew_reason", "notes", "skew_uncertainty_ns"):
        assert getattr(a, attribute) == getattr(b, attribute), attribute


def _p2p_and_optional_fields() -> dict:
    """Four ranks: two groups, send/recv both ways, explicit roots, a stream on some
    events, arrival and latency measured, phases changing."""
    events = []
    groups = {"tp": [0, 1], "dp": [0, 2], "world": [0, 1, 2, 3]}
    for rank in range(4):
        seq, t = 0, 500 + 7 * rank
        for step in range(4):
            plan = [("all_reduce", "world", {})]
            if rank in groups["tp"]:
                plan.append(("all_gather", "tp", {}))
            if rank in groups["dp"]:
                plan.append(("reduce", "dp", {"root": 2}))
            if rank in (1, 3):
                plan.append(("send" if rank == 1 else "recv", "world", {"peer": 4 - rank}))
            for op, group, extra in plan:
                event = {
                    "rank": rank,
                    "seq": seq,
                    "op": op,
                    "bytes": 1024 * (step + 1),
                    "dtype": "bfloat16",
                    "group": group,
                    "phase": "prefill" if step < 2 else "décodage",
                    "ts_ns": t,
                    "arrival_ns": t + rank,
                    "latency_ns": 900 + step,
                    **extra,
                }
                if group == "tp":
                    event["stream"] = "s1"
                events.append(event)
                seq += 1
                t += 5_000
    return {
        "format": "tracecanary.trace/v1",
        "meta": {
            "world_size": 4,
            "source": "test_trace_columns",
            "clock_domains": [{"id": "h0", "ranks": [0, 1, 2, 3], "host": "h0"}],
            "notes": ["a note"],
        },
        "groups": [{"id": k, "ranks": v} for k, v in groups.items()],
        "events": events,
    }


def _own_clocks() -> dict:
    """Each rank on its own clock (no domains): skew unknown."""
    doc = small_trace()
    del doc["meta"]["clock_domains"]
    return doc


def _gaps_only() -> dict:
    """Every event's issue time from gaps alone (a rank's first gap from its clock's
    origin)."""
    doc = small_trace(with_gap=True)
    for event in doc["events"]:
        event["gap_ns"] = event.get("gap_ns", event["ts_ns"])
        del event["ts_ns"]
    return doc


def _explicit_instances() -> dict:
    doc = small_trace()
    counters: dict = {}
    for event in doc["events"]:
        key = (event["rank"], event["op"] in ("send", "recv"))
        event["instance"] = counters.setdefault(key, 0)
        counters[key] += 1
    return doc


TRACES = {
    "small": small_trace,
    "p2p_and_optional_fields": _p2p_and_optional_fields,
    "own_clocks": _own_clocks,
    "gaps_only": _gaps_only,
    "explicit_instances": _explicit_instances,
}


@pytest.mark.parametrize("name", sorted(TRACES))
def test_json_trace_read_as_columns_gives_the_program_ingest_gives(tmp_path, name):
    path = write_doc(TRACES[name](), tmp_path / "t.json")
    assert reads_as_columns(path)
    direct = load_program(path, executed=False)
    assert direct.holds_columns
    _assert_same_program(direct, _through_ingest(path, tmp_path))


def _set(index, field, value):
    def fn(doc):
        doc["events"][index][field] = value

    return fn


def _declare_solo(doc):
    doc["groups"].append({"id": "solo", "ranks": [0]})


REFUSALS = {
    **CASES,
    # small_trace: events 0-8 are rank 0's all_reduce, broadcast (root 0), send (peer 1)
    "root_outside_group": (
        lambda d: (_declare_solo(d), d["events"][7].update(group="solo", root=1)),
        7,
        "root",
    ),
    "peer_equals_rank": (_set(2, "peer", 0), 2, "peer"),
    "peer_outside_world": (_set(2, "peer", 5), 2, "peer"),
    "root_on_all_reduce": (_set(0, "root", 0), 0, "root"),
    "duplicate_seq": (_set(1, "seq", 0), 1, "seq"),
    "empty_group": (_set(3, "group", ""), 3, "group"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_json_trace_read_as_columns_refuses_what_ingest_refuses(tmp_path, case):
    mutate, record, field = REFUSALS[case]
    path = write_doc(_mutate(small_trace(), mutate), tmp_path / "bad.json")
    with pytest.raises(InputError) as direct:
        load_program(path, executed=False)
    with pytest.raises(InputError) as ingested:
        ingest_files([str(path)], tmp_path / "t.parquet")
    assert direct.value.one_line() == ingested.value.one_line()
    assert (direct.value.record, direct.value.field) == (record, field)


def test_json_trace_without_events_is_refused_as_ingest_refuses_it(tmp_path):
    doc = copy.deepcopy(small_trace())
    doc["events"] = []
    path = write_doc(doc, tmp_path / "empty.json")
    with pytest.raises(InputError) as direct:
        load_program(path)
    with pytest.raises(InputError) as ingested:
        ingest_files([str(path)], tmp_path / "t.parquet")
    assert direct.value.one_line() == ingested.value.one_line()
    assert "no collectives found" in direct.value.one_line()


def test_json_lines_and_large_documents_are_read_by_ingest(tmp_path, monkeypatch):
    lines = write_doc(small_trace(), tmp_path / "t.jsonl", jsonl=True)
    assert not reads_as_columns(lines)
    assert not load_program(lines).holds_columns
    import tracecanary.trace_columns as trace_columns

    document = write_doc(small_trace(), tmp_path / "t.json")
    monkeypatch.setattr(trace_columns, "DIRECT_READ_BYTES", document.stat().st_size - 1)
    assert not reads_as_columns(document)
    assert not load_program(document).holds_columns


def test_loading_a_json_trace_imports_neither_pandas_nor_pyarrow(tmp_path):
    path = write_doc(_p2p_and_optional_fields(), tmp_path / "t.json")
    probe = (
        "import sys\n"
        "from tracecanary.load import load_program\n"
        f"program = load_program({str(path)!r}, executed=False)\n"
        "assert program.holds_columns and program.n > 0\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', 'pyarrow')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
