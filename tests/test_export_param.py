"""PARAM export: layout, sizes in elements, matched p2p, identical inits, refusals."""

from __future__ import annotations

import json

import pytest
from conftest import write_doc

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "int64": 8, "int8": 1}


def _trace(extra_ops=()):
    """4 ranks, one clock: world collectives, a subgroup, p2p, several dtypes."""
    events = []
    seq = {r: 0 for r in range(4)}
    t = {r: 1000 for r in range(4)}

    def add(rank, **e):
        events.append({"rank": rank, "seq": seq[rank], "ts_ns": t[rank], "phase": "decode", **e})
        seq[rank] += 1
        t[rank] += 5000

    for _step in range(2):
        for r in range(4):
            add(r, op="all_reduce", bytes=4096, dtype="float32", group="world")
        for r in range(4):
            add(r, op="all_gather", bytes=1024, dtype="bfloat16", group="world")
        for r in range(4):
            add(r, op="reduce_scatter", bytes=2048, dtype="float16", group="world")
        for r in range(4):
            add(r, op="all_to_all", bytes=512, dtype="int8", group="world")
        for r in range(4):
            add(r, op="broadcast", bytes=64, dtype="int64", group="world", root=0)
        for r in (0, 1):
            add(r, op="all_reduce", bytes=256, dtype="float32", group="tp0")
        add(1, op="send", bytes=128, dtype="float32", group="world", peer=2)
        add(2, op="recv", bytes=128, dtype="float32", group="world", peer=1)
        for op in extra_ops:
            for r in range(4):
                add(r, op=op, bytes=16, dtype="float32", group="world")
    events.sort(key=lambda e: (e["rank"], e["seq"]))
    return {
        "format": "tracecanary.trace/v1",
        "meta": {
            "world_size": 4,
            "source": "test",
            "clock_domains": [{"id": "h", "ranks": [0, 1, 2, 3]}],
        },
        "groups": [
            {"id": "world", "ranks": [0, 1, 2, 3]},
            {"id": "tp0", "start": 0, "stride": 1, "size": 2},
        ],
        "events": events,
    }


def _export(tmp_path, run_cli, doc, *extra):
    src = write_doc(doc, tmp_path / "t.json")
    out = tmp_path / "param"
    code, _, err = run_cli("export-param", src, "-o", out, *extra)
    return code, err, out


def test_export_writes_one_file_per_rank_with_identical_inits_and_entry_counts(tmp_path, run_cli):
    code, err, out = _export(tmp_path, run_cli, _trace())
    assert code == 0, err
    files = {r: json.loads((out / f"{r}.json").read_text()) for r in range(4)}
    inits = [[e for e in f if e["comms"] == "init"] for f in files.values()]
    assert all(i == inits[0] for i in inits) and len(inits[0]) == 2
    assert all(f[: len(inits[0])] == inits[0] for f in files.values())  # inits come first
    ops = {r: [e for e in f if e["comms"] != "init"] for r, f in files.items()}
    # per step: 5 world collectives everywhere, tp0 on ranks 0-1, the p2p pair on ranks 1-2
    assert [len(ops[r]) for r in range(4)] == [2 * 6, 2 * 8, 2 * 7, 2 * 5]
    summary = json.loads((out / "export.json").read_text())
    assert summary["entries_per_rank"] == {"0": 12, "1": 16, "2": 14, "3": 10}
    assert summary["param"]["commit"] == "1e115ff"


def test_export_matches_send_and_recv_on_both_ranks(tmp_path, run_cli):
    code, err, out = _export(tmp_path, run_cli, _trace())
    assert code == 0, err
    for r in (1, 2):
        p2p = [
            e for e in json.loads((out / f"{r}.json").read_text()) if e["comms"] in ("send", "recv")
        ]
        assert [e["comms"] for e in p2p] == ["send", "recv", "send", "recv"]
        assert all(
            e["src_rank"] == 1 and e["dst_rank"] == 2 and e["use_batch"] is False for e in p2p
        )
        assert all(e["in_msg_size"] == 32 for e in p2p)  # 128 bytes of float32


