"""`tracecanary export-perfetto`: a source, its canary and a physical attempt as Chrome
Trace Event JSON, checked here by a strict structural reading of the Trace Event Format
(the JSON Object Format: phases, ts/dur in microseconds, integer pid/tid, every process and
thread named by metadata events, no partially overlapping slices on a track), written
independently of the exporter and of its schema. (The `perfetto` trace processor needs a
binary it downloads at run time, which this machine cannot reach.) A zoo source's export
with a real attempt is checked the same way in tests/test_physical_zoo_compare.py."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pytest
from conftest import REPO

from tracecanary.formats.schemas import validate
from tracecanary.load import load_program
from tracecanary.parquet_io import write_parquet

ADVERSARIAL = REPO / "resources" / "traces" / "adversarial.json"
PHASES = {"X", "i", "C", "M"}


def check_trace_event_format(doc: dict) -> dict:
    """Raise AssertionError where ``doc`` is not a well-formed Trace Event JSON object as
    Perfetto and chrome://tracing read it; return {pid: process name} and
    {(pid, tid): thread name}."""
    assert isinstance(doc["traceEvents"], list)
    # the JSON Object Format's keys; any other top-level key is metadata readers skip
    assert not set(doc) & {"systemTraceEvents", "stackFrames", "samples"}
    assert doc["displayTimeUnit"] in ("ns", "ms")
    process, thread = {}, {}
    slices = defaultdict(list)
    for e in doc["traceEvents"]:
        assert e["ph"] in PHASES, e
        assert isinstance(e["pid"], int) and not isinstance(e["pid"], bool), e
        assert isinstance(e["name"], str) and e["name"], e
        if e["ph"] == "M":
            assert isinstance(e["tid"], int), e
            if e["name"] == "process_name":
                process[e["pid"]] = e["args"]["name"]
            elif e["name"] == "thread_name":
                thread[(e["pid"], e["tid"])] = e["args"]["name"]
            else:
                assert e["name"] in ("process_sort_index", "thread_sort_index"), e
                assert isinstance(e["args"]["sort_index"], int), e
            continue
        assert isinstance(e["ts"], int | float) and e["ts"] >= 0, e
        if e["ph"] == "C":
            assert all(isinstance(v, int | float) for v in e["args"].values()), e
            continue
        assert isinstance(e["tid"], int), e
        if e["ph"] == "X":
            assert isinstance(e["dur"], int | float) and e["dur"] >= 0, e
            slices[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
        else:
            assert e["s"] in ("t", "p", "g"), e
    for e in doc["traceEvents"]:
        assert e["pid"] in process, f"pid {e['pid']} has no process_name"
        if e["ph"] in ("X", "i"):
            assert (e["pid"], e["tid"]) in thread, f"track {e['pid']}/{e['tid']} unnamed"
    for track, spans in slices.items():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            assert end <= start + 1e-6, f"slices overlap partially on track {track}"
    return {"process": process, "thread": thread}


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    from tracecanary.cli import main

    root = tmp_path_factory.mktemp("searched")
    canary = root / "canary.json"
    argv = ["search", str(ADVERSARIAL), "--budgets", "0", "-o", str(canary)]
    assert main([*argv, "--log", str(root / "search.json"), "--quiet"]) == 0
    return canary


def _rows_archive(root, world_size: int):
    """An attempt archive whose rows are laid out as replay-physical writes them: two
    passes of two all_reduces per rank, on the world group and on pg 0."""
    rows = defaultdict(list)
    for it in range(2):
        for rank in range(world_size):
            for entry, (pg, start) in enumerate(((-1, 0), (0, 5_000))):
                t0 = it * 100_000 + start + 100 * rank
                values = dict(
                    occ=entry, marker=f"canary:{entry}", op="all_reduce", bytes=4096,
                    dtype="float32", weight=2.0, phase="", iteration=it, rank=rank,
                    host="h", start_ns=t0, end_ns=t0 + 3_000, latency_ns=3_000, correct=True,
                    fused_bucket=-1, entry=entry, pg_id=pg,
                )  # fmt: skip
                for k, v in values.items():
                    rows[k].append(v)
    root.mkdir(parents=True)
    write_parquet(pa.table(dict(rows)), root / "rows.parquet")
    (root / "attempt.json").write_text(
        json.dumps({"status": "complete", "backend": "gloo", "physical_config": {"name": "native"}})
    )
    return root


def test_export_perfetto_gives_one_track_per_rank_and_group_in_the_trace_event_format(
    run_cli, tmp_path, searched
):
    out = tmp_path / "trace.json"
    code, _, err = run_cli("export-perfetto", ADVERSARIAL, searched, "-o", out)
    assert code == 0, err
    doc = json.loads(out.read_text())
    names = check_trace_event_format(doc)
    validate(doc, "chrome-trace", file=str(out))
    program = load_program(str(ADVERSARIAL))
    groups = program.occurrences["group"].astype(str).to_numpy()
    occ = program.members["occ"].to_numpy()
    rank = program.members["rank"].to_numpy()
    for view, base in (("source", 1_000_000), ("canary", 2_000_000)):
        for r in range(program.world_size):
            assert names["process"][base + r] == f"{view} · rank {r}"
            tracks = {t for (pid, _), t in names["thread"].items() if pid == base + r}
            assert {f"group {g}" for g in set(groups[occ[rank == r]])} <= tracks
    source = [e for e in doc["traceEvents"] if e.get("cat") == "source"]
    assert len(source) == len(occ)  # one event per member: every rank's every collective
    arrival = program.issue_ns()[occ] + program.members["skew_ns"].to_numpy()
    first = min(source, key=lambda e: (e["ts"], e["pid"]))
    assert first["ts"] == 0.0 and first["args"]["occ"] == int(occ[np.argmin(arrival)])
    tails = [e for e in doc["traceEvents"] if e["name"] == "tail window"]
    tail = program.occurrences["tail"].to_numpy(dtype=np.int8)
    assert len(tails) == int((np.diff(np.concatenate([[0], tail])) == 1).sum()) > 0
    assert doc["format"] == "tracecanary.chrome-trace/v1"


def test_canary_weights_on_each_rank_stand_for_that_ranks_source_collectives(
    run_cli, tmp_path, searched
):
    out = tmp_path / "trace.json"
    assert run_cli("export-perfetto", ADVERSARIAL, searched, "-o", out)[0] == 0
    doc = json.loads(out.read_text())
    weight, count = defaultdict(float), defaultdict(int)
    for e in doc["traceEvents"]:
        if e.get("cat") == "canary":
            weight[e["pid"] - 2_000_000] += e["args"]["weight"]
        if e.get("cat") == "source":
            count[e["pid"] - 1_000_000] += 1
    assert weight and {r: pytest.approx(w) for r, w in weight.items()} == dict(count)


def test_export_perfetto_adds_a_physical_attempt_per_rank_and_process_group(
    run_cli, tmp_path, searched
):
    attempt = _rows_archive(tmp_path / "attempt", 4)
    out = tmp_path / "trace.json"
    code, _, err = run_cli(
        "export-perfetto", ADVERSARIAL, searched, "--attempt", attempt, "-o", out
    )
    assert code == 0, err
    doc = json.loads(out.read_text())
    names = check_trace_event_format(doc)
    physical = [e for e in doc["traceEvents"] if e.get("cat") == "physical"]
    assert len(physical) == 16 and all(e["ph"] == "X" and e["dur"] == 3.0 for e in physical)
    for r in range(4):
        assert names["process"][3_000_000 + r] == f"physical · rank {r}"
        tracks = {t for (pid, _), t in names["thread"].items() if pid == 3_000_000 + r}
        assert tracks == {"world group", "pg 0"}
    assert doc["otherData"]["attempt"]["physical_config"] == "native"


def test_export_perfetto_is_byte_identical_for_the_same_inputs(run_cli, tmp_path, searched):
    one, two = tmp_path / "1.json", tmp_path / "2.json"
    assert run_cli("export-perfetto", ADVERSARIAL, searched, "-o", one)[0] == 0
    assert run_cli("export-perfetto", ADVERSARIAL, searched, "-o", two)[0] == 0
    assert one.read_bytes() == two.read_bytes()


def test_export_perfetto_refuses_a_canary_of_another_source_in_one_line(
    run_cli, tmp_path, searched, trace_doc
):
    other = tmp_path / "other.json"
    other.write_text(json.dumps(trace_doc))
    out = tmp_path / "trace.json"
    code, _, err = run_cli("export-perfetto", other, searched, "-o", out)
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert f"{searched}: field structure.occurrences: canary has 100" in err
    assert not out.exists()
