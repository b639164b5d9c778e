"""nccl-tests output (``*_perf`` stdout and ``-J`` JSON): the per-run table both parsers
build (``NcclTestsRun``, ``ROW_COLUMNS``) and the checks they share. The stdout parser is
``nccltests_text``, the ``-J`` parser ``nccltests_json``.

Checks of a parsed run, whichever layout (``ImportRefused``, exit 2, naming file, line
or record, and field): sizes, counts and roots in range (``check_row_ints``); a
collective named by the run that its rows (redop, root, size/count ratio) contradict, or
that contradicts ``--collective``, or none the rows, the option or the file name
determine (``resolve_collective``); rows that imply a different world size than the
run's (mixed world sizes in one ladder) or a world size outside 1..max_ranks
(``check_world_size_rows``); a row count that is not a whole number of cycles
(``assign_cycles``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tracecanary.alphabeta.ladder import PER_RANK_COUNT, busbw_factor
from tracecanary.errors import ImportRefused
from tracecanary.limits import current_limits

# nccl-tests type names -> element size in bytes (current names and the old ones).
DTYPE_SIZES: dict[str, int] = {
    "int8": 1,
    "uint8": 1,
    "char": 1,
    "int32": 4,
    "uint32": 4,
    "int": 4,
    "int64": 8,
    "uint64": 8,
    "half": 2,
    "float": 4,
    "double": 8,
    "bfloat16": 2,
    "f8e4m3": 1,
    "f8e5m2": 1,
}

# nccl-tests type names -> the canonical (torch-style) dtype names of formats/vocab.py
# (names with no canonical counterpart keep their nccl-tests spelling)
CANONICAL_DTYPE: dict[str, str] = {
    "char": "int8",
    "int": "int32",
    "half": "float16",
    "float": "float32",
    "double": "float64",
}

# perf binary stem -> collective
PROGRAM_TO_COLLECTIVE: dict[str, str] = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "alltoall": "all_to_all",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "sendrecv": "sendrecv",
    "scatter": "scatter",
    "gather": "gather",
}

# Spellings of each collective accepted in file names (tie-break only).
_FILE_NAME_TOKENS: dict[str, tuple[str, ...]] = {
    "all_reduce": ("all_reduce", "allreduce"),
    "all_gather": ("all_gather", "allgather"),
    "reduce_scatter": ("reduce_scatter", "reducescatter"),
    "all_to_all": ("alltoall", "all_to_all"),
    "broadcast": ("broadcast", "bcast"),
    "reduce": ("reduce",),
    "sendrecv": ("sendrecv",),
    "scatter": ("scatter",),
    "gather": ("gather",),
}

ROW_COLUMNS: dict[str, str] = {
    "line": "int64",
    "cycle": "int64",
    "size_bytes": "int64",
    "count": "int64",
    "dtype": "str",
    "redop": "str",
    "root": "int64",
    "placement": "str",
    "time_us": "float64",
    "time_half_ulp_us": "float64",
    "printed_algbw_gbps": "float64",
    "algbw_half_ulp_gbps": "float64",
    "printed_busbw_gbps": "float64",
    "busbw_half_ulp_gbps": "float64",
    "wrong": "Int64",
}

INTEGER = re.compile(r"^-?\d+$")


@dataclass
class NcclTestsRun:
    """One nccl-tests invocation: metadata and its data rows (``ROW_COLUMNS``; two rows
    per printed line, one per placement)."""

    file: str
    run: int
    first_line: int
    layout: str  # "stdout" | "json"
    collective: str
    collective_source: str  # "header" | "json_args" | "data" | "file_name" | "option"
    world_size: int
    world_size_source: str  # "device_list" | "data" | "option"
    rows: pd.DataFrame
    rows_per_cycle: int | None
    n_cycles: int
    nccl_tests_version: str | None = None
    nccl_version: str | None = None
    avg_busbw_printed_gbps: float | None = None
    out_of_bounds: int | None = None
    notes: list[str] = field(default_factory=list)

    def avg_busbw_recomputed_gbps(self) -> float:
        """Mean over every printed row and both placements of busbw recomputed from size and
        time, which is what nccl-tests averages into ``# Avg bus bandwidth``."""
        return float(np.mean(recomputed_busbw_gbps(self)))


def recomputed_algbw_gbps(run: NcclTestsRun) -> np.ndarray:
    """algbw = size / time (decimal GB/s), recomputed from the printed size and time."""
    rows = run.rows
    return rows["size_bytes"].to_numpy(np.float64) / (rows["time_us"].to_numpy(np.float64) * 1e3)


