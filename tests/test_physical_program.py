"""Validation of a PARAM program directory before any process is launched.

Every refusal: exit 2, exactly one stderr line naming the file, the entry (record)
and the field, no archive and no staging directory left behind.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tracecanary.cli import main
from tracecanary.param.program import load_program_dir
from tracecanary.physical.samples import sample_program, write_program


@pytest.fixture
def files() -> list[list[dict]]:
    return sample_program(2, small_ops=2)


def _index(entries: list[dict], comms: str, nth: int = 0) -> int:
    return [i for i, e in enumerate(entries) if e["comms"] == comms][nth]


def refuse(tmp_path: Path, capsys, files, *extra: str) -> str:
    program = write_program(tmp_path / "prog", files)
    return refuse_program(tmp_path, capsys, program, *extra)


def refuse_program(tmp_path: Path, capsys, program: Path, *extra: str, nproc: int = 2) -> str:
    """Run replay-physical on ``program``; assert the refusal contract; return stderr."""
    out = tmp_path / "attempt"
    code = main(["replay-physical", str(program), "--nproc", str(nproc), "-o", str(out), *extra])
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert not out.exists()
    assert not list(tmp_path.glob(".attempt.staging-*"))
    return err


def test_sample_program_has_every_kind_and_per_rank_execution(tmp_path, files):
    programs = load_program_dir(write_program(tmp_path / "prog", files))
    kinds = set(programs[0].ops["op"])
    assert kinds == {
        "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "all_to_allv",
        "broadcast", "reduce", "barrier", "send", "recv",
    }  # fmt: skip
    r0, r1 = (p.executed() for p in programs)
    # rank 0 is not in the subgroup {1}; each side of a send/recv pair runs its own entry
    assert set(r0["pg_id"]) == {-1, 0, 1} and 2 in set(r1["pg_id"])
    assert len(r1) == len(r0) + 2
    sends = r0[r0["op"] == "send"]
    recvs = r1[r1["op"] == "recv"]
    assert list(sends["occ"]) == list(recvs["occ"])
    # sizes are elements; bytes follow nccl-tests (all_gather: the gathered output)
    ag = r0[r0["op"] == "all_gather"].iloc[0]
    assert (ag["in_elems"], ag["out_elems"], ag["bytes"]) == (256, 512, 512 * 2)


@pytest.mark.parametrize(
    "edit, record_of, field",
    [
        (lambda f: f[0][3].update(dtype="Float"), 3, "dtype"),
        (lambda f: f[1][3].update(markers=["ar0"]), 3, "markers"),
        (lambda f: f[0][3].pop("markers"), 3, "markers"),
        (lambda f: f[0][3].update(world_size=3), 3, "world_size"),
        (lambda f: f[0][4].update(out_msg_size=256), 4, "out_msg_size"),
        (lambda f: f[0][5].update(in_msg_size=65), 5, "in_msg_size"),
        (lambda f: f[0][3].update(pg_id=7), 3, "pg_id"),
        (lambda f: f[0][8].update(root=5), 8, "root"),
        (lambda f: f[0][3].update(startTime_ns=10**12), 4, "startTime_ns"),
        (lambda f: f[0][4].update(markers=["canary:0"]), 4, "markers"),
        (lambda f: f[0][6].pop("in_split"), 6, "in_split"),
        (lambda f: f[0][3].update(in_msg_size=True), 3, "in_msg_size"),
    ],
    ids=[
        "dtype-case", "marker-not-canary", "no-markers", "world-size", "all-gather-out",
        "reduce-scatter-in", "undeclared-pg", "root-not-member", "decreasing-time",
        "duplicate-occ", "all-to-all-splits-key", "bool-size",
    ],
)  # fmt: skip
def test_replay_refuses_a_bad_entry_naming_file_record_and_field(
    tmp_path, capsys, files, edit, record_of, field
):
    edit(files)
    err = refuse(tmp_path, capsys, files)
    assert f"record {record_of}" in err and f"field {field}" in err and ".json" in err


def test_replay_refuses_send_recv_without_use_batch(tmp_path, capsys, files):
    i = _index(files[0], "send")
    del files[0][i]["use_batch"]
    err = refuse(tmp_path, capsys, files)
    assert f"0.json: record {i}: field use_batch" in err


def test_replay_refuses_init_entries_that_differ_between_ranks(tmp_path, capsys, files):
    files[1].insert(3, {"comms": "init", "pg_id": 3, "global_ranks": [0], "world_size": 1})
    err = refuse(tmp_path, capsys, files)
    assert "1.json: record 3: field global_ranks" in err and "identical on every rank" in err


def test_replay_refuses_init_after_the_first_op(tmp_path, capsys, files):
    for f in files:
        f.append(copy.deepcopy(f[0]))
    err = refuse(tmp_path, capsys, files)
    assert f"record {len(files[0]) - 1}: field comms" in err


def test_replay_refuses_a_group_whose_members_disagree_on_an_op(tmp_path, capsys, files):
    files[1][3].update(in_msg_size=2048, out_msg_size=2048)
    err = refuse(tmp_path, capsys, files)
    assert "1.json: record 3: field in_msg_size" in err and "differs from rank 0" in err


def test_replay_refuses_a_send_without_its_recv(tmp_path, capsys, files):
    i = _index(files[1], "recv")
    del files[1][i]  # rank 1 no longer receives what rank 0 sends
    err = refuse(tmp_path, capsys, files)
    assert "0.json" in err and "field comms" in err and "1 sends" in err


def test_replay_refuses_all_to_allv_splits_that_do_not_pair_up(tmp_path, capsys, files):
    i = _index(files[0], "all_to_allv")
    e = files[0][i]
    e["in_split"] = [e["in_split"][0] + 1, e["in_split"][1] - 1]
    err = refuse(tmp_path, capsys, files)
    assert f"0.json: record {i}: field in_split" in err


def test_replay_refuses_a_gap_in_the_rank_files(tmp_path, capsys, files):
    program = write_program(tmp_path / "prog", files)
    (program / "1.json").rename(program / "2.json")
    assert "missing [1]" in refuse_program(tmp_path, capsys, program)


def test_replay_refuses_a_rank_count_that_is_not_nproc_times_nnodes(tmp_path, capsys, files):
    program = write_program(tmp_path / "prog", files)
    assert "2 rank files" in refuse_program(tmp_path, capsys, program, nproc=3)


def test_use_timestamps_refuses_ops_without_start_time(tmp_path, capsys, files):
    for f in files:
        del f[5]["startTime_ns"]
    err = refuse(tmp_path, capsys, files, "--use-timestamps")
    assert "record 5: field startTime_ns" in err


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--physical-config", "nope"], "no physical configuration 'nope'"),
        (["--physical-config", "nccl_ring_simple"], "is for ['nccl'], not 'gloo'"),
        (["--fault", "explode-rank=1"], "field --fault"),
        (["--iters", "0"], "field --iters"),
        (["--nnodes", "2"], "field --rdzv-endpoint"),
    ],
)
def test_replay_refuses_bad_options_before_launching(tmp_path, capsys, files, extra, needle):
    if "--nnodes" in extra:
        files = sample_program(2)  # 2 files but 2 x 2 ranks asked: options checked first
    err = refuse(tmp_path, capsys, files, *extra)
    assert needle in err


def test_nccl_backend_without_cuda_is_refused(tmp_path, capsys, files):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA devices")
    err = refuse(tmp_path, capsys, files, "--backend", "nccl")
    assert "needs CUDA" in err


def test_gloo_refuses_a_dtype_gloo_cannot_reduce(tmp_path, capsys, files):
    for f in files:
        f[3]["dtype"] = "short"
    err = refuse(tmp_path, capsys, files)
    assert "record 3: field dtype" in err and "gloo" in err


def test_param_aliases_are_accepted_as_param_normalises_them(tmp_path, files):
    for f in files:
        f[3]["comms"] = "AllReduce"
        f[4]["comms"] = "all-gather"
    programs = load_program_dir(write_program(tmp_path / "prog", files))
    assert list(programs[0].ops["op"][:2]) == ["all_reduce", "all_gather"]


def test_not_a_json_list_is_refused_with_its_file(tmp_path, capsys, files):
    program = write_program(tmp_path / "prog", files)
    (program / "0.json").write_text(json.dumps({"comms": "all_reduce"}))
    assert "0.json: expected a JSON list" in refuse_program(tmp_path, capsys, program)


def test_attempt_input_record_copies_the_exports_digests(tmp_path, files):
    from tracecanary.canonical import digest_path, sha256_file
    from tracecanary.physical.replay import input_record

    program = write_program(tmp_path / "prog", files)
    assert input_record(program) == {"path": str(program), "digest": digest_path(program)}
    export = {"format": "tracecanary.param-export/v1", "execution": "reduced",
              "source_sha256": "ab" * 32, "world_size": 2, "skipped": []}  # fmt: skip
    (program / "export.json").write_text(json.dumps(export))
    record = input_record(program)
    assert record["export_digest"] == sha256_file(program / "export.json")
    assert record["export_fields"] == {
        "execution": "reduced", "format": "tracecanary.param-export/v1", "source_sha256": "ab" * 32,
    }  # fmt: skip
    assert record["digest"] == digest_path(program)  # the tree digest covers export.json too
