"""An uneven all_to_all (all_to_allv, Mixture-of-Experts token dispatch): per-member split
sizes in the trace format, ingest's and merge's checks of them, and the recorder's
capture of a real 2-rank gloo MoE program (examples/user_programs/moe_train.py)."""

from __future__ import annotations

import copy
import gzip
import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from conftest import REPO, write_doc

from tracecanary.formats.schemas import validate
from tracecanary.load import load_program

CLI = [sys.executable, "-m", "tracecanary"]


def _event(rank: int, seq: int, op: str, nbytes: int, **fields) -> dict:
    return {
        "rank": rank,
        "seq": seq,
        "op": op,
        "bytes": nbytes,
        "dtype": "float32",
        "group": "world",
        "ts_ns": 1000 * seq + rank,
        **fields,
    }


def moe_trace() -> dict:
    """Two ranks: an all_to_allv whose members send 8 and 9 float32 elements (rank 0
    sends 3 to itself and 5 to rank 1; rank 1 sends 2 to rank 0 and 7 to itself), then an
    even all_reduce."""
    events = [
        _event(0, 0, "all_to_all", 4 * 8, send_splits=[3, 5], recv_splits=[3, 2]),
        _event(1, 0, "all_to_all", 4 * 9, send_splits=[2, 7], recv_splits=[5, 7]),
        _event(0, 1, "all_reduce", 64),
        _event(1, 1, "all_reduce", 64),
    ]
    return {
        "format": "tracecanary.trace/v1",
        "meta": {
            "world_size": 2,
            "source": "test",
            "clock_domains": [{"id": "h", "ranks": [0, 1]}],
        },
        "groups": [{"id": "world", "ranks": [0, 1]}],
        "events": events,
    }


def test_trace_schema_accepts_split_lists_on_an_event():
    validate(moe_trace(), "trace", file="moe.json")


@pytest.mark.parametrize("jsonl", [False, True], ids=["json", "jsonl"])
def test_ingest_accepts_an_uneven_all_to_all_whose_splits_agree(tmp_path, run_cli, jsonl):
    src = write_doc(moe_trace(), tmp_path / ("t.jsonl" if jsonl else "t.json"), jsonl=jsonl)
    code, _, err = run_cli("ingest", src, "-o", tmp_path / "t.parquet")
    assert code == 0, err
    table = pq.read_table(tmp_path / "t.parquet")
    assert table.column("send_splits").to_pylist()[:2] == ["3,5", "2,7"]
    program = load_program(tmp_path / "t.parquet")
    assert program.column("splits").tolist() == ["3,5;2,7", ""]
    assert program.column("bytes").tolist() == [36, 64]  # the largest member's buffer
    assert load_program(src).column("splits").tolist() == ["3,5;2,7", ""]


def test_trace_without_splits_has_no_split_column_anywhere(tmp_path, run_cli, trace_doc):
    src = write_doc(trace_doc, tmp_path / "t.json")
    assert run_cli("ingest", src, "-o", tmp_path / "t.parquet")[0] == 0
    names = pq.read_schema(tmp_path / "t.parquet").names
    assert "send_splits" not in names and "recv_splits" not in names
    program = load_program(tmp_path / "t.parquet")
    assert "splits" not in program.column_names
    assert all("splits" not in signature for signature in program.signatures()[1])


def _refusal(tmp_path, run_cli, doc: dict) -> tuple[int, str]:
    src = write_doc(doc, tmp_path / "bad.json")
    out = tmp_path / "bad.parquet"
    code, _, err = run_cli("ingest", src, "-o", out)
    assert not out.exists() and not (tmp_path / "bad.meta.json").exists()
    return code, err


def test_ingest_refuses_a_split_list_not_one_per_group_member(tmp_path, run_cli):
    doc = moe_trace()
    doc["events"][1]["send_splits"] = [2, 7, 0]
    code, err = _refusal(tmp_path, run_cli, doc)
    assert code == 2
    assert "record 1: field send_splits: 3 splits for a group of 2 ranks" in err


def test_ingest_refuses_send_splits_whose_total_is_not_the_events_bytes(tmp_path, run_cli):
    doc = moe_trace()
    doc["events"][0]["bytes"] = 40
    code, err = _refusal(tmp_path, run_cli, doc)
    assert code == 2
    assert "record 0: field send_splits: send splits total 8 elements x 4 bytes = 32 bytes" in err


