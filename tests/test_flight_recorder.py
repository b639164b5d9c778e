"""Flight Recorder import: real torch 2.13 gloo dumps (tests/data/flight_recorder/, made
by its program.py: 2 ranks, JSON and pickle forms of one run), their refusals, the
plain-data pickle reader against malicious pickles, and the CLI from dumps to a searched,
verified canary."""

from __future__ import annotations

import copy
import json
import os
import pickle
import shutil
from pathlib import Path

import pytest

from tracecanary.flightrec.importer import import_dumps
from tracecanary.formats.schemas import validate

DATA = Path(__file__).parent / "data" / "flight_recorder"
JSON_DUMPS = [DATA / "rank0.json", DATA / "rank1.json"]
PICKLE_DUMPS = [DATA / "rank0.pkl", DATA / "rank1.pkl"]


def _entries_of(path: Path) -> dict:
    return json.loads(path.read_text())


def _write_set(tmp_path: Path, rank0: dict | None = None, rank1: dict | None = None) -> list:
    """Both JSON dumps in ``tmp_path/dumps``, either replaced by a changed document."""
    folder = tmp_path / "dumps"
    folder.mkdir()
    paths = []
    for rank, doc in ((0, rank0), (1, rank1)):
        path = folder / f"rank{rank}.json"
        if doc is None:
            shutil.copy(JSON_DUMPS[rank], path)
        else:
            path.write_text(json.dumps(doc))
        paths.append(path)
    return paths


