"""Detect each INPUT's kind by content and build the one internal ladder table.

Kinds: ``sweep_archive`` (a directory with ``attempt.json``), ``nccltests_json`` (a file
whose first non-blank byte is ``{``), ``nccltests_stdout`` (any other file). File names
are never used to decide the kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from tracecanary.alphabeta.ladder import empty_ladder, make_ladder
from tracecanary.alphabeta.nccltests import NcclTestsRun
from tracecanary.alphabeta.nccltests_json import parse_json
from tracecanary.alphabeta.nccltests_text import parse_stdout
from tracecanary.alphabeta.sweep import is_sweep_archive, read_sweep
from tracecanary.canonical import digest_path
from tracecanary.errors import ImportRefused, InputError
from tracecanary.limits import open_input, read_input

KINDS = ("nccltests_stdout", "nccltests_json", "sweep_archive")


@dataclass
class LoadedInput:
    """One INPUT: where it came from, its digest and what was read from it."""

    index: int
    path: str
    name: str
    kind: str
    sha256: str
    runs: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def detect_kind(path: Path) -> str:
    if path.is_dir():
        if is_sweep_archive(path):
            return "sweep_archive"
        raise ImportRefused("directory is not a sweep archive (no attempt.json)", file=str(path))
    if not path.is_file():
        raise InputError("no such file", file=str(path))
    with open_input(path) as fh:
        head = fh.read(4096)
    stripped = head.lstrip()
    if stripped.startswith(b"{"):
        return "nccltests_json"
    return "nccltests_stdout"


def op_label(redop: str, root: int) -> str:
    """The reduction op as printed, with the root for rooted collectives (``sum@root0``)."""
    return redop if root < 0 else f"{redop}@root{root}"


def run_to_ladder(run: NcclTestsRun, *, input_index: int, source: str) -> pd.DataFrame:
    rows = run.rows
    n = len(rows)
    return make_ladder(
        {
            "collective": [run.collective] * n,
            "dtype": rows["dtype"].to_numpy(),
            "world_size": np.full(n, run.world_size, dtype=np.int64),
            "bytes": rows["size_bytes"].to_numpy(),
            "cycle": rows["cycle"].to_numpy(),
            "time_us": rows["time_us"].to_numpy(),
            "wrong": rows["wrong"].to_numpy(),
            "source": [source] * n,
            "line": rows["line"].to_numpy(),
            "input": np.full(n, input_index, dtype=np.int64),
            "run": np.full(n, run.run, dtype=np.int64),
            "placement": rows["placement"].to_numpy(),
            "op": [op_label(r, int(t)) for r, t in zip(rows["redop"], rows["root"], strict=True)],
        }
    )


def run_metadata(run: NcclTestsRun) -> dict:
    return {
        "run": run.run,
        "first_line": run.first_line,
        "collective": run.collective,
        "collective_source": run.collective_source,
        "world_size": run.world_size,
        "world_size_source": run.world_size_source,
        "n_printed_rows": int(run.rows["line"].nunique()),
        "n_samples": int(len(run.rows)),
        "n_cycles": run.n_cycles,
        "rows_per_cycle": run.rows_per_cycle,
        "nccl_tests_version": run.nccl_tests_version,
        "nccl_version": run.nccl_version,
        "avg_bus_bandwidth_printed_gbps": run.avg_busbw_printed_gbps,
        "avg_bus_bandwidth_recomputed_gbps": run.avg_busbw_recomputed_gbps(),
        "out_of_bounds": run.out_of_bounds,
        "notes": list(run.notes),
    }


def load_inputs(
    paths: list[str],
    *,
    world_size: int | None = None,
    collective: str | None = None,
) -> tuple[pd.DataFrame, list[LoadedInput], dict[tuple[int, int], NcclTestsRun]]:
    """Read every INPUT; return the ladder table, per-input metadata and the parsed
    nccl-tests runs keyed by (input, run)."""
    frames = []
    loaded: list[LoadedInput] = []
    runs_by_key: dict[tuple[int, int], NcclTestsRun] = {}
    for index, raw in enumerate(paths):
        path = Path(raw)
        kind = detect_kind(path)
        item = LoadedInput(
            index=index, path=raw, name=path.name, kind=kind, sha256=digest_path(path)
        )
        if kind == "sweep_archive":
            ladder, meta = read_sweep(path, input_index=index, source=raw)
            frames.append(ladder)
            for (coll, dtype, ws), sub in ladder.groupby(
                ["collective", "dtype", "world_size"], sort=True
            ):
                item.runs.append(
                    {
                        "run": 0,
                        "collective": coll,
                        "dtype": dtype,
                        "world_size": int(ws),
                        "n_samples": int(len(sub)),
                        "n_cycles": int(sub["cycle"].nunique()),
                    }
                )
            item.notes.append(f"{meta['n_rows']} rows in rows.parquet")
        else:
            data = read_input(path)
            if kind == "nccltests_json":
                runs = parse_json(data, file=raw, world_size=world_size, collective=collective)
            else:
                text = data.decode("utf-8", errors="replace")
                runs = parse_stdout(text, file=raw, world_size=world_size, collective=collective)
            for run in runs:
                runs_by_key[(index, run.run)] = run
                frames.append(run_to_ladder(run, input_index=index, source=raw))
                item.runs.append(run_metadata(run))
        loaded.append(item)
    ladder = pd.concat(frames, ignore_index=True) if frames else empty_ladder()
    return ladder, loaded, runs_by_key