def test_ingest_refuses_splits_on_an_op_other_than_all_to_all(tmp_path, run_cli):
    doc = moe_trace()
    doc["events"][2].update(send_splits=[8, 8], recv_splits=[8, 8])
    code, err = _refusal(tmp_path, run_cli, doc)
    assert code == 2
    assert "record 2: field send_splits: splits are meaningful only for all_to_all" in err


def test_ingest_refuses_send_splits_without_recv_splits(tmp_path, run_cli):
    doc = moe_trace()
    del doc["events"][1]["recv_splits"]
    code, err = _refusal(tmp_path, run_cli, doc)
    assert code == 2
    assert "record 1: field recv_splits: an uneven all_to_all needs recv_splits" in err


@pytest.mark.parametrize("jsonl", [False, True], ids=["json", "jsonl"])
@pytest.mark.parametrize("splits", [[-3, 11], [3, None], [3.5, 4.5], "3,5", [3, True]], ids=str)
def test_ingest_refuses_a_split_that_is_not_a_list_of_counts(tmp_path, run_cli, jsonl, splits):
    doc = moe_trace()
    doc["events"][0]["send_splits"] = splits
    src = write_doc(doc, tmp_path / ("bad.jsonl" if jsonl else "bad.json"), jsonl=jsonl)
    code, _, err = run_cli("ingest", src, "-o", tmp_path / "bad.parquet")
    assert code == 2 and not (tmp_path / "bad.parquet").exists()
    assert "record 0: field send_splits: must be a list of non-negative integers" in err
    assert "Traceback" not in err


def _merge_refusal(tmp_path, run_cli, doc: dict) -> tuple[int, str]:
    """Merge the ranks of ``doc`` written as per-rank captures (where members meet)."""
    paths = []
    for rank in (0, 1):
        part = copy.deepcopy(doc)
        part["events"] = [e for e in doc["events"] if e["rank"] == rank]
        paths.append(write_doc(part, tmp_path / f"rank{rank}.json"))
    code, _, err = run_cli("merge", *paths, "-o", tmp_path / "merged.json")
    assert not (tmp_path / "merged.json").exists()
    return code, err


def test_merge_refuses_a_send_split_that_differs_from_the_peers_receive_split(tmp_path, run_cli):
    doc = moe_trace()
    doc["events"][1]["recv_splits"] = [4, 7]  # rank 0 sends 5 to rank 1, which says 4
    code, err = _merge_refusal(tmp_path, run_cli, doc)
    assert code == 2
    assert (
        "collective world#0 ranks 0,1: field recv_splits: rank 0 sends 5 elements to rank 1" in err
    )
    assert "rank 1 receives 4 from rank 0" in err


def test_a_member_without_splits_is_read_as_equal_parts_and_checked_against_its_peers(
    tmp_path, run_cli
):
    doc = moe_trace()
    del doc["events"][1]["send_splits"], doc["events"][1]["recv_splits"]
    doc["events"][1]["bytes"] = 40  # 5 and 5 elements: rank 0 receives 2 from it
    code, err = _merge_refusal(tmp_path, run_cli, doc)
    assert code == 2
    assert "field recv_splits: rank 1 sends 5 elements to rank 0, but rank 0 receives 2" in err
    doc["events"][1]["bytes"] = 36  # 9 elements: not two equal parts
    code, err = _merge_refusal(tmp_path, run_cli, doc)
    assert code == 2
    assert "field send_splits: rank 1 records no splits, but its 36 bytes are not 2 equal" in err


def test_an_even_member_beside_an_uneven_one_needs_no_splits(tmp_path):
    doc = moe_trace()  # rank 0 sends and receives 4 and 4 (no splits); rank 1 sends 4 and 6
    del doc["events"][0]["send_splits"], doc["events"][0]["recv_splits"]
    doc["events"][1].update(bytes=40, send_splits=[4, 6], recv_splits=[4, 6])
    program = load_program(write_doc(doc, tmp_path / "t.json"))
    assert program.column("splits").tolist() == ["4,4;4,6", ""]
    assert program.column("bytes").tolist() == [40, 64]


