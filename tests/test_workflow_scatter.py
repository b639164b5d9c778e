"""Per-rank work as Snakemake jobs (tracecanary.rank_blocks, docs/cluster.md): a capture set
is checked one job per block of rank files and merge gathers the blocks into the same bytes
merging the original files gives; a bad record in rank file k fails that block's job with
one line naming the file, the record and the field, and leaves nothing behind; every
refusal tried (event checks, header checks, a rank in two files, matching) is the line
merging the original files gives."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import REPO, run_snakemake

from tracecanary.canonical import write_json
from tracecanary.errors import ImportRefused, InputError, MergeError, TraceCanaryError
from tracecanary.formats.ids import RANK_BLOCK_FORMAT
from tracecanary.merge import merge_captures
from tracecanary.rank_blocks import (
    BLOCK_INDEX,
    check_capture_block,
    gather_kineto_blocks,
    merge_capture_blocks,
    partition,
    write_capture_set_header,
)
from tracecanary.synth.decode import DecodeSpec, build_decode
from tracecanary.trace_io import write_trace

BAD_RANK, BAD_RECORD = 2, 7


@pytest.fixture(scope="module")
def capture_set(tmp_path_factory) -> tuple[list[str], str]:
    """A 4-rank decode capture set (one JSON Lines file per rank) and its calibration."""
    root = tmp_path_factory.mktemp("captures")
    docs, calibration = build_decode(DecodeSpec(events_per_rank=300))
    paths = []
    for rank, doc in enumerate(docs):
        path = root / f"rank{rank}.jsonl.gz"
        write_trace(doc, path)
        paths.append(str(path))
    write_json(root / "calibration.json", calibration)
    return paths, str(root / "calibration.json")


def corrupted_copy(path: str, out: Path, record: int) -> str:
    """``path`` with event ``record`` (0-based, after the header line) given negative bytes."""
    header, *events = gzip.decompress(Path(path).read_bytes()).splitlines()
    event = json.loads(events[record])
    event["bytes"] = -5
    events[record] = json.dumps(event).encode()
    out.write_bytes(gzip.compress(b"\n".join([header, *events]) + b"\n"))
    return str(out)


def scatter_and_gather(captures, calibration, per_job, work: Path) -> Path:
    """What the workflow's jobs run, in process: header, one check per block, the gather."""
    header = work / "header.json"
    write_capture_set_header(captures, header)
    blocks, first = [], 0
    for k, block in enumerate(partition(captures, per_job)):
        blocks.append(str(work / f"block{k}"))
        check_capture_block(header, block, first, blocks[-1])
        first += len(block)
    merged = work / "merged.jsonl.gz"
    merge_capture_blocks(blocks, merged, calibration)
    return merged


def test_partition_splits_rank_files_into_consecutive_blocks_the_last_shorter():
    files = [f"rank{r}.jsonl" for r in range(5)]
    assert partition(files, 2) == [files[0:2], files[2:4], files[4:5]]
    assert partition(files, 16) == [files]
    assert partition(files, 1) == [[f] for f in files]


def test_partition_refuses_fewer_than_one_rank_file_per_job():
    with pytest.raises(InputError, match="field rank_files_per_job"):
        partition(["rank0.jsonl"], 0)


@pytest.mark.parametrize("per_job", [1, 3, 4])
def test_gathered_blocks_merge_to_the_bytes_of_merging_the_captures(capture_set, tmp_path, per_job):
    captures, calibration = capture_set
    direct = tmp_path / "direct.jsonl.gz"
    merge_captures(captures, direct, calibration)
    gathered = scatter_and_gather(captures, calibration, per_job, tmp_path / "work")
    assert gathered.read_bytes() == direct.read_bytes()
    header = json.loads(gzip.decompress(gathered.read_bytes()).splitlines()[0])
    assert [m["path"] for m in header["meta"]["merged_from"]] == [Path(c).name for c in captures]