def test_export_sizes_are_elements_of_each_dtype(tmp_path, run_cli):
    code, err, out = _export(tmp_path, run_cli, _trace())
    assert code == 0, err
    entries = {
        e["comms"]: e
        for e in json.loads((out / "0.json").read_text())
        if e["comms"] != "init" and e["world_size"] == 4
    }
    assert (
        entries["all_reduce"]["in_msg_size"] == 4096 // 4
        and entries["all_reduce"]["dtype"] == "float"
    )
    assert (
        entries["all_gather"]["out_msg_size"] == 1024 // 2
        and entries["all_gather"]["in_msg_size"] == 1024 // 2 // 4
    )
    assert (
        entries["reduce_scatter"]["in_msg_size"] == 2048 // 2
        and entries["reduce_scatter"]["out_msg_size"] == 2048 // 2 // 4
    )
    assert entries["all_to_all"]["in_split"] == [] and entries["all_to_all"]["in_msg_size"] == 512
    assert entries["broadcast"]["dtype"] == "long" and entries["broadcast"]["in_msg_size"] == 8


def test_export_timestamps_are_cumulative_and_non_decreasing_with_unique_markers(tmp_path, run_cli):
    code, err, out = _export(tmp_path, run_cli, _trace())
    assert code == 0, err
    for r in range(4):
        ops = [e for e in json.loads((out / f"{r}.json").read_text()) if e["comms"] != "init"]
        ts = [e["startTime_ns"] for e in ops]
        assert ts == sorted(ts) and ts[0] == 0
        markers = [e["markers"][0] for e in ops if e["comms"] != "recv"]
        assert len(markers) == len(set(markers)) and all(m.startswith("canary:") for m in markers)


def test_export_refuses_custom_op_and_leaves_no_files(tmp_path, run_cli):
    code, err, out = _export(tmp_path, run_cli, _trace(extra_ops=("custom:moe_dispatch",)))
    assert code == 2
    assert "custom:moe_dispatch" in err and "occurrence" in err and "t.json" in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_export_skip_unsupported_lists_every_skipped_occurrence(tmp_path, run_cli):
    code, err, out = _export(
        tmp_path, run_cli, _trace(extra_ops=("custom:moe_dispatch",)), "--skip-unsupported"
    )
    assert code == 0, err
    summary = json.loads((out / "export.json").read_text())
    assert len(summary["skipped"]) == 2 and {s["op"] for s in summary["skipped"]} == {
        "custom:moe_dispatch"
    }
    assert all("custom" not in e["comms"] for e in json.loads((out / "0.json").read_text()))


@pytest.mark.parametrize("nbytes", [4095])
def test_export_refuses_sizes_that_are_not_whole_elements(tmp_path, run_cli, nbytes):
    doc = _trace()
    for e in doc["events"]:
        if e["op"] == "all_reduce" and e["group"] == "world":
            e["bytes"] = nbytes
    code, err, out = _export(tmp_path, run_cli, doc)
    assert code == 2 and "field bytes" in err and not out.exists()


@pytest.mark.parametrize("target", ["tracecanary", "param-1e115ff"])
def test_a_program_held_as_columns_exports_the_bytes_of_its_table_form(tmp_path, target):
    """export_param reads the Program through its accessors: a canary's expansion (column
    arrays, no pandas) and the same program as DataFrames write identical files."""
    from column_form import held_as_columns

    from tracecanary.load import load_program
    from tracecanary.param.export import export_param

    src = write_doc(_trace(), tmp_path / "t.json")
    program = load_program(src)
    program.occurrences, program.members  # noqa: B018 - build the DataFrame form
    assert not program.holds_columns
    outputs = []
    for name, form in (("tables", program), ("columns", held_as_columns(program))):
        out = tmp_path / name
        export_param(form, out, execution="full", source_digest=None, target=target,
                     skip_unsupported=True)  # fmt: skip
        outputs.append({p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert outputs[0] == outputs[1] and len(outputs[0]) == 5  # 4 ranks and export.json