def test_uneven_all_to_all_without_splits_is_refused_naming_what_to_record(tmp_path, run_cli):
    doc = copy.deepcopy(moe_trace())
    for event in doc["events"][:2]:
        del event["send_splits"], event["recv_splits"]
    code, err = _merge_refusal(tmp_path, run_cli, doc)
    assert code == 2
    assert "field bytes: conflicting bytes across members (rank 0: 32, rank 1: 36)" in err
    assert "needs send_splits and recv_splits on every member" in err
    assert "input_split_sizes/output_split_sizes" in err


def test_merge_keeps_the_splits_of_per_rank_captures(tmp_path, run_cli):
    doc = moe_trace()
    paths = []
    for rank in (0, 1):
        part = copy.deepcopy(doc)
        part["events"] = [e for e in doc["events"] if e["rank"] == rank]
        paths.append(write_doc(part, tmp_path / f"rank{rank}.json"))
    code, _, err = run_cli("merge", *paths, "-o", tmp_path / "merged.json")
    assert code == 0, err
    merged = json.loads((tmp_path / "merged.json").read_text())
    a2a = [e for e in merged["events"] if e["op"] == "all_to_all"]
    assert [(e["send_splits"], e["recv_splits"]) for e in a2a] == [
        ([3, 5], [3, 2]),
        ([2, 7], [5, 7]),
    ]


