"""nccl-tests output (``*_perf`` stdout and ``-J`` JSON) -> per-run tables.

Stdout, old and new layouts (verified against NVIDIA/nccl-tests ``src/common.cu`` and
``src/util.cu``): a run starts at its ``# nThread .. nGpus .. minBytes ..`` line (preceded,
from nccl-tests 2.17.4, by ``# nccl-tests version`` and ``# Collective test starting:
NAME``), lists one ``#  Rank N ...`` line per rank, then data rows and ends with
``# Avg bus bandwidth : X``. A data row is split on whitespace:

    13 tokens  size count type redop root | time algbw busbw #wrong (out-of-place) | same (in-place)
    15 tokens  the same + a ``YYYY-MM-DD HH:MM:SS`` timestamp (``-S 1``)
    21 tokens  each placement + ``i_min i_max i_p99 i_cv%`` (``-I 1``)
    23 tokens  21 + the timestamp

``#wrong`` is a number (``%6g``) or ``N/A`` (not checked). Lines starting with ``#``,
NCCL log lines (``NCCL INFO``/``WARN``, ``NCCL version``) and blank lines are skipped;
an mpirun ``[1,0]<stdout>:`` tag is stripped first; several runs may be concatenated.
``-N`` repeats the whole ladder inside one table: the header's minBytes/maxBytes/step give
the rows per cycle, so cycle = position // rows-per-cycle (per dtype and op).

JSON (``-J``, versions 1-3): one run per file; booleans are written as the strings
"true"/"false" and NaN as the string "nan"; the collective comes from ``args[0]``; the
world size is ``len(config.devices) * nthreads * ngpus`` (one device entry per process).

Refusals (``ImportRefused``, exit 2) name file, line and field: a truncated row (token
count), a non-numeric or non-positive time, a non-numeric count/size/root/#wrong, rows
that imply a different world size than the run's (mixed world sizes in one ladder), a row
count that is not a whole number of cycles, a run without its ``# Avg bus bandwidth``
footer, a ``-C 1`` (cputime) table, the pre-2.13 layout (no root column, max-delta error
column), an undeterminable collective or world size, a world size contradicting
``--world-size``.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tracecanary.alphabeta.ladder import PER_RANK_COUNT, busbw_factor
from tracecanary.errors import ImportRefused, ResourceLimitExceeded
from tracecanary.limits import (
    check_text_depth,
    current_limits,
    refuse_json_constant,
    refuse_lone_surrogates,
)

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

_MPI_TAG = re.compile(r"^\[\d+,\d+\]<(?:stdout|stderr)>:")
_NCCL_LOG = re.compile(r"\bNCCL (?:INFO|WARN|TRACE|CALL)\b")
_NCCL_VERSION_LINE = re.compile(r"^\s*NCCL version\b")
_RUN_HEADER = re.compile(
    r"^#\s*nThread\s+(?P<nthread>\d+)\s+nGpus\s+(?P<ngpus>\d+)\s+minBytes\s+(?P<min>\d+)\s+"
    r"maxBytes\s+(?P<max>\d+)\s+step:\s*(?P<step>\d+)\((?P<kind>factor|bytes)\)"
)
_TESTS_VERSION = re.compile(r"^#\s*nccl-tests version\s+(?P<v>\S+)")
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(?P<name>\S+)")
_RANK_LINE = re.compile(r"^#\s+Rank\s+(?P<rank>\d+)\s")
_AVG_BW = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(?P<v>\S+)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(?P<n>\d+)")
_COLUMN_HEADER = re.compile(r"^#\s+size\s+count\s+type\b(?P<rest>.*)$")
_INT = re.compile(r"^-?\d+$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_CLOCK = re.compile(r"^\d{2}:\d{2}:\d{2}$")

_ROW_TOKEN_COUNTS = (13, 15, 21, 23)


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
    return recomputed_algbw_gbps(run) * busbw_factor(run.collective, run.world_size)


def half_ulp(text: str) -> float:
    """Half a unit in the last printed place of a number such as ``135.8``, ``12646`` or
    ``1.2e+07``: the largest rounding error of the printed value."""
    mantissa, _, exponent = text.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    scale = 10.0 ** (int(exponent) if exponent else 0)
    return 0.5 * 10.0 ** (-decimals) * scale


def _refuse(message: str, file: str, line: int | None, field_name: str | None) -> ImportRefused:
    if line is None:
        return ImportRefused(message, file=file, field=field_name)
    return ImportRefused(f"line {line}: {message}", file=file, record=line, field=field_name)


def rows_per_cycle(min_bytes: int, max_bytes: int, step: int, kind: str) -> int | None:
    """Number of sizes nccl-tests visits per cycle (its ``for size = min; size <= max`` loop)."""
    if step <= 0 or (kind == "factor" and (step < 2 or min_bytes == 0)) or max_bytes < min_bytes:
        return None
    if kind != "factor":  # arithmetic ladder: counted, not walked (the header is untrusted)
        n = (max_bytes - min_bytes) // step + 1
        return n if n <= 10_000_000 else None
    n, size = 0, min_bytes
    while size <= max_bytes:  # geometric: at most log2(max_bytes) steps
        n += 1
        size = size * step
    return n


def _collective_from_program(name: str) -> str | None:
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


def _resolve_collective(
    named: str | None,
    named_source: str,
    rows: pd.DataFrame,
    world_size: int | None,
    file: str,
    line: int,
    option: str | None,
) -> tuple[str, str]:
    candidates = _candidate_collectives(rows, world_size)
    if named is not None:
        if candidates and named not in candidates:
            raise _refuse(
                f"rows (redop/root/size-count ratio) contradict the named collective {named}",
                file,
                line,
                "redop",
            )
        if option is not None and option != named:
            raise _refuse(
                f"--collective {option} contradicts the run's own name {named}",
                file,
                line,
                "collective",
            )
        return named, named_source
    if option is not None:
        if candidates and option not in candidates:
            raise _refuse(
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
    raise _refuse(
        f"the run does not name its collective and its rows fit {sorted(candidates) or 'none'}; "
        "pass --collective",
        file,
        line,
        "collective",
    )


def _check_world_size_rows(rows: pd.DataFrame, collective: str, world_size: int, file: str) -> None:
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
        raise _refuse(
            f"row implies world size {implied[i]:g} (size/count/element size) but the run has "
            f"{world_size} ranks: mixed world sizes in one ladder",
            file,
            int(sub["line"].iloc[i]),
            "count",
        )


def _assign_cycles(
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
                raise _refuse(
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


def _parse_float(token: str, file: str, line: int, field_name: str, *, positive: bool) -> float:
    try:
        value = float(token)
    except ValueError:
        raise _refuse(f"{field_name} {token!r} is not a number", file, line, field_name) from None
    if not math.isfinite(value):
        raise _refuse(f"{field_name} {token!r} is not finite", file, line, field_name)
    if positive and value <= 0:
        raise _refuse(f"{field_name} {token!r} must be > 0", file, line, field_name)
    if not _plausible(value, positive):
        raise _refuse(f"{field_name} {token!r} is out of range", file, line, field_name)
    return value


MAX_FLOAT = 1e15  # us (31 years) or GB/s: beyond any measurement
MIN_POSITIVE = 1e-6  # nccl-tests prints at most 6 decimals; a smaller time is no reading


def _plausible(value: float, positive: bool) -> bool:
    """A printed time or bandwidth within what nccl-tests can print and ratios survive."""
    return abs(value) <= MAX_FLOAT and (not positive or value >= MIN_POSITIVE)


def _parse_int(token: str, file: str, line: int, field_name: str) -> int:
    if not _INT.match(token):
        raise _refuse(f"{field_name} {token!r} is not an integer"[:200], file, line, field_name)
    if len(token.lstrip("-")) > 18:  # beyond int64: no size, count or root is that large
        raise _refuse(f"{field_name} {token[:40]!r}... is too large", file, line, field_name)
    return int(token)


def _check_row_ints(size: int, count: int, root: int, file: str, line: int | None) -> None:
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


def _parse_wrong(token: str, file: str, line: int, field_name: str) -> int | None:
    if token == "N/A":
        return None
    value = _parse_float(token, file, line, field_name, positive=False)
    if value < 0:
        raise _refuse(f"{field_name} {token!r} is negative", file, line, field_name)
    return int(round(value))


class _RunBuilder:
    def __init__(
        self,
        file: str,
        run: int,
        first_line: int,
        header: re.Match,
        version: str | None,
        name: str | None,
    ):
        self.file = file
        self.run = run
        self.first_line = first_line
        self.nthread = int(header.group("nthread"))
        self.ngpus = int(header.group("ngpus"))
        self.per_cycle = rows_per_cycle(
            int(header.group("min")),
            int(header.group("max")),
            int(header.group("step")),
            header.group("kind"),
        )
        self.version = version
        self.program = name
        self.ranks: list[int] = []
        self.device_list_truncated = False
        self.column_rest: str | None = None
        self.cols: dict[str, list] = {c: [] for c in ROW_COLUMNS}
        self.avg_bw: float | None = None
        self.oob: int | None = None
        self.closed = False
        self.last_line = first_line

    def add_row(self, tokens: list[str], line: int) -> None:
        f = self.file
        n = len(tokens)
        if n not in _ROW_TOKEN_COUNTS:
            raise _refuse(
                f"truncated or malformed row: {n} tokens, expected 13, 15 (-S), 21 (-I) or 23 (-I -S)",
                f,
                line,
                "row",
            )
        per_iter = n in (21, 23)
        stamped = n in (15, 23)
        if self.column_rest is not None:
            head_iter = "i_min" in self.column_rest
            head_stamp = "timestamp" in self.column_rest
            if head_iter != per_iter or head_stamp != stamped:
                raise _refuse(
                    f"row has {n} tokens but the column header announces "
                    f"{'per-iteration columns' if head_iter else 'no per-iteration columns'} and "
                    f"{'a timestamp' if head_stamp else 'no timestamp'} (truncated row?)",
                    f,
                    line,
                    "row",
                )
        if stamped and not (_DATE.match(tokens[-2]) and _CLOCK.match(tokens[-1])):
            raise _refuse(f"timestamp {' '.join(tokens[-2:])!r} is malformed", f, line, "timestamp")
        size = _parse_int(tokens[0], f, line, "size")
        count = _parse_int(tokens[1], f, line, "count")
        if size < 0 or count < 0:
            raise _refuse("size and count must be >= 0", f, line, "size")
        dtype, redop = tokens[2], tokens[3]
        root = _parse_int(tokens[4], f, line, "root")
        _check_row_ints(size, count, root, f, line)
        width = 8 if per_iter else 4
        for p, placement in enumerate(("out_of_place", "in_place")):
            block = tokens[5 + p * width : 5 + (p + 1) * width]
            prefix = f"{placement}."
            time_us = _parse_float(block[0], f, line, prefix + "time", positive=True)
            algbw = _parse_float(block[1], f, line, prefix + "algbw", positive=False)
            busbw = _parse_float(block[2], f, line, prefix + "busbw", positive=False)
            wrong = _parse_wrong(block[3], f, line, prefix + "#wrong")
            for extra, label in zip(block[4:], ("i_min", "i_max", "i_p99", "i_cv%"), strict=False):
                _parse_float(extra, f, line, prefix + label, positive=False)
            c = self.cols
            c["line"].append(line)
            c["cycle"].append(0)
            c["size_bytes"].append(size)
            c["count"].append(count)
            c["dtype"].append(dtype)
            c["redop"].append(redop)
            c["root"].append(root)
            c["placement"].append(placement)
            c["time_us"].append(time_us)
            c["time_half_ulp_us"].append(half_ulp(block[0]))
            c["printed_algbw_gbps"].append(algbw)
            c["algbw_half_ulp_gbps"].append(half_ulp(block[1]))
            c["printed_busbw_gbps"].append(busbw)
            c["busbw_half_ulp_gbps"].append(half_ulp(block[2]))
            c["wrong"].append(wrong)
        self.last_line = line

    def finish(self, world_size_option: int | None, collective_option: str | None) -> NcclTestsRun:
        f = self.file
        if not self.closed:
            raise _refuse(
                "run has no '# Avg bus bandwidth' footer (truncated output?)",
                f,
                self.first_line,
                "footer",
            )
        rows = pd.DataFrame(self.cols).astype(ROW_COLUMNS)
        if rows.empty:
            raise _refuse("run has no data rows", f, self.first_line, "row")
        notes: list[str] = []
        # world size
        world_size, ws_source = None, None
        if self.ranks and not self.device_list_truncated:
            ranks = sorted(self.ranks)
            if ranks != list(range(len(ranks))):
                raise _refuse(
                    f"device list ranks {ranks[:8]}... are not 0..{len(ranks) - 1} each once",
                    f,
                    self.first_line,
                    "rank",
                )
            per_proc = self.nthread * self.ngpus
            if per_proc and len(ranks) % per_proc:
                raise _refuse(
                    f"{len(ranks)} device lines is not a multiple of nThread*nGpus = {per_proc}",
                    f,
                    self.first_line,
                    "rank",
                )
            world_size, ws_source = len(ranks), "device_list"
        elif self.device_list_truncated:
            notes.append("device list truncated by nccl-tests ('...'); world size not read from it")
        if (
            world_size is not None
            and world_size_option is not None
            and world_size != world_size_option
        ):
            raise _refuse(
                f"--world-size {world_size_option} contradicts the {world_size} ranks of the device list",
                f,
                self.first_line,
                "world_size",
            )
        named = _collective_from_program(self.program) if self.program else None
        if self.program and named is None:
            stem = os.path.basename(self.program).split("_perf")[0]
            raise _refuse(f"collective {stem!r} is not supported", f, self.first_line, "collective")
        guess_ws = world_size if world_size is not None else world_size_option
        collective, coll_source = _resolve_collective(
            named, "header", rows, guess_ws, f, self.first_line, collective_option
        )
        if world_size is None:
            derived = _world_size_from_rows(rows, collective)
            if derived is not None:
                if world_size_option is not None and world_size_option != derived:
                    raise _refuse(
                        f"--world-size {world_size_option} contradicts the {derived} ranks implied by "
                        "size/count",
                        f,
                        self.first_line,
                        "world_size",
                    )
                world_size, ws_source = derived, "data"
            elif world_size_option is not None:
                world_size, ws_source = world_size_option, "option"
            else:
                raise _refuse(
                    "world size unknown: no device list and the rows do not imply it; pass --world-size",
                    f,
                    self.first_line,
                    "world_size",
                )
        _check_world_size_rows(rows, collective, world_size, f)
        cycles, n_cycles = _assign_cycles(rows, self.per_cycle, f, self.last_line)
        rows["cycle"] = cycles
        return NcclTestsRun(
            file=f,
            run=self.run,
            first_line=self.first_line,
            layout="stdout",
            collective=collective,
            collective_source=coll_source,
            world_size=world_size,
            world_size_source=ws_source,
            rows=rows,
            rows_per_cycle=self.per_cycle,
            n_cycles=n_cycles,
            nccl_tests_version=self.version,
            avg_busbw_printed_gbps=self.avg_bw,
            out_of_bounds=self.oob,
            notes=notes,
        )


def _world_size_from_rows(rows: pd.DataFrame, collective: str) -> int | None:
    if collective not in PER_RANK_COUNT:
        return None
    elt = rows["dtype"].map(DTYPE_SIZES)
    ok = (rows["count"] > 0) & elt.notna()
    if not ok.any():
        return None
    first = rows.loc[ok].iloc[0]
    value = first["size_bytes"] / (first["count"] * DTYPE_SIZES[first["dtype"]])
    return int(value) if value == int(value) and value >= 1 else None


def parse_stdout(
    text: str,
    *,
    file: str,
    world_size: int | None = None,
    collective: str | None = None,
) -> list[NcclTestsRun]:
    """Parse every run in an nccl-tests stdout capture (see the module docstring)."""
    runs: list[NcclTestsRun] = []
    current: _RunBuilder | None = None
    pending_version: str | None = None
    pending_name: str | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = _MPI_TAG.sub("", raw, count=1).strip()
        if not line or _NCCL_LOG.search(line) or _NCCL_VERSION_LINE.match(line):
            continue
        if line.startswith("#"):
            if (m := _TESTS_VERSION.match(line)) is not None:
                pending_version = m.group("v")
            elif (m := _STARTING.match(line)) is not None:
                pending_name = m.group("name")
            elif (m := _RUN_HEADER.match(line)) is not None:
                if current is not None:
                    runs.append(current.finish(world_size, collective))
                current = _RunBuilder(file, len(runs), lineno, m, pending_version, pending_name)
                pending_version = pending_name = None
            elif current is None:
                continue
            elif (m := _RANK_LINE.match(line)) is not None:
                current.ranks.append(int(m.group("rank")))
                if line.endswith("..."):
                    current.device_list_truncated = True
            elif (m := _COLUMN_HEADER.match(line)) is not None:
                rest = m.group("rest")
                if not re.match(r"\s*redop\s+root\b", rest):
                    raise _refuse(
                        "pre-2.13 nccl-tests layout (no root column; 'error' is a max delta, not a "
                        "wrong-element count) is not supported",
                        file,
                        lineno,
                        "layout",
                    )
                if re.search(r"\bcputime\b", rest):
                    raise _refuse(
                        "the time column is cputime (-C 1): CPU launch time, not collective latency",
                        file,
                        lineno,
                        "time",
                    )
                current.column_rest = rest
            elif (m := _OOB.match(line)) is not None:
                current.oob = int(m.group("n"))
            elif (m := _AVG_BW.match(line)) is not None:
                current.avg_bw = _parse_float(
                    m.group("v"), file, lineno, "avg_bus_bandwidth", positive=False
                )
                current.closed = True
            continue
        tokens = line.split()
        if not _INT.match(tokens[0]):
            continue  # stray program output (warnings, MPI chatter)
        if current is None:
            raise _refuse("data row before any '# nThread' run header", file, lineno, "row")
        if current.closed:
            raise _refuse(
                "data row after the run's '# Avg bus bandwidth' footer", file, lineno, "row"
            )
        current.add_row(tokens, lineno)
    if current is not None:
        runs.append(current.finish(world_size, collective))
    if not runs:
        raise ImportRefused("no nccl-tests run found (no '# nThread ...' header)", file=file)
    return runs


# ----------------------------------------------------------------------------- JSON


def _json_bool(value, file: str, where: str) -> bool | None:
    if value in (True, "true"):
        return True
    if value in (False, "false"):
        return False
    if value is None:
        return None
    raise _refuse(f"{value!r} is not a boolean", file, None, where)


def _json_number(
    value, file: str, record: int, where: str, *, positive: bool, allow_nan: bool
) -> float:
    if isinstance(value, str):
        if value == "nan" and allow_nan:
            return math.nan
        raise ImportRefused(f"{value!r} is not a number", file=file, record=record, field=where)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ImportRefused(f"{value!r} is not a number", file=file, record=record, field=where)
    value = float(value)
    if not math.isfinite(value) and not (allow_nan and math.isnan(value)):
        raise ImportRefused(f"{value!r} is not finite", file=file, record=record, field=where)
    if positive and not value > 0:
        raise ImportRefused(f"{value!r} must be > 0", file=file, record=record, field=where)
    if not math.isnan(value) and not _plausible(value, positive):
        raise ImportRefused(f"{value!r} is out of range", file=file, record=record, field=where)
    return value


def _json_int(value, file: str, record: int | None, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and _INT.match(value.strip()) and len(value.strip()) <= 19:
            return int(value.strip())
        raise ImportRefused(
            f"{value!r} is not an integer"[:200], file=file, record=record, field=where
        )
    if abs(value) > 1 << 62:
        raise ImportRefused(f"{value} is too large", file=file, record=record, field=where)
    return int(value)


def parse_json(
    data: bytes,
    *,
    file: str,
    world_size: int | None = None,
    collective: str | None = None,
) -> list[NcclTestsRun]:
    """Parse an nccl-tests ``-J`` report (versions 1-3) into one run.

    For JSON, the ``line`` column holds the 1-based index into ``results`` and errors name
    that index as the record.
    """
    check_text_depth(data, current_limits().max_depth, file=file)
    try:
        doc = json.loads(data.decode("utf-8"), parse_constant=refuse_json_constant)
    except UnicodeDecodeError as err:
        raise ImportRefused(f"not UTF-8: {err}", file=file) from None
    except json.JSONDecodeError as err:
        raise ImportRefused(
            f"line {err.lineno}: invalid JSON: {err.msg}",
            file=file,
            record=err.lineno,
            field="json",
        ) from None
    except RecursionError:
        raise ResourceLimitExceeded("JSON nesting too deep", file=file, field="json") from None
    except ValueError as err:  # NaN / Infinity, or an integer too long to convert
        raise ImportRefused(f"invalid JSON: {err}", file=file, field="json") from None
    refuse_lone_surrogates(data, doc, file=file)
    if not isinstance(doc, dict):
        raise ImportRefused("top level is not an object", file=file, field="json")
    version = doc.get("version")
    if version not in (1, 2, 3):
        raise ImportRefused(
            f"unsupported nccl-tests JSON version {version!r}", file=file, field="version"
        )
    config = doc.get("config")
    if not isinstance(config, dict):
        raise ImportRefused("missing 'config' object", file=file, field="config")
    results = doc.get("results")
    if not isinstance(results, list) or not results:
        raise ImportRefused("missing or empty 'results' list", file=file, field="results")
    args = doc.get("args")
    program = args[0] if isinstance(args, list) and args and isinstance(args[0], str) else None
    nthreads = _json_int(config.get("nthreads", 1), file, None, "config.nthreads")
    ngpus = _json_int(config.get("ngpus", 1), file, None, "config.ngpus")
    devices = config.get("devices")
    ws, ws_source = None, None
    if isinstance(devices, list) and devices:
        ws, ws_source = len(devices) * nthreads * ngpus, "device_list"
        if world_size is not None and world_size != ws:
            raise ImportRefused(
                f"--world-size {world_size} contradicts {len(devices)} processes x {nthreads} threads x "
                f"{ngpus} GPUs = {ws}",
                file=file,
                field="world_size",
            )
    for key in ("blocking_collectives", "parallel_init", "per_iter_timing"):
        if key in config:
            _json_bool(config[key], file, f"config.{key}")
    min_b = _json_int(config.get("minimum_bytes", 0), file, None, "config.minimum_bytes")
    max_b = _json_int(config.get("maximum_bytes", 0), file, None, "config.maximum_bytes")
    if "step_factor" in config:
        per_cycle = rows_per_cycle(
            min_b,
            max_b,
            _json_int(config["step_factor"], file, None, "config.step_factor"),
            "factor",
        )
    elif "step_bytes" in config:
        per_cycle = rows_per_cycle(
            min_b, max_b, _json_int(config["step_bytes"], file, None, "config.step_bytes"), "bytes"
        )
    else:
        per_cycle = None
    cols: dict[str, list] = {c: [] for c in ROW_COLUMNS}
    for i, rec in enumerate(results, start=1):
        if not isinstance(rec, dict):
            raise ImportRefused("result is not an object", file=file, record=i, field="results")
        size = _json_int(rec.get("size"), file, i, "size")
        count = _json_int(rec.get("count"), file, i, "count")
        root = _json_int(rec.get("root"), file, i, "root")
        _check_row_ints(size, count, root, file, i)
        dtype, redop = rec.get("type"), rec.get("redop")
        if not isinstance(dtype, str) or not isinstance(redop, str):
            raise ImportRefused("type and redop must be strings", file=file, record=i, field="type")
        for placement in ("out_of_place", "in_place"):
            body = rec.get(placement)
            if body is None:
                if placement in rec:
                    continue  # nccl-tests writes null when a placement was not run
                raise ImportRefused(f"missing {placement}", file=file, record=i, field=placement)
            if not isinstance(body, dict):
                raise ImportRefused(
                    f"{placement} is not an object", file=file, record=i, field=placement
                )
            if "cpu_time" in body:
                raise ImportRefused(
                    "cpu_time (-C 1) is CPU launch time, not collective latency",
                    file=file,
                    record=i,
                    field=f"{placement}.cpu_time",
                )
            time_us = _json_number(
                body.get("time"), file, i, f"{placement}.time", positive=True, allow_nan=False
            )
            algbw = _json_number(
                body.get("alg_bw"), file, i, f"{placement}.alg_bw", positive=False, allow_nan=True
            )
            busbw = _json_number(
                body.get("bus_bw"), file, i, f"{placement}.bus_bw", positive=False, allow_nan=True
            )
            nwrong = body.get("nwrong")
            if nwrong is None:
                wrong = None
            else:
                w = _json_number(
                    nwrong, file, i, f"{placement}.nwrong", positive=False, allow_nan=False
                )
                if w < 0:
                    raise ImportRefused(
                        "nwrong is negative", file=file, record=i, field=f"{placement}.nwrong"
                    )
                wrong = int(round(w))
            cols["line"].append(i)
            cols["cycle"].append(0)
            cols["size_bytes"].append(size)
            cols["count"].append(count)
            cols["dtype"].append(dtype)
            cols["redop"].append(redop)
            cols["root"].append(root)
            cols["placement"].append(placement)
            cols["time_us"].append(time_us)
            cols["time_half_ulp_us"].append(0.0)  # "%lf" keeps 6 decimals: no useful rounding
            cols["printed_algbw_gbps"].append(algbw)
            cols["algbw_half_ulp_gbps"].append(5e-7)
            cols["printed_busbw_gbps"].append(busbw)
            cols["busbw_half_ulp_gbps"].append(5e-7)
            cols["wrong"].append(wrong)
    rows = pd.DataFrame(cols).astype(ROW_COLUMNS)
    if rows.empty:
        raise ImportRefused("no timed results", file=file, field="results")
    named = _collective_from_program(program) if program else None
    if program and named is None:
        stem = os.path.basename(program).split("_perf")[0]
        raise ImportRefused(f"collective {stem!r} is not supported", file=file, field="args")
    coll, coll_source = _resolve_collective(
        named, "json_args", rows, ws if ws is not None else world_size, file, 1, collective
    )
    if ws is None:
        derived = _world_size_from_rows(rows, coll)
        if derived is not None:
            if world_size is not None and world_size != derived:
                raise ImportRefused(
                    f"--world-size {world_size} contradicts the {derived} ranks implied by size/count",
                    file=file,
                    field="world_size",
                )
            ws, ws_source = derived, "data"
        elif world_size is not None:
            ws, ws_source = world_size, "option"
        else:
            raise ImportRefused(
                "world size unknown: no devices and the rows do not imply it; pass --world-size",
                file=file,
                field="world_size",
            )
    _check_world_size_rows(rows, coll, ws, file)
    cycles, n_cycles = _assign_cycles(rows, per_cycle, file, len(results))
    rows["cycle"] = cycles
    avg = doc.get("average_bus_bandwidth", doc.get("average_bus_bandwidith"))
    avg_value = None
    if isinstance(avg, dict):
        raw = avg.get("bandwidth", avg.get("bandwidith"))
        if raw is not None:
            avg_value = _json_number(
                raw, file, 0, "average_bus_bandwidth", positive=False, allow_nan=True
            )
            avg_value = None if math.isnan(avg_value) else avg_value
    oob = doc.get("out_of_bounds")
    nccl_version = doc.get("nccl_version")
    return [
        NcclTestsRun(
            file=file,
            run=0,
            first_line=1,
            layout="json",
            collective=coll,
            collective_source=coll_source,
            world_size=ws,
            world_size_source=ws_source,
            rows=rows,
            rows_per_cycle=per_cycle,
            n_cycles=n_cycles,
            nccl_tests_version=None,
            nccl_version=None if nccl_version is None else str(nccl_version),
            avg_busbw_printed_gbps=avg_value,
            out_of_bounds=oob.get("count")
            if isinstance(oob, dict) and isinstance(oob.get("count"), int)
            else None,
        )
    ]