def recomputed_busbw_gbps(run: NcclTestsRun) -> np.ndarray:
    """busbw = algbw x the collective's bus factor for the run's world size (GB/s)."""
    return recomputed_algbw_gbps(run) * busbw_factor(run.collective, run.world_size)


def refuse(message: str, file: str, line: int | None, field_name: str | None) -> ImportRefused:
    """The refusal of ``message`` at ``line`` (named in the message and as the record)."""
    if line is None:
        return ImportRefused(message, file=file, field=field_name)
    return ImportRefused(f"line {line}: {message}", file=file, record=line, field=field_name)


def rows_per_cycle(min_bytes: int, max_bytes: int, step: int, kind: str) -> int | None:
    """Number of sizes nccl-tests visits per cycle (its ``for size = min; size <= max`` loop)."""
    if (
        min_bytes < 0
        or step <= 0
        or (kind == "factor" and (step < 2 or min_bytes == 0))
        or max_bytes < min_bytes
    ):
        return None
    if kind != "factor":  # arithmetic ladder: counted, not walked (the header is untrusted)
        n = (max_bytes - min_bytes) // step + 1
        return n if n <= 10_000_000 else None
    n, size = 0, min_bytes
    while size <= max_bytes:  # geometric: at most log2(max_bytes) steps
        n += 1
        size = size * step
    return n


def collective_from_program(name: str) -> str | None:
    """The collective a ``*_perf`` program path names, or ``None`` if none we support."""
    stem = os.path.basename(name)
    stem = stem.split("_perf")[0]
    if stem in PROGRAM_TO_COLLECTIVE:
        return PROGRAM_TO_COLLECTIVE[stem]
    return None


def _candidate_collectives(rows: pd.DataFrame, world_size: int | None) -> set[str]:
    """Collectives whose printed structure (redop, root, size/count ratio) fits the rows."""
    redop_none = bool((rows["redop"] == "none").all())
    redop_some = bool((rows["redop"] != "none").all())
    rooted = bool((rows["root"] >= 0).all())
    unrooted = bool((rows["root"] == -1).all())
    nz = rows.loc[rows["count"] > 0]
    ratio_kind: str | None = None  # "elt" (size = count*elt) or "n_elt" (size = n*count*elt)
    if not nz.empty:
        elt = nz["dtype"].map(DTYPE_SIZES)
        if elt.notna().all():
            ratio = nz["size_bytes"].to_numpy() / (
                nz["count"].to_numpy() * elt.to_numpy(np.float64)
            )
            if np.all(ratio == 1.0) and world_size != 1:
                ratio_kind = "elt"
            elif np.all(ratio > 1.0):
                ratio_kind = "n_elt"
    candidates = set()
    if redop_some and unrooted:
        candidates |= {"all_reduce", "reduce_scatter"}
    if redop_some and rooted:
        candidates |= {"reduce"}
    if redop_none and rooted:
        candidates |= {"broadcast", "scatter", "gather"}
    if redop_none and unrooted:
        candidates |= {"sendrecv", "all_gather", "all_to_all"}
    if ratio_kind == "elt":
        candidates -= PER_RANK_COUNT
    elif ratio_kind == "n_elt":
        candidates &= PER_RANK_COUNT
    return candidates


def resolve_collective(
    named: str | None,
    named_source: str,
    rows: pd.DataFrame,
    world_size: int | None,
    file: str,
    line: int,
    option: str | None,
) -> tuple[str, str]:
    """(collective, source) of a run: the one it names (``named``, from ``named_source``),
    else ``--collective`` (``option``), else the only one its rows fit, else the only
    one of those its file name spells. A named collective the rows or the option
    contradict, an option the rows contradict, or no single answer is refused."""
    candidates = _candidate_collectives(rows, world_size)
    if named is not None:
        if candidates and named not in candidates:
            raise refuse(
                f"rows (redop/root/size-count ratio) contradict the named collective {named}",
                file,
                line,
                "redop",
            )
        if option is not None and option != named:
            raise refuse(
                f"--collective {option} contradicts the run's own name {named}",
                file,
                line,
                "collective",
            )
        return named, named_source
    if option is not None:
        if candidates and option not in candidates:
            raise refuse(
                f"--collective {option} contradicts the rows (they fit {sorted(candidates)})",
                file,
                line,
                "collective",
            )
        return option, "option"
    if len(candidates) == 1:
        return next(iter(candidates)), "data"
    base = os.path.basename(file).lower()
    hits = sorted(
        c
        for c in candidates
        if any(
            re.search(rf"(?<![a-z]){re.escape(tok)}(?![a-z])", base) for tok in _FILE_NAME_TOKENS[c]
        )
    )
    if len(hits) == 1:
        return hits[0], "file_name"
    raise refuse(
        f"the run does not name its collective and its rows fit {sorted(candidates) or 'none'}; "
        "pass --collective",
        file,
        line,
        "collective",
    )


