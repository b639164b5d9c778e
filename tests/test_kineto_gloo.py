"""Kineto import of gloo CPU traces made here by a real 2-process torch.distributed run
(``tracecanary capture --nproc 2``): torch 2.13 writes no record_param_comms for gloo,
so op names come from the c10d op, sizes from its recorded shapes, dtypes and timing
from the gloo work annotation."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tracecanary.cli import main
from tracecanary.formats.schemas import validate
from tracecanary.kineto import import_kineto_file
from tracecanary.kineto.evidence import GLOO_THREADS_PER_GROUP, GROUP_THREADS_KEY, gloo_stream

pytestmark = pytest.mark.slow

STEPS = 2
SEQ, HIDDEN = 32, 64


@pytest.fixture(scope="module")
def capture_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gloo2") / "capture"
    code = main(["capture", "--nproc", "2", "--steps", str(STEPS), "-o", str(out)])
    assert code == 0
    return out


@pytest.fixture(scope="module")
def imported(capture_dir) -> dict[int, dict]:
    return {r: import_kineto_file(capture_dir / f"rank{r}.json.gz") for r in (0, 1)}


def test_gloo_import_counts_dtypes_and_sizes(imported):
    # per step: broadcast, 2 layers x (all_gather + reduce_scatter), 3 gradient buckets
    # + loss all_reduce, one pipeline hand-off; plus 2x2 probe all_gathers
    for rank, doc in imported.items():
        validate(doc, "trace", file=f"rank{rank}")
        kinds = Counter(e["op"] for e in doc["events"])
        p2p = "send" if rank == 0 else "recv"
        assert kinds == {
            "all_gather": 4 + 2 * STEPS,
            "reduce_scatter": 2 * STEPS,
            "all_reduce": 4 * STEPS,
            "broadcast": STEPS,
            p2p: STEPS,
        }
        assert {e["dtype"] for e in doc["events"] if e["op"] == "broadcast"} == {"int64"}
        assert {e["dtype"] for e in doc["events"] if e["op"] != "broadcast"} == {"float32"}
        sizes = {(e["op"], e["bytes"]) for e in doc["events"]}
        full = SEQ * HIDDEN * 4
        assert ("all_gather", full) in sizes  # output bytes of all_gather_single
        assert ("reduce_scatter", full) in sizes  # input bytes of reduce_scatter_single
        assert ("broadcast", SEQ * 8) in sizes
        assert (p2p, full // 2) in sizes
        assert {b for op, b in sizes if op == "all_reduce"} == {
            HIDDEN * HIDDEN * 4,
            (2 * HIDDEN) ** 2 * 4,
            3 * HIDDEN * 4,
            4,
        }


def test_gloo_import_groups_peers_roots_and_latency(imported):
    for rank, doc in imported.items():
        assert doc["groups"] == [{"id": "0", "ranks": [0, 1], "description": "default_pg"}]
        assert {e["group"] for e in doc["events"]} == {"0"}
        for e in doc["events"]:
            assert e["latency_ns"] > 0 and e["stream"] == gloo_stream(e["group"])
            if e["op"] == "broadcast":
                assert e["root"] == 0
        peers = {e["peer"] for e in doc["events"] if e["op"] in ("send", "recv")}
        assert peers == {1 - rank}
        kineto = doc["meta"]["kineto"]
        assert kineto["era"].startswith("gloo")
        assert kineto["latency_measured"]["gloo_work"] == len(doc["events"])
        assert kineto["gloo_work_unpaired"] == 0
        # the run-loop threads stay as group evidence, outside the structure
        threads = kineto[GROUP_THREADS_KEY]["0"]
        assert 1 <= len(threads) <= GLOO_THREADS_PER_GROUP
        notes = " ".join(doc["meta"]["notes"])
        assert "observational and single-rank" in notes
        assert "gloo work duration" in notes
        assert "every collective's process group is known" in notes


def test_gloo_ranks_agree_on_every_collective(imported):
    """What merge needs: both ranks list the same collectives in the same order."""
    seqs = {
        r: [
            (e["op"], e["bytes"], e["dtype"])
            for e in doc["events"]
            if e["op"] not in ("send", "recv")
        ]
        for r, doc in imported.items()
    }
    assert seqs[0] == seqs[1]
    ts = [e["ts_ns"] for e in imported[0]["events"]]
    assert ts == sorted(ts)


def test_gloo_import_refuses_trace_without_shapes(capture_dir, tmp_path, run_cli):
    """With record_shapes off only ids remain on the c10d op: sizes are missing."""
    import gzip

    doc = json.loads(gzip.decompress((capture_dir / "rank0.json.gz").read_bytes()))
    for event in doc["traceEvents"]:
        args = event.get("args")
        if isinstance(args, dict):
            for key in ("Input Dims", "Input type", "Concrete Inputs", "Input Strides"):
                args.pop(key, None)
    path = tmp_path / "noshapes.json"
    path.write_text(json.dumps(doc))
    out = tmp_path / "out.json"
    code, _, err = run_cli("import-kineto", path, "-o", out)
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "noshapes.json: record" in err and "field args.Input Dims" in err
    assert not out.exists()
