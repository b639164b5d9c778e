"""Per-rank work of a campaign source split into blocks of rank files, one Snakemake job
per block, so ``snakemake --executor slurm`` spreads the blocks over a cluster; the
gather job reads what the blocks wrote.

A block is ``rank_files_per_job`` consecutive entries of the source's file list
(``partition``); each entry is one rank's capture or profiler trace.

kind ``captures`` (native per-rank captures):
- ``write_capture_set_header`` reads every capture's header (not its events, for JSON
  Lines and columnar captures) and writes the set's merged header as a
  ``tracecanary.trace/v1`` JSON document with no events; the header refusals (raw
  Kineto given as a capture, world sizes or group declarations that disagree) happen
  here, naming the capture;
- ``check_capture_block`` runs on each capture of one block every event check ingest runs
  (``tracecanary.ingest``), under the set's merged header and one capture at a time, and
  writes the events unchanged as a columnar capture (``capture<index, 6 digits>.parquet``) plus
  ``block.json`` (``tracecanary.rank-block/v1``: each capture's path, name, SHA-256 and
  ranks); a bad record in rank file k fails that block's job with one line naming file k,
  the record and the field, and nothing is left behind (atomic directory). A capture that
  hands merge undetermined groups or dtypes (an imported one, ``kineto.crossrank``) is
  parsed and typed here but its events are checked at the gather, once resolved;
- ``merge_capture_blocks`` runs ``merge.merge_captures`` over the blocks' columnar
  captures in the source's order, recording the original captures (name, SHA-256) as
  ``merged_from``; ingest gives the same Parquet bytes for the columnar and JSON forms of
  one trace, so the merged trace is byte-identical to merging the original files, and
  every refusal of a whole capture set (duplicate ranks, missing ranks, timing semantics,
  matching) still happens there, naming the original capture, not the intermediate.

kind ``kineto`` (per-rank PyTorch profiler traces):
- ``import_kineto_block`` imports one block's traces (``import_kineto_files``) into
  ``rank<r>.json`` files plus ``block.json``; two traces of one rank are refused;
- ``gather_kineto_blocks`` writes the directory ``kineto.sources.import_source`` writes
  for the whole list (the same ``rank<r>.json`` bytes), refusing a rank imported by two
  blocks naming both traces.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa

from tracecanary.canonical import atomic_output, sha256_file, write_json
from tracecanary.columnar_capture import write_columnar
from tracecanary.errors import ImportRefused, InputError, TraceCanaryError
from tracecanary.event_checks import TraceState
from tracecanary.formats.ids import RANK_BLOCK_FORMAT
from tracecanary.formats.schemas import validate
from tracecanary.formats.trace import (
    EVENT_SCHEMA,
    clock_of_ranks,
    expand_groups,
    merge_headers,
    validate_header,
)
from tracecanary.ingest import _check_batch, _open_source
from tracecanary.kineto.crossrank import needs_resolution
from tracecanary.limits import current_limits, load_json
from tracecanary.merge import merge_captures
from tracecanary.merge_inputs import refuse_raw_kineto
from tracecanary.trace_io import write_trace

BLOCK_INDEX = "block.json"
"""The file in every block directory that lists what the block holds."""


def partition(paths: list[str], rank_files_per_job: int) -> list[list[str]]:
    """``paths`` in consecutive blocks of ``rank_files_per_job`` (the last may be shorter)."""
    if rank_files_per_job < 1:
        raise InputError(
            f"must be at least 1, got {rank_files_per_job}", field="rank_files_per_job"
        )
    return [paths[i : i + rank_files_per_job] for i in range(0, len(paths), rank_files_per_job)]


def _columnar_name(index: int) -> str:
    # fixed width: no intermediate's name is a substring of another's (error remapping)
    return f"capture{index:06d}.parquet"


def _write_index(directory: Path, kind: str, files: list[dict]) -> None:
    doc = {"format": RANK_BLOCK_FORMAT, "kind": kind, "files": files}
    validate(doc, "rank-block", file=str(directory / BLOCK_INDEX))
    write_json(directory / BLOCK_INDEX, doc)


def _read_index(block_dir: str | os.PathLike, kind: str) -> list[dict]:
    path = Path(block_dir) / BLOCK_INDEX
    doc = load_json(path, current_limits())
    validate(doc, "rank-block", file=str(path))
    if doc["kind"] != kind:
        raise InputError(f"a block of kind {doc['kind']}, not {kind}", file=str(path), field="kind")
    return doc["files"]


# ---- kind: captures ----


def write_capture_set_header(captures: list[str], output: str | os.PathLike) -> dict:
    """Write the merged header of ``captures`` as a columnar capture without events;
    return it. See the module docstring."""
    if not captures:
        raise InputError("no captures given", field="captures")
    refuse_raw_kineto(captures)
    limits = current_limits()
    headers = []
    for path in captures:
        source = _open_source(str(path), limits, hash_input=False)
        source.close()
        headers.append((str(path), source.header))
    header = merge_headers(headers)
    expand_groups(header, file=str(captures[0]))  # the checks ingest runs on the set
    clock_of_ranks(header, file=str(captures[0]))
    write_trace({**header, "events": []}, output)
    return header


def _check_capture(path: str, set_header: dict, first_capture: str) -> tuple[dict, pa.Table, str]:
    """(header, events, SHA-256) of one capture, its events checked as ingest checks them
    unless it hands merge groups or dtypes to settle (``kineto.crossrank``)."""
    limits = current_limits()
    state = TraceState(
        groups=expand_groups(set_header, file=first_capture),
        clocks=clock_of_ranks(set_header, file=first_capture),
        world_size=set_header["meta"]["world_size"],
        limits=limits,
    )
    source = _open_source(path, limits)
    try:
        # groups an imported capture leaves undetermined are declared only once merge has
        # resolved them: such a capture's events are checked there, after resolution
        check = not (needs_resolution(set_header) or needs_resolution(source.header))
        batches = []
        for first_index, batch in source.batches:
            if state.events + batch.num_rows > limits.max_events:
                raise InputError(f"more than max_events={limits.max_events} events", file=path)
            if check:
                _check_batch(path, first_index, batch, state)
            batches.append(batch)
        digest = source.sha256()
    finally:
        source.close()
    header = {k: v for k, v in source.header.items() if k != "events"}  # a JSON document's
    return header, pa.Table.from_batches(batches, schema=EVENT_SCHEMA), digest


def check_capture_block(
    set_header_path: str | os.PathLike,
    captures: list[str],
    first_index: int,
    out_dir: str | os.PathLike,
) -> int:
    """Check one block of captures (entries ``first_index`` on of the source's list) and
    write them into ``out_dir``; return how many. See the module docstring."""
    set_header = load_json(set_header_path, current_limits())
    validate_header(set_header, file=str(set_header_path))
    first = str(captures[0]) if captures else str(set_header_path)
    files = []
    with atomic_output(out_dir, directory=True) as tmp:
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the result is a plain directory
        for offset, path in enumerate(captures):
            header, table, digest = _check_capture(str(path), set_header, first)
            ranks = sorted(set(table.column("rank").to_pylist()))
            name = _columnar_name(first_index + offset)
            write_columnar(header, table, Path(tmp) / name)
            files.append(
                {
                    "index": first_index + offset,
                    "source": str(path),
                    "name": Path(path).name,
                    "sha256": digest,
                    "output": name,
                    "ranks": ranks,
                }
            )
        _write_index(Path(tmp), "captures", files)
    return len(files)


def _renamed(err: TraceCanaryError, originals: dict[str, str]) -> TraceCanaryError:
    """``err`` naming the original captures where it names their intermediates."""
    message, file = err.message, err.file
    for intermediate, original in originals.items():
        message = message.replace(intermediate, original)
        message = message.replace(Path(intermediate).name, Path(original).name)
        if file == intermediate:
            file = original
    renamed = type(err)(message, file=file, record=err.record, field=err.field)
    return renamed


def merge_capture_blocks(
    block_dirs: list[str],
    output: str | os.PathLike,
    calibration_path: str | None = None,
) -> dict:
    """Merge the captures the blocks hold, in the source's order, into ``output``; see
    the module docstring (refusals name the original captures)."""
    entries = []
    for block in block_dirs:
        entries += [(f, str(Path(block) / f["output"])) for f in _read_index(block, "captures")]
    entries.sort(key=lambda e: e[0]["index"])
    if [f["index"] for f, _ in entries] != list(range(len(entries))):
        raise InputError(
            "the blocks do not hold the source's captures once each, in order",
            file=str(block_dirs[0]) if block_dirs else None,
            field="index",
        )
    columnar = [path for _, path in entries]
    originals = {path: f["source"] for f, path in entries}
    recorded = [{"path": f["name"], "sha256": f["sha256"]} for f, _ in entries]
    try:
        return merge_captures(columnar, output, calibration_path, recorded_as=recorded)
    except TraceCanaryError as err:
        raise _renamed(err, originals) from None


# ---- kind: kineto ----


def import_kineto_block(
    traces: list[str], out_dir: str | os.PathLike, jobs: int | None = None
) -> int:
    """Import one block of Kineto traces into ``out_dir``; return how many."""
    from tracecanary.kineto.sources import import_ranked

    ranked = import_ranked(traces, jobs)  # refuses two traces of one rank
    files = []
    with atomic_output(out_dir, directory=True) as tmp:
        os.chmod(tmp, 0o755)
        for path, (rank, doc) in zip(traces, ranked, strict=True):
            name = f"rank{rank}.json"
            write_trace(doc, Path(tmp) / name)
            files.append(
                {
                    "index": len(files),
                    "source": str(path),
                    "name": Path(path).name,
                    "sha256": sha256_file(path),
                    "output": name,
                    "ranks": [rank],
                }
            )
        _write_index(Path(tmp), "kineto", files)
    return len(files)


def gather_kineto_blocks(block_dirs: list[str], out_dir: str | os.PathLike) -> int:
    """Write every block's ``rank<r>.json`` into ``out_dir`` (atomic); return how many."""
    owner: dict[int, str] = {}
    copies = []
    for block in block_dirs:
        for f in _read_index(block, "kineto"):
            (rank,) = f["ranks"]
            if rank in owner:
                raise ImportRefused(
                    f"rank {rank} is also the rank of {owner[rank]}",
                    file=f["source"],
                    field="distributedInfo.rank",
                )
            owner[rank] = f["source"]
            copies.append(Path(block) / f["output"])
    with atomic_output(out_dir, directory=True) as tmp:
        os.chmod(tmp, 0o755)
        for path in copies:
            shutil.copyfile(path, Path(tmp) / path.name)
    return len(copies)


__all__ = [
    "BLOCK_INDEX",
    "check_capture_block",
    "gather_kineto_blocks",
    "import_kineto_block",
    "merge_capture_blocks",
    "partition",
    "write_capture_set_header",
]