def check_world_size_rows(rows: pd.DataFrame, collective: str, world_size: int, file: str) -> None:
    """For collectives whose printed count is per rank, every row's size/count must give the
    run's world size (a ladder never mixes world sizes). The world size itself must be
    1..max_ranks."""
    if world_size < 1:
        raise ImportRefused(f"world size {world_size} is not >= 1", file=file, field="world_size")
    current_limits().check("max_ranks", world_size, file=file, field="world_size")
    if collective not in PER_RANK_COUNT:
        return
    elt = rows["dtype"].map(DTYPE_SIZES)
    ok = (rows["count"] > 0) & elt.notna()
    if not ok.any():
        return
    sub = rows.loc[ok]
    implied = sub["size_bytes"].to_numpy() / (
        sub["count"].to_numpy() * elt[ok].to_numpy(np.float64)
    )
    bad = np.flatnonzero(implied != world_size)
    if len(bad):
        i = bad[0]
        raise refuse(
            f"row implies world size {implied[i]:g} (size/count/element size) but the run has "
            f"{world_size} ranks: mixed world sizes in one ladder",
            file,
            int(sub["line"].iloc[i]),
            "count",
        )


def assign_cycles(
    rows: pd.DataFrame, per_cycle: int | None, file: str, last_line: int
) -> tuple[np.ndarray, int]:
    """Cycle index per row (per dtype/op group, in order of appearance) and the cycle count.

    With a known rows-per-cycle, every group must hold a whole number of cycles; without it
    a new cycle starts whenever the size decreases.
    """
    cycles = np.zeros(len(rows), dtype=np.int64)
    n_cycles = 0
    # one printed line = two placement rows; cycles are counted on printed lines
    groups = rows.groupby(["dtype", "redop", "root", "placement"], sort=False).indices
    for (_dtype, _redop, _root, _placement), idx in groups.items():
        idx = np.sort(idx)
        sizes = rows["size_bytes"].to_numpy()[idx]
        if per_cycle is not None:
            if len(idx) % per_cycle != 0:
                raise refuse(
                    f"{len(idx)} rows for {_dtype}/{_redop} are not a whole number of cycles of "
                    f"{per_cycle} sizes (truncated output?)",
                    file,
                    last_line,
                    "row",
                )
            c = np.arange(len(idx)) // per_cycle
        else:
            c = (
                np.concatenate([[0], np.cumsum(np.diff(sizes) < 0)])
                if len(idx)
                else np.array([], np.int64)
            )
        cycles[idx] = c
        n_cycles = max(n_cycles, int(c.max()) + 1 if len(c) else 0)
    return cycles, n_cycles


MAX_FLOAT = 1e15  # us (31 years) or GB/s: beyond any measurement
MIN_POSITIVE = 1e-6  # nccl-tests prints at most 6 decimals; a smaller time is no reading


def plausible(value: float, positive: bool) -> bool:
    """A printed time or bandwidth within what nccl-tests can print and ratios survive."""
    return abs(value) <= MAX_FLOAT and (not positive or value >= MIN_POSITIVE)


def check_row_ints(size: int, count: int, root: int, file: str, line: int | None) -> None:
    """Sizes and counts within [0, max_message_bytes], root -1 or a rank index."""
    limits = current_limits()
    if size < 0 or count < 0:
        raise ImportRefused("size and count must be >= 0", file=file, record=line, field="size")
    limits.check("max_message_bytes", size, file=file, record=line, field="size")
    limits.check("max_message_bytes", count, file=file, record=line, field="count")
    if root < -1:
        raise ImportRefused(
            f"root {root} must be -1 or a rank", file=file, record=line, field="root"
        )
    limits.check("max_ranks", root, what="root", file=file, record=line, field="root")


def world_size_from_rows(rows: pd.DataFrame, collective: str) -> int | None:
    """The world size the first row's size / (count x element size) gives, for a
    collective whose count is per rank; ``None`` when it gives no whole number >= 1."""
    if collective not in PER_RANK_COUNT:
        return None
    elt = rows["dtype"].map(DTYPE_SIZES)
    ok = (rows["count"] > 0) & elt.notna()
    if not ok.any():
        return None
    first = rows.loc[ok].iloc[0]
    value = first["size_bytes"] / (first["count"] * DTYPE_SIZES[first["dtype"]])
    return int(value) if value == int(value) and value >= 1 else None