@pytest.mark.slow
def test_capture_records_a_real_moe_programs_changing_splits_under_torchrun(tmp_path):
    out = tmp_path / "cap"
    run = subprocess.run(
        [
            *CLI, "capture", "-o", out, "--timeout", "150", "--",
            sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
            REPO / "examples" / "user_programs" / "moe_train.py", "3",
        ],
        cwd=tmp_path, capture_output=True, text=True, timeout=200,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    header, *lines = gzip.decompress((out / "merged.jsonl.gz").read_bytes()).splitlines()
    events = [json.loads(line) for line in lines]
    rank0 = [e for e in events if e["rank"] == 0]
    # per step: the int64 counts (even), dispatch and combine, their two in backward, the
    # router's weight and bias all_reduced
    assert [e["op"] for e in rank0] == (["all_to_all"] * 5 + ["all_reduce"] * 2) * 3
    counts = [e for e in rank0 if e["dtype"] == "int64"]
    assert len(counts) == 3 and all("send_splits" not in e for e in counts)
    uneven = [e for e in rank0 if e["op"] == "all_to_all" and e["dtype"] == "float32"]
    assert all(sum(e["send_splits"]) * 4 == e["bytes"] for e in uneven)
    program = load_program(out / "merged.jsonl.gz")
    dispatch = [s for s in program.column("splits").tolist() if s][::4]
    assert len(set(dispatch)) > 1  # the routing changes the splits from step to step
    assert json.loads((out / "capture.json").read_text())["merged"]["collectives"] == 21


def test_lossless_canary_keeps_every_split_and_expands_to_the_same_events(tmp_path, run_cli):
    src = write_doc(moe_trace(), tmp_path / "t.json")
    assert run_cli("compile", src, "--lossless", "-o", tmp_path / "c.json")[0] == 0
    canary = json.loads((tmp_path / "c.json").read_text())
    validate(canary, "canary", file="c.json")
    assert canary["splits"] == {"values": ["3,5;2,7"], "records": [[0, 1], [-1, 1]]}
    assert all("splits" not in signature for signature in canary["signatures"])
    assert run_cli("expand", tmp_path / "c.json", "-o", tmp_path / "e.json")[0] == 0
    expanded = json.loads((tmp_path / "e.json").read_text())["events"]
    a2a = [e for e in expanded if e["op"] == "all_to_all"]
    assert [(e["bytes"], e["send_splits"], e["recv_splits"]) for e in a2a] == [
        (32, [3, 5], [3, 2]),
        (36, [2, 7], [5, 7]),
    ]
    assert run_cli("verify-commitments", src, tmp_path / "c.json")[0] == 0


def test_commitments_cover_the_splits(tmp_path, run_cli):
    src = write_doc(moe_trace(), tmp_path / "t.json")
    assert run_cli("compile", src, "--lossless", "-o", tmp_path / "c.json")[0] == 0
    changed = moe_trace()  # rank 0 sends one element less to rank 1, which receives it
    changed["events"][0].update(bytes=28, send_splits=[3, 4])
    changed["events"][1]["recv_splits"] = [4, 7]
    other = write_doc(changed, tmp_path / "other.json")
    code, out, err = run_cli("verify-commitments", other, tmp_path / "c.json")
    assert code == 1, out + err


def test_verify_commitments_refuses_a_canary_whose_stated_splits_differ_from_the_source(
    tmp_path, run_cli
):
    src = write_doc(moe_trace(), tmp_path / "t.json")
    assert run_cli("compile", src, "--lossless", "-o", tmp_path / "c.json")[0] == 0
    canary = json.loads((tmp_path / "c.json").read_text())
    canary["splits"]["values"][0] = "3,5;3,6"  # rank 1 said to send 3 to rank 0, not 2
    (tmp_path / "tampered.json").write_text(json.dumps(canary))
    code, out, err = run_cli("verify-commitments", src, tmp_path / "tampered.json")
    assert code == 1, out + err
    assert "occurrence 0 field splits" in out + err


def test_all_to_allvs_that_differ_only_in_their_matrices_share_one_signature(tmp_path):
    doc = moe_trace()
    events = doc["events"]
    again = [
        _event(0, 2, "all_to_all", 4 * 8, send_splits=[3, 5], recv_splits=[3, 2]),
        _event(1, 2, "all_to_all", 4 * 9, send_splits=[2, 7], recv_splits=[5, 7]),
        _event(0, 3, "all_to_all", 4 * 8, send_splits=[4, 4], recv_splits=[4, 5]),
        _event(1, 3, "all_to_all", 4 * 9, send_splits=[5, 4], recv_splits=[4, 4]),
    ]
    doc["events"] = events + again
    program = load_program(write_doc(doc, tmp_path / "t.json"))
    ids, table = program.signatures()
    assert ids.tolist() == [0, 1, 0, 0]  # the matrices travel per occurrence, not by signature
    assert [s["bytes"] for s in table] == [36, 64]  # the first occurrence's buffer
    assert all("splits" not in signature for signature in table)
    assert program.column("splits").tolist() == ["3,5;2,7", "", "3,5;2,7", "4,4;5,4"]


def test_all_to_allv_cost_follows_its_slowest_pair_not_its_mean():
    from tracecanary.program import make_program
    from tracecanary.sim.engine import all_to_allv_bytes

    def program(splits: str, nbytes: int):
        return make_program(
            {"op": ["all_to_all"], "bytes": [nbytes], "dtype": ["float32"], "group": ["world"],
             "group_size": [2], "gap_ns": [0], "splits": [splits]},
            {"occ": [0, 0], "rank": [0, 1], "skew_ns": [0, 0]},
            world_size=2, skew_known=True,
        )  # fmt: skip

    # same mean pair volume (1000 elements), one pair five times the other
    skewed = program("0,1000000;200000,0", 4_000_000)
    even = program("0,600000;600000,0", 2_400_000)
    assert all_to_allv_bytes(skewed, skewed.column("bytes", "int64")).tolist() == [8_000_000]
    assert all_to_allv_bytes(even, even.column("bytes", "int64")).tolist() == [4_800_000]
    plain = program("", 4_000_000)
    assert all_to_allv_bytes(plain, plain.column("bytes", "int64")).tolist() == [4_000_000]


def test_replay_prices_a_skewed_all_to_allv_above_an_even_one_of_the_same_total(tmp_path, run_cli):
    def a2av(send0: list[int], send1: list[int]) -> dict:
        doc = moe_trace()
        doc["events"] = [
            _event(0, 0, "all_to_all", 4 * sum(send0), send_splits=send0,
                   recv_splits=[send0[0], send1[0]]),
            _event(1, 0, "all_to_all", 4 * sum(send1), send_splits=send1,
                   recv_splits=[send0[1], send1[1]]),
        ]  # fmt: skip
        return doc

    means = {}
    for name, doc in (
        ("skewed", a2av([0, 1_000_000], [200_000, 0])),
        ("even", a2av([0, 600_000], [600_000, 0])),
    ):
        src = write_doc(doc, tmp_path / f"{name}.json")
        report = tmp_path / f"{name}.report.json"
        code, _, err = run_cli(
            "replay", src, "--backends", REPO / "config" / "backends.yaml", "-o", report
        )
        assert code == 0, err
        means[name] = json.loads(report.read_text())["configs"]["baseline"]["by_op"]["all_to_all"]
    assert means["skewed"]["mean_ns"] > 1.5 * means["even"]["mean_ns"]


@pytest.mark.parametrize("target", [None, "param-1e115ff"])
def test_export_param_writes_all_to_allv_with_each_ranks_recorded_splits(tmp_path, run_cli, target):
    src = write_doc(moe_trace(), tmp_path / "t.json")
    assert run_cli("compile", src, "--lossless", "-o", tmp_path / "c.json")[0] == 0
    extra = ["--target", target] if target else []
    code, _, err = run_cli(
        "export-param", tmp_path / "c.json", "-o", tmp_path / "x", "--execution", "full", *extra
    )
    assert code == 0, err
    a2av = {
        r: [e for e in json.loads((tmp_path / "x" / f"{r}.json").read_text())
            if e["comms"] == "all_to_allv"]
        for r in (0, 1)
    }  # fmt: skip
    got = {
        r: [(e["in_msg_size"], e["in_split"], e["out_msg_size"], e["out_split"]) for e in a2av[r]]
        for r in a2av
    }
    assert got == {0: [(8, [3, 5], 5, [3, 2])], 1: [(9, [2, 7], 12, [5, 7])]}
    summary = json.loads((tmp_path / "x" / "export.json").read_text())
    assert summary["counts_per_op"] == {"all_reduce": 1, "all_to_allv": 1}


def _moe_export(tmp_path, run_cli, target=None) -> tuple:
    src = write_doc(moe_trace(), tmp_path / "t.json")
    assert run_cli("compile", src, "--lossless", "-o", tmp_path / "c.json")[0] == 0
    extra = ["--target", target] if target else []
    out = tmp_path / "x"
    assert (
        run_cli("export-param", tmp_path / "c.json", "-o", out, "--execution", "full", *extra)[0]
        == 0
    )
    return out


@pytest.mark.slow
def test_replay_physical_runs_all_to_allv_with_its_splits_and_checks_every_row(tmp_path, run_cli):
    out = _moe_export(tmp_path, run_cli)
    attempt = tmp_path / "a"
    code, _, err = run_cli(
        "replay-physical", out, "--backend", "gloo", "--nproc", "2", "--iters", "2",
        "--warmup", "1", "-o", attempt,
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads((attempt / "attempt.json").read_text())
    assert doc["status"] == "complete"
    assert doc["correctness"] == {"checked_rows": doc["rows"], "incorrect_rows": 0}
    rows = pq.read_table(attempt / "rows.parquet").to_pandas()
    a2av = rows[rows["op"] == "all_to_allv"]
    assert len(a2av) == 2 * 2 and a2av["correct"].all()
    assert sorted(set(a2av["bytes"].tolist())) == [32, 36]  # each rank its own send buffer


PARAM = REPO.parent / "shared" / "param_upstream"


@pytest.mark.slow
@pytest.mark.skipif(
    not (PARAM / "train/comms/pt/commsTraceReplay.py").is_file(),
    reason=f"upstream PARAM snapshot absent ({PARAM})",
)
def test_upstream_param_replays_the_all_to_allv_export(tmp_path, run_cli):
    out = _moe_export(tmp_path, run_cli, "param-1e115ff")
    attempt = tmp_path / "a"
    code, _, err = run_cli(
        "replay-param", out, "--param", PARAM, "--nproc", "2", "--iters", "2", "-o", attempt
    )
    assert code == 0, err
    doc = json.loads((attempt / "attempt.json").read_text())
    assert doc["status"] == "complete"
    rows = pq.read_table(attempt / "rows.parquet").to_pandas()
    assert (rows["op"] == "all_to_allv").sum() == 2 * 2


def _nccl_all_to_allv(in_rows: str, out_rows: str, nelems: tuple[int, int]) -> dict:
    """One NCCL all_to_all_single with split sizes as torch's record_param_comms writes
    them (rows of dim 0, as text), on a 2-rank world."""
    from test_kineto_synthetic import kineto, nccl_call, pg

    events = nccl_call(
        10.0,
        ext=4,
        c10d="c10d::alltoall_base_",
        coll="all_to_allv",
        nelems=nelems,
        kernel="ncclDevKernel_SendRecv(x)",
    )
    events[1]["args"].update({"In split size": in_rows, "Out split size": out_rows})
    return kineto(events, pg_config=[pg("0", [0, 1], "default_pg")])


def test_kineto_import_reads_nccls_split_sizes_as_elements(tmp_path):
    from test_kineto_synthetic import write

    from tracecanary.kineto import import_kineto_file

    # rank 0 sends rows [3, 5] and receives [3, 2] of 4 float32 elements each
    doc = import_kineto_file(write(tmp_path, _nccl_all_to_allv("[3, 5]", "[3, 2]", (32, 20))))
    validate(doc, "trace", file="synthetic")
    (event,) = doc["events"]
    assert (event["op"], event["bytes"]) == ("all_to_all", 128)
    assert (event["send_splits"], event["recv_splits"]) == ([12, 20], [12, 8])


def test_kineto_import_writes_no_splits_for_equal_parts(tmp_path):
    from test_kineto_synthetic import write

    from tracecanary.kineto import import_kineto_file

    doc = import_kineto_file(write(tmp_path, _nccl_all_to_allv("[4, 4]", "[4, 4]", (32, 32))))
    assert "send_splits" not in doc["events"][0] and "recv_splits" not in doc["events"][0]


def test_kineto_import_refuses_split_sizes_the_profiler_truncated(tmp_path, run_cli):
    from test_kineto_synthetic import assert_refused, write

    path = write(tmp_path, _nccl_all_to_allv("[3, ..., 5]", "[3, 2]", (32, 20)))
    line = assert_refused(
        run_cli,
        tmp_path,
        [path],
        "record 1",
        "field args.In split size",
        "truncated by the profiler",
    )
    assert "tracecanary capture -- CMD" in line


RECORDED_PROGRAM = """
import sys

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.multiprocessing as mp

from tracecanary.record import record


def work(rank, port, out):
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2
    )
    send = [1, 3] if rank == 0 else [2, 2]  # rows of 4 elements
    recv = [1, 2] if rank == 0 else [3, 2]
    with record(out):
        out_rows = torch.empty(sum(recv), 4)
        dist.all_to_all_single(out_rows, torch.ones(sum(send), 4), recv, send)
        funcol.wait_tensor(
            funcol.all_to_all_single(torch.ones(sum(send), 4), recv, send, dist.group.WORLD)
        )
        dist.all_to_all([torch.empty(2) for _ in range(2)], [torch.ones(2) for _ in range(2)])
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(work, args=(int(sys.argv[1]), sys.argv[2]), nprocs=2)
"""


@pytest.mark.slow
def test_recording_api_records_split_sizes_of_plain_and_functional_all_to_all_single(
    tmp_path, run_cli
):
    from tracecanary.ports import free_local_port

    program = tmp_path / "prog.py"
    program.write_text(RECORDED_PROGRAM)
    out = tmp_path / "rec"
    run = subprocess.run(
        [sys.executable, program, str(free_local_port()), out],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    splits = {}
    for rank in (0, 1):
        events = json.loads((out / f"rank{rank}.json").read_text())["events"]
        splits[rank] = [(e.get("send_splits"), e.get("recv_splits")) for e in events]
    # elements = rows x 4; the list-form call with equal parts records none
    assert splits[0] == [([4, 12], [4, 8])] * 2 + [(None, None)]
    assert splits[1] == [([8, 8], [12, 8])] * 2 + [(None, None)]
    code, _, err = run_cli(
        "merge", out / "rank0.json", out / "rank1.json", "-o", tmp_path / "m.json"
    )
    assert code == 0, err


def test_columnar_capture_with_split_columns_is_refused_naming_the_formats_that_carry_them(
    tmp_path, run_cli
):
    import pyarrow as pa

    from tracecanary.columnar_capture import write_columnar

    doc = moe_trace()
    events = doc.pop("events")
    for event in events:
        for name in ("send_splits", "recv_splits"):
            if name in event:
                event[name] = ",".join(map(str, event[name]))
    write_columnar(doc, pa.Table.from_pylist(events), tmp_path / "cap.parquet")
    code, _, err = run_cli("ingest", tmp_path / "cap.parquet", "-o", tmp_path / "out.parquet")
    assert code == 2 and not (tmp_path / "out.parquet").exists()
    assert "field send_splits: an uneven all_to_all's splits are read from JSON" in err


def test_splits_of_a_group_captured_on_some_ranks_are_checked_among_those_ranks(tmp_path):
    doc = moe_trace()  # a 3-rank group whose rank 2 was not captured
    doc["meta"]["world_size"] = 3
    doc["meta"]["clock_domains"] = [{"id": "h", "ranks": [0, 1, 2]}]
    doc["groups"] = [{"id": "world", "ranks": [0, 1, 2]}]
    doc["events"] = [
        _event(0, 0, "all_to_all", 4 * 10, send_splits=[3, 5, 2], recv_splits=[3, 2, 9]),
        _event(1, 0, "all_to_all", 4 * 9, send_splits=[2, 7, 0], recv_splits=[5, 7, 1]),
    ]
    program = load_program(write_doc(doc, tmp_path / "t.json"))
    assert program.column("splits").tolist() == ["3,5;2,7"]
    assert program.column("bytes").tolist() == [40]
    doc["events"][1]["recv_splits"] = [4, 7, 1]
    doc["events"][1]["send_splits"] = [2, 7, 0]
    from tracecanary.errors import MergeError

    with pytest.raises(MergeError, match="rank 0 sends 5 elements to rank 1"):
        load_program(write_doc(doc, tmp_path / "bad.json"))


@pytest.mark.parametrize("ablation", ["order", "tail", "skew", "overlap"])
def test_ablations_move_an_all_to_allv_with_its_slowest_pair(tmp_path, ablation):
    from tracecanary.sim.engine import all_to_allv_bytes, prepare

    doc = moe_trace()
    doc["events"] += [
        _event(0, 2, "all_to_all", 4 * 10, send_splits=[1, 9], recv_splits=[1, 1]),
        _event(1, 2, "all_to_all", 4 * 2, send_splits=[1, 1], recv_splits=[9, 1]),
        *(dict(e, seq=3, ts_ns=3000 + e["rank"]) for e in doc["events"][:2]),  # first again
    ]
    program = load_program(write_doc(doc, tmp_path / "t.json"))
    priced = all_to_allv_bytes(program, program.column("bytes", "int64"))
    assert priced.tolist() == [2 * 5 * 4, 64, 2 * 9 * 4, 2 * 5 * 4]  # n x largest pair x 4 B
    prepared = prepare(program, [ablation])
    if ablation == "order":  # by signature: the all_to_allvs (one signature) run first
        assert prepared.occ.tolist() == [0, 2, 3, 1]
    assert prepared.bytes.tolist() == priced[prepared.occ].tolist()
    assert sorted(prepared.bytes.tolist()) == sorted(priced.tolist())


def _steps_trace(steps: int) -> dict:
    """Two ranks, ``steps`` steps of an all_to_allv whose matrix changes every step then
    an all_reduce, 1 ms apart."""
    doc = moe_trace()
    events = []
    for step in range(steps):
        a, b = 2 + step % 3, 5 - step % 3  # rank 0 sends a to itself, b to rank 1
        c, d = 1 + step % 2, 6  # rank 1 sends c to rank 0, d to itself
        sides = [
            (0, dict(bytes=4 * (a + b), send_splits=[a, b], recv_splits=[a, c])),
            (1, dict(bytes=4 * (c + d), send_splits=[c, d], recv_splits=[b, d])),
        ]
        for rank, fields in sides:
            issue = 1_000_000 * step + rank
            events.append({**_event(rank, 2 * step, "all_to_all", 0), **fields, "ts_ns": issue})
            events.append(
                {**_event(rank, 2 * step + 1, "all_reduce", 64), "ts_ns": issue + 500_000}
            )
    doc["events"] = events
    return doc


def test_reduced_execution_skips_steps_and_keeps_every_executed_matrix_exact(tmp_path, run_cli):
    src = write_doc(_steps_trace(12), tmp_path / "t.json")
    out = tmp_path / "c.json"
    code, _, err = run_cli("compile", src, "--lossless", "--max-executed-repeats", "2", "-o", out)
    assert code == 0, err
    canary = json.loads(out.read_text())
    assert len(canary["signatures"]) == 2  # every step's all_to_allv is one signature
    assert run_cli("verify-commitments", src, out)[0] == 0
    source = load_program(src)
    executed = load_program(out, executed=True)
    assert executed.n < source.n
    logical = executed.column("logical_occ").astype(int)
    assert executed.column("splits").tolist() == source.column("splits")[logical].tolist()
    assert executed.column("bytes").tolist() == source.column("bytes")[logical].tolist()