def _refused(run_cli, tmp_path, paths, *extra) -> str:
    out = tmp_path / "imported"
    code, stdout, err = run_cli("import-flight-recorder", *paths, "-o", out, *extra)
    assert code == 2, (stdout, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
    return err


# --- what the import makes of real gloo dumps ----------------------------------------


def _search_verifies(merged, tmp_path, run_cli) -> None:
    """``tracecanary search`` of a merged import ends in a verified canary."""
    verification = tmp_path / "verification.json"
    code, _, err = run_cli(
        "search", merged, "-o", tmp_path / "canary.json", "--log", tmp_path / "log.json",
        "--verification", verification,
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(verification.read_text())["claim"] == "verified"


def test_gloo_dumps_import_ops_bytes_dtypes_and_groups():
    docs = import_dumps(JSON_DUMPS, declared_root=0, declared_even_all_to_all=True)
    for rank, doc in enumerate(docs):
        validate(doc, "trace", file=f"rank{rank}")
        got = [(e["op"], e["bytes"], e["dtype"], e["group"]) for e in doc["events"]]
        assert got == [
            ("all_reduce", 32, "float32", "0"),
            ("broadcast", 32, "int64", "0"),
            ("all_gather", 64, "float32", "0"),  # output bytes
            ("all_reduce", 32, "float32", "0"),  # reduce_scatter_tensor: gloo records all_reduce
            ("all_reduce", 6, "bfloat16", "1"),
            ("barrier", 0, "uint8", "0"),
            ("all_reduce", 8, "float32", "0"),
            ("all_to_all", 16, "float32", "0"),
            ("all_gather", 16, "float32", "0"),
            ("reduce", 8, "float32", "0"),
            ("custom:scatter", 8, "float32", "0"),
            ("custom:gather", 8, "float32", "0"),
            ("barrier", 0, "uint8", "0"),
        ]
        assert [e["seq"] for e in doc["events"]] == list(range(13))
        assert doc["groups"] == [
            {"id": "0", "ranks": [0, 1], "description": "default_pg"},
            {"id": "1", "ranks": [0, 1], "description": "pair"},
        ]
        assert doc["meta"]["flight_recorder"]["membership"] == "entries"


def test_gloo_import_keeps_issue_times_and_invents_no_latency():
    dump = _entries_of(JSON_DUMPS[1])
    doc = import_dumps(JSON_DUMPS, declared_root=0, declared_even_all_to_all=True)[1]
    assert [e["ts_ns"] for e in doc["events"]] == [e["time_created_ns"] for e in dump["entries"]]
    for event in doc["events"]:
        assert not {"latency_ns", "arrival_ns", "overlap_ns"} & set(event)
        assert event["stream"] == f"gloo:pg:{event['group']}"
    assert "skew" not in doc["meta"]
    assert any("latency is unknown" in n for n in doc["meta"]["notes"])


def test_declared_root_is_the_group_rank_and_said_to_be_declared():
    doc = import_dumps(JSON_DUMPS, declared_root=1, declared_even_all_to_all=True)[0]
    assert {e["root"] for e in doc["events"] if e["op"] in ("broadcast", "reduce")} == {1}
    assert any(n.startswith("Roots declared, not recorded") for n in doc["meta"]["notes"])
    assert doc["meta"]["flight_recorder"]["declared_root"] == 1


def test_pickle_and_json_forms_of_one_run_import_to_the_same_events():
    from_json = import_dumps(JSON_DUMPS, declared_root=0, declared_even_all_to_all=True)
    from_pickle = import_dumps(PICKLE_DUMPS, declared_root=0, declared_even_all_to_all=True)
    for a, b in zip(from_json, from_pickle, strict=True):
        assert a["events"] == b["events"]
        assert a["groups"] == b["groups"]
        assert b["meta"]["flight_recorder"]["form"] == "pickle"


def test_cli_import_merge_search_verifies(run_cli, tmp_path):
    from tracecanary.kineto.sources import write_same_host_calibration

    out = tmp_path / "imported"
    code, stdout, err = run_cli(
        "import-flight-recorder",
        *PICKLE_DUMPS,
        "-o",
        out,
        "--declare-root",
        "0",
        "--declare-even-all-to-all",
    )
    assert code == 0, err
    assert "rank 1, 13 collectives, 0 timed, membership from entries" in stdout
    clocks = tmp_path / "clocks.json"
    write_same_host_calibration(out, clocks)  # both ranks ran on this host
    merged = tmp_path / "merged.json"
    ranks = [out / "rank0.json", out / "rank1.json"]
    code, _, err = run_cli("merge", *ranks, "--calibration", clocks, "-o", merged)
    assert code == 0, err
    assert "into 13 collectives; skew known" in err
    _search_verifies(merged, tmp_path, run_cli)


def _with_pg_config(doc: dict, ranks: str = "[0, 1]") -> dict:
    """The dump with pg_config as NCCL writes it (torch 2.13's FlightRecorder.hpp and
    torchfrtrace's reader: {pg_name: {name, desc, ranks as text}}); gloo writes none."""
    doc = copy.deepcopy(doc)
    doc["pg_config"] = {
        "0": {"name": "0", "desc": "default_pg", "ranks": ranks},
        "1": {"name": "1", "desc": "pair", "ranks": "[0, 1]"},
    }
    return doc


def test_membership_comes_from_pg_config_where_the_dump_has_one(tmp_path):
    docs = [_with_pg_config(_entries_of(p)) for p in JSON_DUMPS]
    imported = import_dumps(
        _write_set(tmp_path, *docs), declared_root=0, declared_even_all_to_all=True
    )
    assert imported[0]["meta"]["flight_recorder"]["membership"] == "pg_config"
    assert imported[0]["groups"][1] == {"id": "1", "ranks": [0, 1], "description": "pair"}


def test_recorded_durations_become_latency_and_only_those(tmp_path):
    doc0, doc1 = (_entries_of(p) for p in JSON_DUMPS)
    doc0["entries"][0]["duration_ms"] = 0.25  # what NCCL writes with timing enabled
    imported = import_dumps(
        _write_set(tmp_path, doc0, doc1), declared_root=0, declared_even_all_to_all=True
    )
    events = imported[0]["events"]
    assert events[0]["latency_ns"] == 250_000
    assert not any("latency_ns" in e for e in events[1:])
    assert imported[0]["meta"]["flight_recorder"]["latency_events"] == 1


def test_refuses_a_rank_pg_config_names_without_a_dump(run_cli, tmp_path):
    docs = [_with_pg_config(_entries_of(p), ranks="[0, 1, 2]") for p in JSON_DUMPS]
    err = _refused(
        run_cli,
        tmp_path,
        _write_set(tmp_path, *docs),
        "--declare-root",
        "0",
        "--declare-even-all-to-all",
    )
    assert "field pg_config.0.ranks: rank 2: no dump" in err


def test_refuses_dumps_whose_pg_config_disagree(run_cli, tmp_path):
    doc0 = _with_pg_config(_entries_of(JSON_DUMPS[0]))
    doc1 = _with_pg_config(_entries_of(JSON_DUMPS[1]))
    doc1["pg_config"]["1"]["desc"] = "other"
    err = _refused(
        run_cli,
        tmp_path,
        _write_set(tmp_path, doc0, doc1),
        "--declare-root",
        "0",
        "--declare-even-all-to-all",
    )
    assert "rank1.json: field pg_config.1: group '1' is 'other' [0, 1] here" in err
    assert "different runs" in err


# --- refusals: exit 2, one line naming file, record and field, nothing written ----------


def test_refuses_a_missing_rank(run_cli, tmp_path):
    err = _refused(run_cli, tmp_path, [JSON_DUMPS[0]], "--world-size", "2")
    assert "rank 1: no dump" in err


def test_refuses_a_gap_in_the_ranks_of_the_dumps(run_cli, tmp_path):
    rank2 = tmp_path / "rank2.json"
    shutil.copy(JSON_DUMPS[1], rank2)
    err = _refused(run_cli, tmp_path, [JSON_DUMPS[0], rank2])
    assert "rank 1: no dump (1 of 3 ranks missing: 1)" in err


def test_refuses_a_rank_number_beyond_the_rank_limit_before_listing_ranks(run_cli, tmp_path):
    far = tmp_path / "rank99999999999.json"
    shutil.copy(JSON_DUMPS[0], far)
    assert "over max_ranks=65536" in _refused(run_cli, tmp_path, [far])


def test_refuses_a_dump_beyond_the_declared_world(run_cli, tmp_path):
    err = _refused(run_cli, tmp_path, JSON_DUMPS, "--world-size", "1")
    assert "rank1.json: rank 1 is outside a world of 1 ranks (--world-size)" in err


def test_refuses_two_dumps_of_one_rank(run_cli, tmp_path):
    other = tmp_path / "again" / "rank0.json"
    other.parent.mkdir()
    shutil.copy(JSON_DUMPS[0], other)
    err = _refused(run_cli, tmp_path, [JSON_DUMPS[0], other])
    assert "rank 0 is also the rank of" in err


def test_refuses_a_file_name_without_a_rank(run_cli, tmp_path):
    path = tmp_path / "dump.json"
    shutil.copy(JSON_DUMPS[0], path)
    assert "does not end in a rank number" in _refused(run_cli, tmp_path, [path])


def test_refuses_dumps_of_different_torch_versions(run_cli, tmp_path):
    doc = _entries_of(JSON_DUMPS[1])
    doc["version"] = "2.9"
    err = _refused(run_cli, tmp_path, _write_set(tmp_path, rank1=doc))
    assert "rank1.json: field version: '2.9' here but '2.10'" in err
    assert "different runs" in err


def test_refuses_a_collective_that_differs_between_members(run_cli, tmp_path):
    doc = _entries_of(JSON_DUMPS[1])
    doc["entries"][2]["input_dtypes"] = ["Double"]
    doc["entries"][2]["output_dtypes"] = ["Double"]
    err = _refused(
        run_cli,
        tmp_path,
        _write_set(tmp_path, rank1=doc),
        "--declare-root",
        "0",
        "--declare-even-all-to-all",
    )
    assert "record 2: field input_dtypes: group '0' collective_seq_id 3" in err
    assert "different runs" in err


def test_refuses_members_that_recorded_different_numbers_of_collectives(run_cli, tmp_path):
    doc = _entries_of(JSON_DUMPS[1])
    del doc["entries"][-1]  # the closing barrier: in flight when the dump was taken
    err = _refused(
        run_cli,
        tmp_path,
        _write_set(tmp_path, rank1=doc),
        "--declare-root",
        "0",
        "--declare-even-all-to-all",
    )
    assert "rank1.json: record 11: field collective_seq_id: group '0': this rank recorded 11" in err


def test_refuses_a_wrapped_ring_buffer_naming_the_buffer_size(run_cli, tmp_path):
    doc = _entries_of(JSON_DUMPS[0])
    del doc["entries"][:2]  # what a buffer of 11 entries keeps of 13 records
    err = _refused(run_cli, tmp_path, _write_set(tmp_path, rank0=doc))
    assert "rank0.json: record 0: field record_id: the first record is record_id 2" in err
    assert "TORCH_FR_BUFFER_SIZE" in err


def test_refuses_an_operation_the_recorder_did_not_record(run_cli, tmp_path):
    # torch 2.13 gloo counts a send/recv in op_id but records no entry for it
    doc = _entries_of(JSON_DUMPS[0])
    for entry in doc["entries"][5:]:
        entry["op_id"] += 1
    err = _refused(run_cli, tmp_path, _write_set(tmp_path, rank0=doc))
    assert "record 5: field op_id: group '0' op_id 6 follows op_id 4" in err
    assert "records no send/recv" in err


def test_refuses_an_unknown_op(run_cli, tmp_path):
    doc = _entries_of(JSON_DUMPS[0])
    doc["entries"][0]["profiling_name"] = "gloo:frobnicate"
    err = _refused(run_cli, tmp_path, _write_set(tmp_path, rank0=doc))
    assert "record 0: field profiling_name: unknown op 'gloo:frobnicate'" in err


def test_refuses_point_to_point_records(run_cli, tmp_path):
    doc = _entries_of(JSON_DUMPS[0])
    doc["entries"][0]["is_p2p"] = True
    err = _refused(run_cli, tmp_path, _write_set(tmp_path, rank0=doc))
    assert "record 0: field is_p2p: point-to-point record" in err


def test_refuses_an_uneven_all_to_all(run_cli, tmp_path):
    doc = _entries_of(JSON_DUMPS[0])
    assert doc["entries"][7]["profiling_name"] == "gloo:all_to_all"
    doc["entries"][7]["output_sizes"] = [[6]]
    err = _refused(run_cli, tmp_path, _write_set(tmp_path, rank0=doc))
    assert "record 7: field output_sizes: uneven all_to_all" in err


def test_refuses_an_all_to_all_without_declared_even_splits(run_cli, tmp_path):
    # torch 2.13 gloo records an uneven all_to_all_single with equal totals as [[n]] -> [[n]]
    err = _refused(run_cli, tmp_path, JSON_DUMPS, "--declare-root", "0")
    assert "rank0.json: record 7: field input_sizes: all_to_all: a dump records no split" in err
    assert "--declare-even-all-to-all" in err


def test_declared_even_splits_are_said_to_be_declared():
    doc = import_dumps(JSON_DUMPS, declared_root=0, declared_even_all_to_all=True)[0]
    assert any(n.startswith("Even splits declared, not recorded") for n in doc["meta"]["notes"])
    assert doc["meta"]["flight_recorder"]["declared_even_all_to_all"] is True


def test_refuses_a_broadcast_without_a_declared_root(run_cli, tmp_path):
    err = _refused(run_cli, tmp_path, JSON_DUMPS, "--declare-even-all-to-all")
    assert "rank0.json: record 1: field profiling_name: broadcast: a Flight Recorder" in err
    assert "--declare-root" in err


def test_refuses_malformed_json(run_cli, tmp_path):
    text = JSON_DUMPS[0].read_text()
    paths = _write_set(tmp_path)
    paths[0].write_text(text[: len(text) // 2])
    assert "rank0.json: not valid JSON" in _refused(run_cli, tmp_path, paths)


def test_refuses_an_entry_without_a_field(run_cli, tmp_path):
    doc = _entries_of(JSON_DUMPS[0])
    del doc["entries"][3]["collective_seq_id"]
    err = _refused(run_cli, tmp_path, _write_set(tmp_path, rank0=doc))
    assert "record 3: field collective_seq_id: required field missing" in err


# --- pickles: plain data only, nothing executed ---------------------------------------


class _Touch:
    """Unpickling this calls os.system, which would create ``target``."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self):
        return (os.system, (f"touch {self.target}",))


def _dump_with(value) -> dict:
    doc = pickle.loads(PICKLE_DUMPS[0].read_bytes())
    doc = copy.deepcopy(doc)
    doc["entries"][0]["profiling_name"] = value
    return doc


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_malicious_pickle_is_refused_and_nothing_runs(run_cli, tmp_path, protocol):
    target = tmp_path / "pwned"
    folder = tmp_path / "dumps"
    folder.mkdir()
    (folder / "rank0.pkl").write_bytes(pickle.dumps(_dump_with(_Touch(target)), protocol))
    shutil.copy(PICKLE_DUMPS[1], folder / "rank1.pkl")
    # the same bytes do run code under pickle.load, which is what the test guards against
    assert not target.exists()
    err = _refused(run_cli, tmp_path, [folder / "rank0.pkl", folder / "rank1.pkl"])
    assert "rank0.pkl: field pickle: pickle opcode" in err
    assert "would resolve or call code" in err and "nothing was executed" in err
    assert not target.exists()
    if protocol == 0:
        assert "GLOBAL (posix.system)" in err


def test_pickle_load_of_the_malicious_file_would_have_run_it(tmp_path):
    target = tmp_path / "pwned"
    pickle.loads(pickle.dumps(_dump_with(_Touch(target))))
    assert target.exists()  # the danger is real: the reader above must not do this


def test_the_unpickler_alone_resolves_no_callable_either(tmp_path):
    # the second fence, without the opcode scan in front of it
    import io

    from tracecanary.flightrec.plain_pickle import PlainUnpickler

    target = tmp_path / "pwned"
    data = pickle.dumps(_Touch(target), 4)
    with pytest.raises(pickle.UnpicklingError, match="refused to resolve"):
        PlainUnpickler(io.BytesIO(data)).load()
    assert not target.exists()


def test_pickle_holding_a_set_is_refused(run_cli, tmp_path):
    folder = tmp_path / "dumps"
    folder.mkdir()
    (folder / "rank0.pkl").write_bytes(pickle.dumps(_dump_with({"gloo:all_reduce"}), 4))
    shutil.copy(PICKLE_DUMPS[1], folder / "rank1.pkl")
    err = _refused(run_cli, tmp_path, [folder / "rank0.pkl", folder / "rank1.pkl"])
    assert "opcode EMPTY_SET" in err and "builds something other than plain data" in err


def test_pickle_whose_shared_references_expand_beyond_its_size_is_refused(run_cli, tmp_path):
    value: list = []
    for _ in range(40):  # 40 levels of a list holding the one below twice: 2**40 leaves
        value = [value, value]
    folder = tmp_path / "dumps"
    folder.mkdir()
    (folder / "rank0.pkl").write_bytes(pickle.dumps(_dump_with(value), 4))
    shutil.copy(PICKLE_DUMPS[1], folder / "rank1.pkl")
    err = _refused(run_cli, tmp_path, [folder / "rank0.pkl", folder / "rank1.pkl"])
    assert "expands to more values than its size allows" in err


def test_pickle_writing_a_far_memo_slot_is_refused_before_unpickling(run_cli, tmp_path):
    # PROTO 2, EMPTY_DICT, LONG_BINPUT 2**32-1 (the unpickler would size its memo to it), STOP
    folder = tmp_path / "dumps"
    folder.mkdir()
    (folder / "rank0.pkl").write_bytes(b"\x80\x02}r\xff\xff\xff\xff.")
    shutil.copy(PICKLE_DUMPS[1], folder / "rank1.pkl")
    err = _refused(run_cli, tmp_path, [folder / "rank0.pkl", folder / "rank1.pkl"])
    assert "LONG_BINPUT at byte 3 writes memo slot 4294967295 after 0 slots" in err


def test_truncated_pickle_is_refused(run_cli, tmp_path):
    folder = tmp_path / "dumps"
    folder.mkdir()
    data = PICKLE_DUMPS[0].read_bytes()
    (folder / "rank0.pkl").write_bytes(data[: len(data) // 2])
    shutil.copy(PICKLE_DUMPS[1], folder / "rank1.pkl")
    err = _refused(run_cli, tmp_path, [folder / "rank0.pkl", folder / "rank1.pkl"])
    assert "rank0.pkl: field pickle: not a valid pickle" in err


# --- a zoo program run live with the recorder on --------------------------------------


@pytest.mark.slow
def test_zoo_ddp_dumps_its_recorder_and_the_dumps_import_merge_and_search(run_cli, tmp_path):
    from tracecanary.kineto.sources import write_same_host_calibration
    from tracecanary.zoo.flight_recorder import record_flight_recorder

    dumps = tmp_path / "dumps"
    record_flight_recorder("ddp", dumps, nproc=2, steps=3)
    pickles = [dumps / "rank0.pkl", dumps / "rank1.pkl"]
    # DDP's set-up broadcasts the module state from rank 0, the only root it uses
    out = tmp_path / "imported"
    code, stdout, err = run_cli(
        "import-flight-recorder", *pickles, "-o", out, "--declare-root", "0"
    )
    assert code == 0, err
    jsons = import_dumps([dumps / "rank0.json", dumps / "rank1.json"], declared_root=0)
    for rank, doc in enumerate(jsons):
        imported = json.loads((out / f"rank{rank}.json").read_text())
        assert imported["events"] == doc["events"]
        ops = imported["meta"]["flight_recorder"]["ops"]
        assert ops["all_reduce"] >= 3  # at least one gradient bucket per step
        assert ops["broadcast"] >= 1
    clocks = tmp_path / "clocks.json"
    write_same_host_calibration(out, clocks)
    merged = tmp_path / "merged.json"
    code, _, err = run_cli(
        "merge", out / "rank0.json", out / "rank1.json", "--calibration", clocks, "-o", merged
    )
    assert code == 0, err
    _search_verifies(merged, tmp_path, run_cli)
