"""The training-trace generator (tracecanary synth training): streamed JSON Lines that
ingest accepts, that match into the occurrences the summary states, byte-deterministic."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest

from tracecanary.canonical import canonical_json_bytes, sha256_file
from tracecanary.cli import main
from tracecanary.formats.schemas import validate
from tracecanary.ingest import ingest_files
from tracecanary.load import load_program
from tracecanary.synth.training import write_training


def test_training_trace_ingests_and_matches_into_the_stated_occurrences(tmp_path):
    path = tmp_path / "t.jsonl"
    summary = write_training(path, tp=2, pp=3, dp=2, steps=2)
    assert summary["ranks"] == 12
    result = ingest_files([str(path)], tmp_path / "t.parquet")
    assert result.events == summary["events"]
    assert result.timing == "timestamps"
    program = load_program(tmp_path / "t.parquet")
    assert program.n == summary["occurrences"]
    assert program.skew_known  # one cluster clock domain
    assert program.world_size == 12
    occ = program.occurrences
    ops = Counter(occ["op"])
    assert set(ops) == {"all_gather", "reduce_scatter", "send", "all_reduce"}
    assert ops["all_gather"] == ops["reduce_scatter"]
    groups = set(occ["group"])
    # a stage is a block of tp x dp = 4 ranks: tensor-parallel groups are consecutive
    # ranks, data-parallel groups stride tp, pipeline pairs cross one stage block
    assert "tp.p1.d0" in groups and "dp.p2.t1" in groups and "p2p:0->4" in groups
    members = program.members
    tp_occ = occ.index[occ["group"] == "tp.p1.d0"][0]
    assert sorted(members[members["occ"] == tp_occ]["rank"]) == [4, 5]
    dp_occ = occ.index[occ["group"] == "dp.p2.t1"][0]
    assert sorted(members[members["occ"] == dp_occ]["rank"]) == [9, 11]
    world = occ[occ["group"] == "world"]
    assert len(world) == 2 and set(world["group_size"]) == {12}
    # every rank wrote the same number of events per step as its stage's template
    per_step = summary["events_per_rank_per_step"]
    assert summary["events"] == sum(per_step) * 4 * 2
    # gradient buckets overlap backward compute (measured), the world scalar does not
    buckets = occ[occ["group"].str.startswith("dp.")]
    assert buckets["has_overlap"].all() and (buckets["overlap_ns"] > 0).any()


def test_training_trace_is_schema_valid_canonical_json_lines(tmp_path):
    path = tmp_path / "t.jsonl"
    write_training(path, tp=2, pp=2, dp=2, steps=1)
    lines = path.read_bytes().splitlines(keepends=True)
    docs = [json.loads(line) for line in lines]
    assert all(canonical_json_bytes(d) == line for d, line in zip(docs, lines, strict=True))
    header, events = docs[0], docs[1:]
    validate({**header, "events": events}, "trace", file=str(path))
    for rank in range(8):
        seqs = [e["seq"] for e in events if e["rank"] == rank]
        assert seqs == list(range(len(seqs)))
        ts = [e["ts_ns"] for e in events if e["rank"] == rank]
        assert ts == sorted(ts)


def test_training_writer_gives_the_same_bytes_for_the_same_arguments(tmp_path):
    a = write_training(tmp_path / "a.jsonl.gz", tp=2, pp=2, dp=2, steps=3)
    b = write_training(tmp_path / "b.jsonl.gz", tp=2, pp=2, dp=2, steps=3)
    c = write_training(tmp_path / "c.jsonl.gz", tp=2, pp=2, dp=2, steps=3, seed=7)
    assert a["sha256"] == b["sha256"] == sha256_file(tmp_path / "a.jsonl.gz")
    assert c["sha256"] != a["sha256"]
    plain = write_training(tmp_path / "p.jsonl", tp=2, pp=2, dp=2, steps=3)
    assert (
        gzip.decompress((tmp_path / "a.jsonl.gz").read_bytes())
        == (tmp_path / "p.jsonl").read_bytes()
    )
    assert plain["events"] == a["events"]


def test_synth_training_cli_writes_the_trace(tmp_path, capsys):
    out = tmp_path / "t.jsonl"
    rc = main(["synth", "training", "--tp", "2", "--pp", "2", "--dp", "1", "--steps", "1",
               "-o", str(out)])  # fmt: skip
    assert rc == 0
    assert "events of 4 ranks" in capsys.readouterr().err
    assert ingest_files([str(out)], tmp_path / "t.parquet").events > 0


@pytest.mark.parametrize(
    "args, field",
    [
        (["--tp", "0"], "tp"),
        (["--steps", "0"], "steps"),
    ],
)
def test_synth_training_cli_refuses_a_bad_shape_without_output(tmp_path, capsys, args, field):
    out = tmp_path / "t.jsonl"
    rc = main(["synth", "training", *args, "-o", str(out)])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"field {field}" in err[0]
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_synth_training_cli_refuses_a_non_jsonl_output(tmp_path, capsys):
    out = tmp_path / "t.json"
    assert main(["synth", "training", "--steps", "1", "-o", str(out)]) == 2
    assert "jsonl" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("tp, pp, dp", [(1, 1, 1), (1, 1, 4), (1, 3, 1), (4, 1, 1), (3, 2, 5)])
def test_training_degenerate_and_odd_shapes_ingest_with_stragglers(tmp_path, tp, pp, dp):
    """Missing parallel dimensions drop their collectives; 12 steps hold straggler
    windows (seeded), which must keep every rank's timestamps in order."""
    path = tmp_path / "t.jsonl"
    summary = write_training(path, tp=tp, pp=pp, dp=dp, steps=12, seed=3)
    ingest_files([str(path)], tmp_path / "t.parquet")
    program = load_program(tmp_path / "t.parquet")
    assert program.n == summary["occurrences"]
    ops = set(program.occurrences["op"])
    assert ("send" in ops) == (pp > 1)
    assert ("all_gather" in ops) == (tp > 1)
    buckets = program.occurrences["group"].str.startswith("dp.")
    assert bool(buckets.any()) == (dp > 1)
