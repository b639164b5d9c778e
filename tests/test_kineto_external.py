"""Kineto import of the real GPU/NCCL traces in ../shared/kineto_samples/external
(HolisticTraceAnalysis and TraceLens test data; see that folder's README)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tracecanary.formats.schemas import validate
from tracecanary.kineto import import_kineto_file

EXTERNAL = Path(__file__).resolve().parents[2] / "shared" / "kineto_samples" / "external"
NCCL_DATA = EXTERNAL / "hta__nccl_parser_config__nccl_data.json.gz"
SAMPLED_0 = EXTERNAL / "hta__trace_filter__sampled_rank-0.json.gz"
SAMPLED_1 = EXTERNAL / "hta__trace_filter__sampled_rank-1.json.gz"
B200 = EXTERNAL / "tracelens__b200__eager_trace.json.gz"

pytestmark = pytest.mark.skipif(
    not EXTERNAL.is_dir(), reason="../shared/kineto_samples/external is absent (shared data)"
)


def by_kind(doc: dict) -> Counter:
    return Counter(e["op"] for e in doc["events"])


def dtypes(doc: dict, op: str) -> Counter:
    return Counter(e["dtype"] for e in doc["events"] if e["op"] == op)


def assert_observational_notes(doc: dict, rank: int) -> None:
    notes = " ".join(doc["meta"]["notes"])
    assert f"trace of rank {rank}: observational and single-rank" in notes
    assert "No cross-rank skew, no compute overlap and no exposed latency were invented" in notes
    assert "Custom ops" in notes
    for event in doc["events"]:
        assert not {"arrival_ns", "overlap_ns", "gap_ns", "instance"} & set(event)


def test_hta_nccl_data_full_metadata_era():
    doc = import_kineto_file(NCCL_DATA)
    validate(doc, "trace", file=str(NCCL_DATA))
    assert_observational_notes(doc, 0)
    assert by_kind(doc) == {"all_reduce": 15, "broadcast": 6}
    assert dtypes(doc, "all_reduce") == {"float32": 15}
    # the Long broadcast runs an int8_t kernel: the dtype comes from record_param_comms
    assert dtypes(doc, "broadcast") == {"float32": 3, "int64": 3}
    assert doc["groups"] == [{"id": "0", "ranks": [0, 1], "description": "default_pg"}]
    assert {e["group"] for e in doc["events"]} == {"0"}
    assert doc["meta"]["world_size"] == 2
    kineto = doc["meta"]["kineto"]
    assert kineto["era"].startswith("nccl-metadata-2024")
    assert kineto["wait_records_filtered"] == 6
    assert kineto["custom_ops"] == {}
    assert kineto["latency_measured"] == {"nccl_kernel": 21, "gloo_work": 0, "none": 0}
    sizes = Counter(e["bytes"] for e in doc["events"] if e["op"] == "all_reduce")
    assert sizes[4 * 2049000] == 3 and sizes[4 * 7875584] == 3
    assert all(e["stream"] == "cuda:0/stream:40" for e in doc["events"])
    # issue order is time order although the CPU ops sit on two threads
    ts = [e["ts_ns"] for e in doc["events"]]
    assert ts == sorted(ts) and [e["seq"] for e in doc["events"]] == list(range(21))
    assert ts[0] == 1711964646000000000 + 4458676423209322  # base + exact ns of the c10d op


@pytest.mark.parametrize(("path", "rank"), [(SAMPLED_0, 0), (SAMPLED_1, 1)])
def test_hta_sampled_ranks_without_metadata_use_shapes_and_leave_group_unknown(path, rank):
    doc = import_kineto_file(path)
    validate(doc, "trace", file=str(path))
    assert_observational_notes(doc, rank)
    assert by_kind(doc) == {"all_reduce": 4, "all_to_all": 4, "all_gather": 2}
    assert dtypes(doc, "all_reduce") == {"float32": 4}
    assert dtypes(doc, "all_gather") == {"int8": 2}
    # all_gather_base: output bytes (1 GiB of int8), group size 64 of a 128-rank world
    assert {e["bytes"] for e in doc["events"] if e["op"] == "all_gather"} == {1073741824}
    assert doc["meta"]["world_size"] == 128
    assert doc["meta"]["kineto"]["era"].startswith("nccl-no-metadata")
    assert "epoch microseconds" in doc["meta"]["kineto"]["time_base"]
    # no pg_config and no group metadata: the group is unknown, said so, not guessed
    assert doc["groups"] == []
    assert {e["group"] for e in doc["events"]} == {"unknown:no-pg-config"}
    assert any("Unknown groups: unknown:no-pg-config x10" in n for n in doc["meta"]["notes"])
    # kernels carry no External id link in this era: no latency is claimed
    assert not any("latency_ns" in e for e in doc["events"])


def test_sampled_rank0_all_to_all_dtypes_and_sizes():
    doc = import_kineto_file(SAMPLED_0)
    a2a = [(e["dtype"], e["bytes"]) for e in doc["events"] if e["op"] == "all_to_all"]
    # input (send) buffer of alltoall_base_: Input Dims[1]
    assert a2a == [
        ("int64", 384 * 8),
        ("uint8", 419430400),
        ("uint8", 419430400),
        ("int32", 2846720 * 4),
    ]


def test_tracelens_b200_newest_keys_and_many_groups():
    doc = import_kineto_file(B200)
    validate(doc, "trace", file=str(B200))
    assert_observational_notes(doc, 0)
    assert by_kind(doc) == {"all_gather": 1}
    (event,) = doc["events"]
    assert (event["dtype"], event["bytes"], event["group"]) == ("bfloat16", 201088 * 2, "3")
    assert event["latency_ns"] == 21953
    assert len(doc["groups"]) == 15  # every pg_config entry is declared
    sizes = Counter(len(g["ranks"]) for g in doc["groups"])
    assert sizes == {8: 7, 1: 8}
    assert doc["meta"]["kineto"]["era"].startswith("nccl-metadata-2025")
    assert doc["meta"]["kineto"]["pg_count"] == 71


def test_import_kineto_cli_on_external_samples_is_deterministic(tmp_path, run_cli):
    out = tmp_path / "ranks"
    code, stdout, err = run_cli("import-kineto", SAMPLED_0, SAMPLED_1, "-o", out)
    assert code == 0, err
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(first) == ["rank0.json", "rank1.json"]
    code, _, err = run_cli("import-kineto", SAMPLED_0, SAMPLED_1, "-o", out, "--force")
    assert code == 0, err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first
    doc = json.loads(first["rank1.json"])
    validate(doc, "trace", file="rank1.json")


def test_external_two_of_128_ranks_are_refused_by_merge_naming_the_first_missing_rank(
    tmp_path, run_cli
):
    """The only external set with more than one rank (HTA's sampled ranks 0 and 1) holds 2
    of the 128 ranks its traces declare: merge refuses it rather than match a partial
    world, so it cannot go on to search (no external sample holds a whole world)."""
    imported = tmp_path / "ranks"
    assert run_cli("import-kineto", SAMPLED_0, SAMPLED_1, "-o", imported)[0] == 0
    out = tmp_path / "merged.jsonl.gz"
    code, _, err = run_cli("merge", *sorted(imported.glob("rank*.json")), "-o", out)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "rank 2: no capture" in err and "world_size 128" in err
    assert not out.exists()