def test_a_bad_record_in_rank_file_k_fails_its_block_naming_file_record_and_field(
    capture_set, tmp_path
):
    captures, _ = capture_set
    captures = list(captures)
    bad = tmp_path / f"rank{BAD_RANK}.jsonl.gz"
    captures[BAD_RANK] = corrupted_copy(captures[BAD_RANK], bad, BAD_RECORD)
    header = tmp_path / "header.json"
    write_capture_set_header(captures, header)
    out = tmp_path / "block1"
    with pytest.raises(InputError) as refused:
        check_capture_block(header, captures[2:4], 2, out)
    line = refused.value.one_line()
    assert line.startswith(f"{bad}: record {BAD_RECORD}: field bytes: must be non-negative")
    assert "\n" not in line
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == [
        "header.json",
        bad.name,
    ]
    check_capture_block(header, captures[0:2], 0, tmp_path / "block0")  # the others pass


def _set_event(index: int, field: str, value):
    def change(header: dict, events: list[dict]) -> None:
        events[index][field] = value

    return change


def _drop_ts(header: dict, events: list[dict]) -> None:
    del events[10]["ts_ns"]


def _declare_world(header: dict, events: list[dict]) -> None:
    header["meta"]["world_size"] = 8


def _move_to_rank_1(header: dict, events: list[dict]) -> None:
    for event in events:
        event["rank"] = 1


CORRUPTIONS = {
    "duplicate seq": _set_event(5, "seq", 4),
    "timestamp backwards": _set_event(9, "ts_ns", 1),
    "undeclared group": _set_event(3, "group", "nope"),
    "unknown op": _set_event(3, "op", "frobnicate"),
    "no ts_ns nor gap_ns": _drop_ts,
    "unknown field": _set_event(2, "zzz", 1),
    "bytes conflicting across members": _set_event(0, "bytes", 7),
    "world sizes disagree": _declare_world,
    "a rank in two files": _move_to_rank_1,
}


@pytest.mark.parametrize("per_job", [1, 3])
@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_scattered_checks_refuse_with_the_line_merging_the_captures_gives(
    capture_set, tmp_path, corruption, per_job
):
    captures, calibration = capture_set
    lines = gzip.decompress(Path(captures[BAD_RANK]).read_bytes()).splitlines()
    header, events = json.loads(lines[0]), [json.loads(line) for line in lines[1:]]
    CORRUPTIONS[corruption](header, events)
    bad = tmp_path / f"rank{BAD_RANK}.jsonl.gz"
    body = b"\n".join(json.dumps(doc).encode() for doc in [header, *events]) + b"\n"
    bad.write_bytes(gzip.compress(body))
    captures = [*captures[:BAD_RANK], str(bad), *captures[BAD_RANK + 1 :]]
    with pytest.raises(TraceCanaryError) as direct:
        merge_captures(captures, tmp_path / "direct.jsonl.gz", calibration)
    with pytest.raises(TraceCanaryError) as scattered:
        scatter_and_gather(captures, calibration, per_job, tmp_path / "work")
    assert scattered.value.one_line() == direct.value.one_line()
    assert not (tmp_path / "work" / "merged.jsonl.gz").exists()


def test_a_rank_in_two_blocks_is_refused_at_the_gather_naming_the_original_captures(
    capture_set, tmp_path
):
    captures, calibration = capture_set
    again = tmp_path / "again.jsonl.gz"
    shutil.copyfile(captures[1], again)
    with pytest.raises(MergeError) as refused:
        scatter_and_gather([*captures, str(again)], calibration, 2, tmp_path / "work")
    line = refused.value.one_line()
    assert line.startswith(f"{again}: record collective ")
    assert "two contributions for rank 1: rank1.jsonl.gz and again.jsonl.gz" in line
    assert "capture0" not in line  # the intermediates are never named
    assert not (tmp_path / "work" / "merged.jsonl.gz").exists()


def test_the_gather_refuses_blocks_that_leave_out_a_rank_file(capture_set, tmp_path):
    captures, calibration = capture_set
    header = tmp_path / "header.json"
    write_capture_set_header(captures, header)
    check_capture_block(header, captures[0:2], 0, tmp_path / "block0")
    check_capture_block(header, captures[2:4], 2, tmp_path / "block1")
    out = tmp_path / "merged.jsonl.gz"
    with pytest.raises(InputError, match="field index"):
        merge_capture_blocks([str(tmp_path / "block1")], out, calibration)
    assert not out.exists()


