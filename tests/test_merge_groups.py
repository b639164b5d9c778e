"""Process groups of ordinary gloo programs, from the traces' own evidence, with no change
to the user's code: a sequence-parallel TP x DP program built with ``new_group`` (with a
scatter whose non-root members record no dtype) and a DeviceMesh 2x2 program with DTensor
``parallelize_module`` on "tp" and FSDP2 ``fully_shard`` on "dp" are captured here (4
gloo ranks, torch.profiler), imported, and merged with every collective's group known;
merge refuses what the evidence does not determine and an incomplete capture set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gloo_programs import (
    DP_GROUPS,
    DP_SCATTER_CHUNK,
    STEPS,
    TP_GROUPS,
    capture_program,
    import_all,
    write_same_host,
)

from tracecanary.canonical import write_json
from tracecanary.kineto.evidence import gloo_stream
from tracecanary.trace_io import write_trace

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tp_dp(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("tp_dp")
    imports = import_all(capture_program("tp_dp", base / "capture"), base)
    return {"imports": imports, "calibration": write_same_host(base / "clocks.json"), "base": base}


@pytest.fixture(scope="module")
def fsdp2_tp(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("fsdp2_tp")
    imports = import_all(capture_program("fsdp2_tp", base / "capture"), base)
    return {"imports": imports, "calibration": write_same_host(base / "clocks.json"), "base": base}


def _groups_of(merged: Path) -> tuple[dict[str, list[int]], list[dict]]:
    doc = json.loads(merged.read_text())
    return {g["id"]: g["ranks"] for g in doc["groups"]}, doc


def test_tp_dp_program_merges_with_every_group_known_from_the_traces(tp_dp, run_cli):
    for path in tp_dp["imports"]:  # one rank's trace cannot tell its subgroups apart
        doc = json.loads(path.read_text())
        assert doc["meta"]["kineto"]["unknown_groups"]
        assert doc["meta"]["kineto"]["pg_evidence"]
    out = tp_dp["base"] / "merged.json"
    code, _, err = run_cli(
        "merge", *tp_dp["imports"], "--calibration", tp_dp["calibration"], "-o", out
    )
    assert code == 0, err
    groups, doc = _groups_of(out)
    assert not any(e["group"].startswith("unknown:") for e in doc["events"])
    for e in doc["events"]:
        members = groups[e["group"]]
        if e["op"] in ("reduce_scatter", "all_gather"):  # the sequence-parallel TP pair
            assert members in TP_GROUPS, e
        else:  # the gradient all_reduce and the scatter
            assert e["op"] in ("all_reduce", "custom:scatter"), e
            assert members in DP_GROUPS, e
        assert e["rank"] in members
        assert e["stream"] == gloo_stream(e["group"]), e  # the stream follows the resolution
    assert {e["op"] for e in doc["events"]} == {
        "reduce_scatter",
        "all_gather",
        "all_reduce",
        "custom:scatter",
    }
    notes = " ".join(doc["meta"]["notes"])
    assert "resolved at merge by cross-rank matching" in notes


def test_non_root_scatter_dtype_is_filled_from_its_collective(tp_dp, run_cli):
    non_root = [json.loads(p.read_text()) for p in tp_dp["imports"]][2]  # rank 2: DP non-root
    unfilled = non_root["meta"]["kineto"]["unfilled"]
    assert len(unfilled) == STEPS and {u["elements"] for u in unfilled} == {DP_SCATTER_CHUNK}
    out = tp_dp["base"] / "merged-fill.json"
    assert (
        run_cli("merge", *tp_dp["imports"], "--calibration", tp_dp["calibration"], "-o", out)[0]
        == 0
    )
    _, doc = _groups_of(out)
    scatters = [e for e in doc["events"] if e["op"] == "custom:scatter"]
    chunk_bytes = DP_SCATTER_CHUNK * 4  # float32
    assert {(e["rank"], e["dtype"], e["bytes"]) for e in scatters} == {
        (rank, "float32", chunk_bytes) for rank in range(4)
    }
    assert "taken from the other members of the same matched collective" in " ".join(
        doc["meta"]["notes"]
    )


def _without_thread_evidence(paths: list[Path], out: Path) -> list[Path]:
    """The same imports with the thread ids taken out of every identity's name (as if
    the trace named threads without numbers): without thread order and counts, and
    without a calibration, sequences alone cannot tell the DP gradient all_reduce (which
    records no group size) from a world one."""
    written = []
    for path in paths:
        doc = json.loads(path.read_text())
        evidence = doc["meta"]["kineto"]["pg_evidence"]
        renamed = {f"call:{entry['seq'][0]}": entry for entry in evidence.values()}
        doc["meta"]["kineto"]["pg_evidence"] = renamed
        written.append(out / path.name)
        write_trace(doc, written[-1])
    return written


def test_merge_refuses_groups_the_evidence_leaves_open_naming_rank_identity_candidates(
    tp_dp, run_cli
):
    base = tp_dp["base"] / "nothreads"
    base.mkdir()
    imports = _without_thread_evidence(tp_dp["imports"], base)
    out = base / "refused.json"
    code, _, err = run_cli("merge", *imports, "-o", out)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "rank 0" in err and "call:" in err and "candidates [" in err
    assert "is not determined by the traces" in err and "--groups" in err
    assert not out.exists()


def test_groups_mapping_settles_what_the_evidence_cannot(tp_dp, run_cli):
    resolved = tp_dp["base"] / "reference.json"
    run_cli("merge", *tp_dp["imports"], "--calibration", tp_dp["calibration"], "-o", resolved)
    _, reference = _groups_of(resolved)
    group_of = {(e["rank"], e["seq"]): e["group"] for e in reference["events"]}
    assignments = []
    for path in tp_dp["imports"]:
        doc = json.loads(path.read_text())
        rank = doc["events"][0]["rank"]
        for identity, entry in doc["meta"]["kineto"]["pg_evidence"].items():
            group = group_of[(rank, entry["seq"][0])]
            assignments.append({"rank": rank, "identity": identity, "group": group})
    mapping = tp_dp["base"] / "groups.json"
    write_json(mapping, {"format": "tracecanary.groups/v1", "assignments": assignments})
    out = tp_dp["base"] / "mapped.json"
    code, _, err = run_cli("merge", *tp_dp["imports"], "--groups", mapping, "-o", out)
    assert code == 0, err
    _, doc = _groups_of(out)
    assert {(e["rank"], e["seq"]): e["group"] for e in doc["events"]} == group_of
    out.unlink()

    first = next(a for a in assignments if a["rank"] == 0)
    outside = dict(first, group="2")  # group 2 is TP {2, 3}: not a group of rank 0
    write_json(mapping, {"format": "tracecanary.groups/v1", "assignments": [outside]})
    code, _, err = run_cli("merge", *tp_dp["imports"], "--groups", mapping, "-o", out)
    assert code == 2 and "groups.json" in err and "fit only" in err
    contradicting = dict(first, group="0" if first["group"] != "0" else "1")
    write_json(mapping, {"format": "tracecanary.groups/v1", "assignments": [contradicting]})
    code, _, err = run_cli("merge", *tp_dp["imports"], "--groups", mapping, "-o", out)
    assert code == 2 and len(err.strip().splitlines()) == 1 and not out.exists()


def test_merge_refuses_three_of_four_ranks_naming_rank_3(tp_dp, run_cli):
    out = tp_dp["base"] / "three.json"
    code, _, err = run_cli(
        "merge", *tp_dp["imports"][:3], "--calibration", tp_dp["calibration"], "-o", out
    )
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "rank 3: no capture" in err
    assert not out.exists()


def test_fsdp2_tp_device_mesh_program_merges_with_every_group_known(fsdp2_tp, run_cli):
    out = fsdp2_tp["base"] / "merged.json"
    code, _, err = run_cli(
        "merge", *fsdp2_tp["imports"], "--calibration", fsdp2_tp["calibration"], "-o", out
    )
    assert code == 0, err
    groups, doc = _groups_of(out)
    for e in doc["events"]:
        members = groups[e["group"]]
        if e["op"] in ("all_gather", "reduce_scatter"):  # FSDP2 over the "dp" mesh dim
            assert members in DP_GROUPS, e
        else:  # RowwiseParallel output all_reduce over "tp"
            assert e["op"] == "all_reduce" and members in TP_GROUPS, e
    assert {e["op"] for e in doc["events"]} == {"all_gather", "reduce_scatter", "all_reduce"}
