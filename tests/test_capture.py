"""Live capture: ``tracecanary capture --nproc 4`` runs real gloo processes under
torch.profiler; the import of every rank gives every collective a known group (the
group probe makes each group's gloo run-loop threads attributable), ranks agree on
every collective of each group, and send/recv pair as the layout says."""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path

import jsonschema
import pytest

from tracecanary.capture import layout_for
from tracecanary.cli import main
from tracecanary.formats.schemas import load_schema, validate
from tracecanary.kineto import convert, import_kineto_file
from tracecanary.kineto.load import load_kineto

NPROC, STEPS = 4, 3


@pytest.fixture(scope="module")
def capture_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("capture4") / "capture"
    code = main(["capture", "--nproc", str(NPROC), "--steps", str(STEPS), "-o", str(out)])
    assert code == 0
    return out


@pytest.fixture(scope="module")
def imported(capture_dir) -> dict[int, dict]:
    return {r: import_kineto_file(capture_dir / f"rank{r}.json.gz") for r in range(NPROC)}


@pytest.mark.slow
def test_capture_writes_one_trace_per_rank_and_a_valid_capture_record(capture_dir):
    names = sorted(p.name for p in capture_dir.iterdir())
    assert names == ["capture.json"] + [f"rank{r}.json.gz" for r in range(NPROC)]
    doc = json.loads((capture_dir / "capture.json").read_text())
    jsonschema.validate(doc, load_schema("capture"))
    assert doc["settings"]["nproc"] == NPROC and doc["settings"]["steps"] == STEPS
    assert doc["layout"]["groups"] == [
        {"desc": "default_pg", "ranks": [0, 1, 2, 3]},
        {"desc": "tp0", "ranks": [0, 1]},
        {"desc": "tp1", "ranks": [2, 3]},
    ]
    assert doc["layout"]["p2p"] == [[0, 2], [1, 3]]
    assert doc["environment"]["torch"].startswith("2.")
    assert doc["import_check"] == {"collectives": NPROC * (8 + 10 * STEPS), "unknown_groups": 0}
    trace = json.loads(gzip.decompress((capture_dir / "rank2.json.gz").read_bytes()))
    assert trace["distributedInfo"]["rank"] == 2
    assert trace["record_shapes"] == 1


@pytest.mark.slow
def test_import_of_capture_gives_every_collective_a_known_group(imported):
    for rank, doc in imported.items():
        validate(doc, "trace", file=f"rank{rank}")
        tp = "1" if rank < 2 else "2"
        assert {g["id"] for g in doc["groups"]} == {"0", tp}
        assert doc["meta"]["kineto"]["unknown_groups"] == {}
        by_group = Counter((e["op"], e["group"]) for e in doc["events"])
        p2p = ("send", "0") if rank < 2 else ("recv", "0")
        assert by_group == {
            ("all_gather", "0"): 4,  # world group probe
            ("all_gather", tp): 4 + 2 * STEPS,  # tp probe + 2 layers per step
            ("reduce_scatter", tp): 2 * STEPS,
            ("all_reduce", "0"): 4 * STEPS,  # 3 gradient buckets + loss
            ("broadcast", "0"): STEPS,
            p2p: STEPS,
        }
        assert all("latency_ns" in e for e in doc["events"])


@pytest.mark.slow
def test_ranks_agree_per_group_and_point_to_point_pairs(imported):
    per_group: dict[str, dict[int, list]] = defaultdict(dict)
    for rank, doc in imported.items():
        for gid in {g["id"] for g in doc["groups"]}:
            per_group[gid][rank] = [
                (e["op"], e["bytes"], e["dtype"], e.get("root"))
                for e in doc["events"]
                if e["group"] == gid and e["op"] not in ("send", "recv")
            ]
    assert sorted(per_group["0"]) == [0, 1, 2, 3]
    for gid, lists in per_group.items():
        first = next(iter(lists.values()))
        assert all(seq == first for seq in lists.values()), gid
    pairs = Counter()
    for rank, doc in imported.items():
        for e in doc["events"]:
            if e["op"] == "send":
                pairs[(rank, e["peer"], e["bytes"], "send")] += 1
            elif e["op"] == "recv":
                pairs[(e["peer"], rank, e["bytes"], "recv")] += 1
    for src, dst in layout_for(NPROC).p2p:
        size = pairs[(src, dst, 32 * 64 * 4 // 2, "send")]
        assert size == STEPS and pairs[(src, dst, 32 * 64 * 4 // 2, "recv")] == STEPS


@pytest.mark.slow
def test_without_the_group_probe_world_collectives_are_unknown_not_guessed(capture_dir):
    """Drop the probe: the world group's gloo threads then run only all_reduce/broadcast,
    whose shapes say nothing about the group, so their group is unknown (not 'world')."""
    path = capture_dir / "rank0.json.gz"
    doc = load_kineto(path)
    (probe,) = [e for e in doc["traceEvents"] if e.get("name") == "tracecanary.capture:group_probe"]
    lo = float(probe["ts"])
    hi = lo + float(probe["dur"])
    doc["traceEvents"] = [
        e for e in doc["traceEvents"] if not ("ts" in e and lo <= float(e["ts"]) <= hi)
    ]
    out = convert(doc, file="rank0-no-probe")
    validate(out, "trace", file="rank0-no-probe")
    groups = Counter((e["op"], e["group"]) for e in out["events"])
    assert groups[("all_reduce", "unknown:gloo-thread-unattributed")] == 4 * STEPS
    assert groups[("broadcast", "unknown:gloo-thread-unattributed")] == STEPS
    assert groups[("all_gather", "1")] == 2 * STEPS  # tp shapes still pin the tp group
    assert groups[("send", "0")] == STEPS  # peer 2 exists only in the world group
    assert any("Unknown groups" in n for n in out["meta"]["notes"])


def test_capture_refuses_odd_process_counts(tmp_path, run_cli):
    out = tmp_path / "cap"
    code, _, err = run_cli("capture", "--nproc", "3", "--steps", "1", "-o", out)
    assert code == 2 and "--nproc must be an even number" in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_layout_pairs_tensor_parallel_ranks_across_stages():
    assert layout_for(2).p2p == ((0, 1),) and layout_for(2).tp_groups == ()
    lay = layout_for(8)
    assert lay.tp_groups == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert lay.p2p == ((0, 2), (1, 3), (2, 4), (3, 5), (4, 6), (5, 7))
