"""The attempt archive: the evidence a physical run (or a PARAM import) leaves behind.

An archive is a DIRECTORY written atomically (complete or absent, never half-written):
    attempt.json      tracecanary.attempt/v1 (schemas/attempt.schema.json), written last
    environment.json  tracecanary.environment/v1 (schemas/environment.schema.json)
    rows.parquet      every rank's rows, when every rank finished
    partial/rows.parquet  the rows the ranks had written when a run failed (never
                      called complete)
    launch.log        what torchrun and the workers printed (absent for imports)

Status rule, for every consumer: ``complete`` iff every rank finished AND every row
passed its data-correctness check. A run where every rank finished but some rows
failed the check is ``failed`` (reason says how many rows), and its rows are still in
``rows.parquet`` with ``correct = false``; a run where a rank died or hung is
``failed`` with its surviving rows under ``partial/``. ``attempt.json`` lists the
SHA-256 of every other file of the archive in ``files``.
"""

from __future__ import annotations

import datetime
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tracecanary.canonical import atomic_output, write_json, write_text
from tracecanary.formats.ids import ATTEMPT_FORMAT, ENVIRONMENT_FORMAT
from tracecanary.formats.schemas import validate
from tracecanary.parquet_io import write_parquet


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def collect_rows(
    staging: Path, world_size: int, schema: pa.Schema, sort_keys: list[str]
) -> pa.Table | None:
    """Every ``rank<r>/rows-*.parquet`` (r < world_size) concatenated and sorted; None if none."""
    parts = []
    for r in range(world_size):
        for p in sorted((staging / f"rank{r}").glob("rows-*.parquet")):
            parts.append(pq.read_table(p).cast(schema))
    if not parts:
        return None
    table = pa.concat_tables(parts)
    return table.take(pc.sort_indices(table, [(k, "ascending") for k in sort_keys]))


def environment_document(launcher: dict, staging: Path, world_size: int) -> dict:
    """The launcher's record plus each rank's ``env.json`` (ranks that never started are
    listed in ``missing_ranks``)."""
    ranks, missing = [], []
    for r in range(world_size):
        p = staging / f"rank{r}" / "env.json"
        try:
            ranks.append(json.loads(p.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            missing.append(r)
    nccl = sorted({str(x["nccl_version"]) for x in ranks if x.get("nccl_version")})
    return {
        "format": ENVIRONMENT_FORMAT,
        **launcher,
        "nccl_version": nccl[0] if len(nccl) == 1 else (nccl or None),
        "hosts": sorted({x["host"] for x in ranks}),
        "slurm_nodes": sorted({x["slurmd_nodename"] for x in ranks if x.get("slurmd_nodename")}),
        "ranks": ranks,
        "missing_ranks": missing,
    }


def write_archive(
    out: Path,
    attempt: dict,
    *,
    environment: dict | None,
    rows: pa.Table | None,
    rows_file: str | None,
    log: str | None,
) -> dict:
    """Write the archive directory atomically; return the final attempt document.

    ``attempt`` carries everything but ``format``, ``rows``, ``rows_file`` and ``files``,
    which are filled in here; the document is validated against its schema before
    anything is renamed into place.
    """
    doc = {"format": ATTEMPT_FORMAT, **attempt}
    doc["rows"] = 0 if rows is None else rows.num_rows
    doc["rows_file"] = rows_file if rows is not None else None
    with atomic_output(out, directory=True) as tmp:
        files: dict[str, str] = {}
        if environment is not None:
            validate(environment, "environment", file=str(out / "environment.json"))
            files["environment.json"] = write_json(tmp / "environment.json", environment)
        if rows is not None and rows_file is not None:
            (tmp / rows_file).parent.mkdir(parents=True, exist_ok=True)
            files[rows_file] = write_parquet(rows, tmp / rows_file)
        if log is not None:
            files["launch.log"] = write_text(tmp / "launch.log", log)
        doc["files"] = dict(sorted(files.items()))
        validate(doc, "attempt", file=str(out / "attempt.json"))
        write_json(tmp / "attempt.json", doc)
    return doc


def finalize_run(
    out: Path,
    attempt: dict,
    *,
    launch,
    launcher_env: dict,
    staging: Path,
    world_size: int,
    schema: pa.Schema,
    sort_keys: list[str],
) -> dict:
    """Assemble a launched run's archive from its staging directory, then remove staging."""
    rows = collect_rows(staging, world_size, schema, sort_keys)
    environment = environment_document(launcher_env, staging, world_size)
    checked = 0 if rows is None else rows.num_rows
    incorrect = 0 if rows is None else int(pc.sum(pc.invert(rows["correct"])).as_py() or 0)
    if launch.ok:
        rows_file = "rows.parquet"
        status, reason = "complete", None
        if incorrect:
            status = "failed"
            reason = f"data correctness check failed on {incorrect} of {checked} rows"
    else:
        rows_file = "partial/rows.parquet"
        status, reason = "failed", launch.reason
    attempt = {
        **attempt,
        "status": status,
        "reason": reason,
        "wall_time_ns": launch.wall_time_ns,
        "correctness": {"checked_rows": checked, "incorrect_rows": incorrect},
    }
    try:
        return write_archive(
            out, attempt, environment=environment, rows=rows, rows_file=rows_file, log=launch.log
        )
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def read_attempt(path: str | Path) -> dict:
    """``attempt.json`` of an archive directory."""
    return json.loads((Path(path) / "attempt.json").read_text(encoding="utf-8"))