def test_kineto_gather_refuses_a_rank_imported_by_two_blocks_naming_both_traces(tmp_path):
    blocks = []
    for k, trace in enumerate(["a/rank1.json", "b/rank1.json"]):
        block = tmp_path / f"block{k}"
        block.mkdir()
        (block / "rank1.json").write_text("{}")
        entry = {"index": 0, "source": trace, "name": "rank1.json", "sha256": "0" * 64}
        entry |= {"output": "rank1.json", "ranks": [1]}
        doc = {"format": RANK_BLOCK_FORMAT, "kind": "kineto", "files": [entry]}
        write_json(block / BLOCK_INDEX, doc)
        blocks.append(str(block))
    out = tmp_path / "imported"
    with pytest.raises(ImportRefused) as refused:
        gather_kineto_blocks(blocks, out)
    line = refused.value.one_line()
    assert (
        line == "b/rank1.json: field distributedInfo.rank: rank 1 is also the rank of a/rank1.json"
    )
    assert not out.exists()


# ---- the real workflow ----


def scatter_campaign(workdir: Path, captures: list[str], calibration: str, per_job: int) -> str:
    """config/scatter.yaml: one captures source over ``captures`` (copied in)."""
    (workdir / "resources").mkdir(parents=True)
    (workdir / "config").mkdir()
    for name in ("backends.yaml", "tolerances.yaml"):
        shutil.copyfile(REPO / "config" / name, workdir / "config" / name)
    local = []
    for path in captures:
        shutil.copyfile(path, workdir / "resources" / Path(path).name)
        local.append(f"resources/{Path(path).name}")
    shutil.copyfile(calibration, workdir / "resources" / "calibration.json")
    config = {
        "campaign": "sc",
        "sources": [
            {
                "id": "decode",
                "kind": "captures",
                "captures": local,
                "calibration": "resources/calibration.json",
            }
        ],
        "scatter": {"rank_files_per_job": per_job},
    }
    (workdir / "config" / "scatter.yaml").write_text(yaml.safe_dump(config))
    return "config/scatter.yaml"


@pytest.mark.slow
def test_snakemake_runs_one_job_per_block_and_merge_gathers_the_same_bytes(capture_set, tmp_path):
    captures, calibration = capture_set
    workdir = tmp_path / "wf"
    configfile = scatter_campaign(workdir, captures, calibration, per_job=1)
    target = "results/sc/merge/decode.jsonl.gz"
    run = run_snakemake(workdir, target, configfile=configfile)
    assert run.returncode == 0, run.stderr[-3000:]
    blocks = sorted(p.name for p in (workdir / "results/sc/capture_blocks/decode").iterdir())
    assert blocks == ["block0", "block1", "block2", "block3", "header.json"]
    for k in range(4):
        prov = workdir / f"results/sc/provenance/ingest_capture_block/decode/block{k}.json"
        assert json.loads(prov.read_text())["predicate"]["deterministic"] is True
    direct = tmp_path / "direct.jsonl.gz"
    merge_captures(captures, direct, calibration)
    assert (workdir / target).read_bytes() == direct.read_bytes()


@pytest.mark.slow
def test_snakemake_fails_the_bad_rank_files_block_job_with_one_line_and_no_output(
    capture_set, tmp_path
):
    captures, calibration = capture_set
    captures = list(captures)
    captures[BAD_RANK] = corrupted_copy(
        captures[BAD_RANK], tmp_path / f"rank{BAD_RANK}.jsonl.gz", BAD_RECORD
    )
    workdir = tmp_path / "wf"
    configfile = scatter_campaign(workdir, captures, calibration, per_job=1)
    target = "results/sc/merge/decode.jsonl.gz"
    run = run_snakemake(workdir, "--keep-going", target, configfile=configfile)
    assert run.returncode != 0
    log = workdir / f"logs/sc/ingest_capture_block/decode/block{BAD_RANK}.log"
    errors = [ln for ln in log.read_text().splitlines() if ln.startswith("error: ")]
    assert errors == [
        f"error: resources/rank{BAD_RANK}.jsonl.gz: record {BAD_RECORD}: field bytes: "
        "must be non-negative, got -5"
    ]
    blocks = workdir / "results/sc/capture_blocks/decode"
    assert not (blocks / f"block{BAD_RANK}").exists()
    assert all((blocks / f"block{k}").is_dir() for k in range(4) if k != BAD_RANK)
    assert not (workdir / target).exists()
