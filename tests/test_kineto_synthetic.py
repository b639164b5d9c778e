"""Kineto import on minimal synthetic traces built here: truncated rank lists rebuilt
from evidence or refused, custom ops, dtype vocabularies, time bases, and every
refusal (exit 2, one located line, no output left behind)."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracecanary.errors import ImportRefused
from tracecanary.formats.schemas import validate
from tracecanary.kineto import convert, import_kineto_file

BASE_NS = 1_790_857_026_000_000_000


def nccl_call(
    ts_us: float,
    *,
    ext: int,
    c10d: str = "c10d::allreduce_",
    coll: str = "allreduce",
    nelems: tuple[int, int] = (1024, 1024),
    dtype: str = "Float",
    pg: dict | None = None,
    kernel: str | None = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)",
    tid: int = 100,
) -> list[dict]:
    """c10d op > record_param_comms (with metadata) > nccl: annotation, + linked kernel."""
    meta = {
        "External id": ext,
        "Collective name": coll,
        "dtype": dtype,
        "In msg nelems": nelems[0],
        "Out msg nelems": nelems[1],
        "In split size": "[]",
        "Out split size": "[]",
    }
    meta.update(
        pg
        if pg is not None
        else {"Process Group Name": "0", "Process Group Ranks": "[0, 1]", "Group size": 2}
    )
    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": c10d,
            "pid": 1,
            "tid": tid,
            "ts": ts_us,
            "dur": 50.0,
            "args": {"External id": ext - 1},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "record_param_comms",
            "pid": 1,
            "tid": tid,
            "ts": ts_us + 5.125,
            "dur": 40.0,
            "args": meta,
        },
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": f"nccl:{coll}",
            "pid": 1,
            "tid": tid,
            "ts": ts_us + 10.0,
            "dur": 20.0,
            "args": {"External id": ext + 1},
        },
    ]
    if kernel:
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": kernel,
                "pid": 0,
                "tid": 7,
                "ts": ts_us + 100.0,
                "dur": 12.345,
                "args": {"External id": ext, "device": 0, "stream": 7},
            }
        )
    return events


def kineto(
    events: list[dict],
    *,
    rank: int | None = 0,
    world: int = 2,
    pg_config=None,
    base: int | None = BASE_NS,
    **top,
) -> dict:
    dist: dict = {"backend": "nccl", "world_size": world}
    if rank is not None:
        dist["rank"] = rank
    if pg_config is not None:
        dist["pg_config"] = pg_config
    doc = {"schemaVersion": 1, "distributedInfo": dist, "traceEvents": events, **top}
    if base is not None:
        doc["baseTimeNanoseconds"] = base
    return doc


def write(tmp_path: Path, doc, name: str = "trace.json") -> Path:
    path = tmp_path / name
    data = json.dumps(doc).encode() if not isinstance(doc, bytes) else doc
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


def pg(name: str, ranks: list[int], desc: str = "undefined") -> dict:
    return {
        "pg_name": name,
        "pg_desc": desc,
        "backend_config": "cuda:nccl",
        "pg_size": len(ranks),
        "ranks": ranks,
    }


def assert_refused(run_cli, tmp_path: Path, argv: list, *must: str) -> str:
    out = tmp_path / "out.json"
    code, stdout, err = run_cli("import-kineto", *argv, "-o", out)
    assert code == 2, (code, stdout, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for text in must:
        assert text in lines[0], lines[0]
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.json")]
    return lines[0]


# --- successful imports ------------------------------------------------------------------


def test_import_reads_metadata_layers_and_exact_nanoseconds(tmp_path):
    events = nccl_call(1000.5, ext=10) + nccl_call(
        2000.0,
        ext=20,
        c10d="c10d::_allgather_base_",
        coll="_allgather_base",
        nelems=(256, 512),
        dtype="BFloat16",
        kernel="ncclDevKernel_AllGather_RING_LL(x)",
    )
    doc = import_kineto_file(
        write(tmp_path, kineto(events, pg_config=[pg("0", [0, 1], "default_pg")]))
    )
    validate(doc, "trace", file="synthetic")
    ar, ag = doc["events"]
    assert (ar["op"], ar["bytes"], ar["dtype"], ar["group"]) == ("all_reduce", 4096, "float32", "0")
    # all_gather counts output bytes: Out msg nelems x 2 bytes
    assert (ag["op"], ag["bytes"], ag["dtype"]) == ("all_gather", 1024, "bfloat16")
    assert ar["ts_ns"] == BASE_NS + 1_000_500  # issue time = c10d op start, exact
    assert ar["latency_ns"] == 12_345  # kernel duration
    assert ar["stream"] == "cuda:0/stream:7"
    assert [e["seq"] for e in doc["events"]] == [0, 1]
    assert not {"arrival_ns", "overlap_ns"} & set(ar)
    assert doc["groups"] == [{"id": "0", "ranks": [0, 1], "description": "default_pg"}]
    assert doc["meta"]["clock_domains"] == [
        {"id": "unknown-host/rank0", "ranks": [0], "host": "unknown-host"}
    ]


def test_import_filters_wait_records_and_keeps_unmapped_names_as_custom(tmp_path):
    wait = {
        "ph": "X",
        "cat": "cpu_op",
        "name": "record_param_comms",
        "pid": 1,
        "tid": 100,
        "ts": 1500.0,
        "dur": 3.0,
        "args": {
            "Collective name": "wait",
            "dtype": "Byte",
            "In msg nelems": 0,
            "Out msg nelems": 0,
            "Group size": 1,
            "Process Group Ranks": "[]",
        },
    }
    gather = nccl_call(
        3000.0, ext=30, c10d="c10d::gather_", coll="gather", nelems=(8, 16), kernel=None
    )
    doc = import_kineto_file(write(tmp_path, kineto(nccl_call(1000.0, ext=10) + [wait] + gather)))
    ops = [e["op"] for e in doc["events"]]
    assert ops == ["all_reduce", "custom:gather"]  # never relabelled as all_gather
    assert doc["meta"]["kineto"]["wait_records_filtered"] == 1
    assert doc["meta"]["kineto"]["custom_ops"] == {"custom:gather (from gather, c10d op)": 1}
    assert any("Custom ops" in n and "custom:gather" in n for n in doc["meta"]["notes"])
    assert any("1 record_param_comms 'wait'" in n for n in doc["meta"]["notes"])


@pytest.mark.parametrize(
    ("listed", "pg_config", "strided", "world", "expected"),
    [
        # older form: first 30 entries, then "..."
        ("[" + ", ".join(map(str, range(30))) + ", ...]", True, None, 40, list(range(40))),
        # newer form: first 29, "...", last
        ("[" + ", ".join(map(str, range(29))) + ", ..., 39]", True, None, 40, list(range(40))),
        # no pg_config: explicit start/stride with the group size
        (
            "[" + ", ".join(map(str, range(0, 58, 2))) + ", ..., 78]",
            False,
            (0, 2),
            80,
            list(range(0, 80, 2)),
        ),
    ],
)
def test_truncated_rank_lists_are_rebuilt_from_evidence(
    tmp_path, listed, pg_config, strided, world, expected
):
    meta = {"Process Group Name": "5", "Process Group Ranks": listed, "Group size": len(expected)}
    if strided:
        meta["Global rank start"], meta["Global rank stride"] = strided
    config = [pg("5", expected)] if pg_config else None
    doc = import_kineto_file(
        write(tmp_path, kineto(nccl_call(10.0, ext=4, pg=meta), world=world, pg_config=config))
    )
    validate(doc, "trace", file="synthetic")
    assert doc["events"][0]["group"] == "5"
    assert [g["ranks"] for g in doc["groups"] if g["id"] == "5"] == [expected]


def test_group_only_in_record_param_comms_is_declared_from_its_full_list(tmp_path):
    meta = {
        "Process Group Name": "7",
        "Process Group Ranks": "[0, 2]",
        "Group size": 2,
        "Process Group Description": "dp",
    }
    doc = import_kineto_file(write(tmp_path, kineto(nccl_call(10.0, ext=4, pg=meta), world=4)))
    assert doc["groups"] == [{"id": "7", "ranks": [0, 2], "description": "dp"}]


def test_dtype_vocabularies_normalize_to_one_set(tmp_path):
    events = []
    scalar_types = ["Float", "Half", "BFloat16", "Double", "Char", "Byte", "Int", "Long", "Bool"]
    for k, scalar in enumerate(scalar_types):
        events += nccl_call(100.0 * (k + 1), ext=10 * (k + 1), dtype=scalar, nelems=(3, 3))
    # no record_param_comms metadata: dtype from the c10d op's C++ type name
    events.append(
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "c10d::_allgather_base_",
            "pid": 1,
            "tid": 100,
            "ts": 5000.0,
            "dur": 9.0,
            "args": {"Input Dims": [[8], [4], []], "Input type": ["long int", "long int", ""]},
        }
    )
    doc = import_kineto_file(write(tmp_path, kineto(events, pg_config=[pg("0", [0, 1])])))
    got = [(e["dtype"], e["bytes"]) for e in doc["events"]]
    assert got == [
        ("float32", 12),
        ("float16", 6),
        ("bfloat16", 6),
        ("float64", 24),
        ("int8", 3),
        ("uint8", 3),
        ("int32", 12),
        ("int64", 24),
        ("bool", 3),
        ("int64", 64),
    ]
    # the c10d-only all_gather: group from evidence (output/input ratio 2, one group of 2)
    assert doc["events"][-1]["group"] == "0"


def test_absolute_epoch_microseconds_without_base(tmp_path):
    events = nccl_call(1_682_725_898_240_951, ext=10)
    doc = import_kineto_file(write(tmp_path, kineto(events, base=None)))
    assert doc["events"][0]["ts_ns"] == 1_682_725_898_240_951_000
    assert "epoch microseconds" in doc["meta"]["kineto"]["time_base"]


def test_rank_from_option_when_trace_lacks_it(tmp_path, run_cli):
    path = write(tmp_path, kineto(nccl_call(10.0, ext=4), rank=None))
    out = tmp_path / "r1.json"
    code, _, err = run_cli("import-kineto", path, "-o", out, "--rank", "1")
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert {e["rank"] for e in doc["events"]} == {1}
    assert any("single-rank" in n for n in doc["meta"]["notes"])


def test_several_inputs_give_one_file_per_rank(tmp_path, run_cli):
    a = write(tmp_path, kineto(nccl_call(10.0, ext=4), rank=0), "a.json.gz")
    b = write(tmp_path, kineto(nccl_call(11.0, ext=4), rank=1), "b.json")
    out = tmp_path / "ranks"
    code, stdout, err = run_cli("import-kineto", a, b, "-o", out)
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["rank0.json", "rank1.json"]
    first = (out / "rank0.json").read_bytes()
    code, _, _ = run_cli("import-kineto", a, b, "-o", out, "--force")
    assert code == 0 and (out / "rank0.json").read_bytes() == first  # deterministic


# --- refusals ------------------------------------------------------------------------------


def test_refuses_what_is_not_json(tmp_path, run_cli):
    path = write(tmp_path, b'{"traceEvents": [', "bad.json")
    assert_refused(run_cli, tmp_path, [path], "bad.json", "not JSON")


def test_refuses_json_that_is_not_kineto(tmp_path, run_cli):
    path = write(tmp_path, {"events": []}, "x.json")
    assert_refused(run_cli, tmp_path, [path], "x.json", "not a Kineto trace", "traceEvents")
    path = write(tmp_path, {"traceEvents": []}, "y.json")
    assert_refused(run_cli, tmp_path, [path], "y.json", "not a Kineto trace")


def test_refuses_truncated_rank_list_without_evidence(tmp_path, run_cli):
    listed = "[" + ", ".join(map(str, range(30))) + ", ...]"
    meta = {
        "Process Group Name": "5",
        "Process Group Ranks": listed,
        "Group size": 40,
        "Global rank start": 0,
    }  # stride absent: the group is not strided
    path = write(tmp_path, kineto(nccl_call(10.0, ext=4, pg=meta), world=40))
    line = assert_refused(run_cli, tmp_path, [path], "record 1", "field args.Process Group Ranks")
    assert "truncated" in line


def test_refuses_truncated_rank_list_that_contradicts_pg_config(tmp_path, run_cli):
    listed = "[" + ", ".join(map(str, range(1, 31))) + ", ...]"
    meta = {"Process Group Name": "5", "Process Group Ranks": listed, "Group size": 40}
    path = write(
        tmp_path,
        kineto(nccl_call(10.0, ext=4, pg=meta), world=41, pg_config=[pg("5", list(range(40)))]),
    )
    assert_refused(
        run_cli, tmp_path, [path], "record 1", "field args.Process Group Ranks", "contradicts"
    )


def test_refuses_a_collective_without_sizes(tmp_path, run_cli):
    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "c10d::allreduce_",
            "pid": 1,
            "tid": 100,
            "ts": 10.0,
            "dur": 5.0,
            "args": {"External id": 3},
        },
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "gloo:all_reduce",
            "pid": 1,
            "tid": 101,
            "ts": 20.0,
            "dur": 5.0,
            "args": {"External id": 4},
        },
    ]
    path = write(tmp_path, kineto(events, pg_config=[pg("0", [0, 1])]))
    assert_refused(run_cli, tmp_path, [path], "record 0", "field args.Input Dims", "sizes missing")


def test_refuses_a_dtype_outside_the_supported_set(tmp_path, run_cli):
    path = write(tmp_path, kineto(nccl_call(10.0, ext=4, dtype="Short")))
    assert_refused(run_cli, tmp_path, [path], "record 1", "field args.dtype", "Short")


def test_refuses_missing_rank(tmp_path, run_cli):
    path = write(tmp_path, kineto(nccl_call(10.0, ext=4), rank=None))
    assert_refused(run_cli, tmp_path, [path], "distributedInfo.rank", "--rank")


def test_refuses_rank_option_that_contradicts_the_trace(tmp_path, run_cli):
    path = write(tmp_path, kineto(nccl_call(10.0, ext=4), rank=0))
    assert_refused(run_cli, tmp_path, [path, "--rank", "1"], "contradicts")


def test_refuses_timestamp_that_is_not_a_number(tmp_path, run_cli):
    events = nccl_call(10.0, ext=4)
    events[1]["ts"] = None
    path = write(tmp_path, kineto(events))
    assert_refused(run_cli, tmp_path, [path], "record 1", "field ts")


def test_refuses_two_inputs_of_one_rank_and_leaves_no_directory(tmp_path, run_cli):
    a = write(tmp_path, kineto(nccl_call(10.0, ext=4), rank=0), "a.json")
    b = write(tmp_path, kineto(nccl_call(11.0, ext=4), rank=0), "b.json")
    out = tmp_path / "ranks"
    code, _, err = run_cli("import-kineto", a, b, "-o", out)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "rank 0" in err
    assert not out.exists()


def test_refuses_decompressed_size_over_the_limit(tmp_path, run_cli, monkeypatch):
    path = write(tmp_path, kineto(nccl_call(10.0, ext=4) * 50), "big.json.gz")
    monkeypatch.setenv("TRACECANARY_LIMITS", "max_json_document_bytes=2000")
    assert_refused(run_cli, tmp_path, [path], "big.json.gz", "max_json_document_bytes")


def test_refuses_group_size_beyond_the_world_before_building_rank_lists(tmp_path, run_cli):
    meta = {
        "Process Group Name": "5",
        "Group size": 2**60,
        "Global rank start": 0,
        "Global rank stride": 1,
    }
    path = write(tmp_path, kineto(nccl_call(10.0, ext=4, pg=meta), world=8))
    assert_refused(run_cli, tmp_path, [path], "record 1", "field args.Group size")


def test_refuses_world_size_over_the_rank_limit(tmp_path, run_cli):
    path = write(tmp_path, kineto(nccl_call(10.0, ext=4), world=10**9))
    assert_refused(run_cli, tmp_path, [path], "distributedInfo.world_size", "max_ranks")


_ODD_VALUES = [None, -1, 0, 2**70, "x", "1.5", "", [], {}, [[1]], [[-1]], "[0, ...]", True]
_KEYS = ["Input Dims", "Input type", "Concrete Inputs", "Process Group Ranks", "Group size",
         "dtype", "In msg nelems", "Out msg nelems", "Global rank stride", "Process Group Name",
         "Collective name", "External id"]  # fmt: skip


@given(
    st.lists(
        st.tuples(
            st.integers(0, 7),
            st.sampled_from(_KEYS + ["ts", "dur", "name", "tid", "args", "ph"]),
            st.sampled_from(_ODD_VALUES + ["c10d::foo_", "gloo:all_reduce", "nccl:x"]),
        ),
        min_size=1,
        max_size=3,
    )
)
@settings(max_examples=150, deadline=None)
def test_malformed_fields_give_a_valid_trace_or_a_located_refusal(edits):
    events = nccl_call(10.0, ext=4) + [
        {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 100,
         "ts": 200.0, "dur": 5.0,
         "args": {"Input Dims": [[[4]], [], [], [], [], []],
                  "Input type": ["TensorList", "", "", "", "Scalar", "Scalar"],
                  "Concrete Inputs": ["", "", "", "", "False", "-1"]}},
        {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1, "tid": 101,
         "ts": 210.0, "dur": 5.0, "args": {"Input Dims": [[4]], "Input type": ["float"]}},
        {"ph": "X", "cat": "cpu_op", "name": "c10d::send", "pid": 1, "tid": 100, "ts": 300.0,
         "dur": 5.0, "args": {"Input Dims": [[[4]], [], [], []],
                              "Input type": ["TensorList", "", "Scalar", "Scalar"],
                              "Concrete Inputs": ["", "", "1", "0"]}},
    ]  # fmt: skip
    doc = kineto(events, pg_config=[pg("0", [0, 1], "default_pg")])
    for index, key, shared_value in edits:
        value = copy.deepcopy(shared_value)  # the same sampled object may be edited in twice
        event = doc["traceEvents"][index % len(events)]
        if key in _KEYS and isinstance(event.get("args"), dict):
            event["args"][key] = value
        else:
            event[key] = value
    try:
        out = convert(json.loads(json.dumps(doc), parse_float=str), file="mutated.json")
    except ImportRefused as err:
        assert err.file == "mutated.json"
        return
    validate(out, "trace", file="mutated.json")
