"""nccl-tests ``*_perf`` stdout -> per-run tables (``nccltests.NcclTestsRun``).

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

Refusals (``ImportRefused``, exit 2) name file, line and field: a truncated row (token
count), a non-numeric or non-positive time, a non-numeric count/size/root/#wrong, a run
without its ``# Avg bus bandwidth`` footer, a ``-C 1`` (cputime) table, the pre-2.13
layout (no root column, max-delta error column), a device list that is not ranks 0..n-1,
and the checks of every parsed run (``nccltests``).
"""

from __future__ import annotations

import math
import os
import re

import pandas as pd

from tracecanary.alphabeta.nccltests import (
    INTEGER,
    ROW_COLUMNS,
    NcclTestsRun,
    assign_cycles,
    check_row_ints,
    check_world_size_rows,
    collective_from_program,
    plausible,
    refuse,
    resolve_collective,
    rows_per_cycle,
    world_size_from_rows,
)
from tracecanary.errors import ImportRefused

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
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_CLOCK = re.compile(r"^\d{2}:\d{2}:\d{2}$")

_ROW_TOKEN_COUNTS = (13, 15, 21, 23)


def half_ulp(text: str) -> float:
    """Half a unit in the last printed place of a number such as ``135.8``, ``12646`` or
    ``1.2e+07``: the largest rounding error of the printed value."""
    mantissa, _, exponent = text.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    scale = 10.0 ** (int(exponent) if exponent else 0)
    return 0.5 * 10.0 ** (-decimals) * scale


def _parse_float(token: str, file: str, line: int, field_name: str, *, positive: bool) -> float:
    try:
        value = float(token)
    except ValueError:
        raise refuse(f"{field_name} {token!r} is not a number", file, line, field_name) from None
    if not math.isfinite(value):
        raise refuse(f"{field_name} {token!r} is not finite", file, line, field_name)
    if positive and value <= 0:
        raise refuse(f"{field_name} {token!r} must be > 0", file, line, field_name)
    if not plausible(value, positive):
        raise refuse(f"{field_name} {token!r} is out of range", file, line, field_name)
    return value


def _parse_int(token: str, file: str, line: int, field_name: str) -> int:
    if not INTEGER.match(token):
        raise refuse(f"{field_name} {token!r} is not an integer"[:200], file, line, field_name)
    if len(token.lstrip("-")) > 18:  # beyond int64: no size, count or root is that large
        raise refuse(f"{field_name} {token[:40]!r}... is too large", file, line, field_name)
    return int(token)


def _parse_wrong(token: str, file: str, line: int, field_name: str) -> int | None:
    if token == "N/A":
        return None
    value = _parse_float(token, file, line, field_name, positive=False)
    if value < 0:
        raise refuse(f"{field_name} {token!r} is negative", file, line, field_name)
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
            raise refuse(
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
                raise refuse(
                    f"row has {n} tokens but the column header announces "
                    f"{'per-iteration columns' if head_iter else 'no per-iteration columns'} and "
                    f"{'a timestamp' if head_stamp else 'no timestamp'} (truncated row?)",
                    f,
                    line,
                    "row",
                )
        if stamped and not (_DATE.match(tokens[-2]) and _CLOCK.match(tokens[-1])):
            raise refuse(f"timestamp {' '.join(tokens[-2:])!r} is malformed", f, line, "timestamp")
        size = _parse_int(tokens[0], f, line, "size")
        count = _parse_int(tokens[1], f, line, "count")
        if size < 0 or count < 0:
            raise refuse("size and count must be >= 0", f, line, "size")
        dtype, redop = tokens[2], tokens[3]
        root = _parse_int(tokens[4], f, line, "root")
        check_row_ints(size, count, root, f, line)
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
            raise refuse(
                "run has no '# Avg bus bandwidth' footer (truncated output?)",
                f,
                self.first_line,
                "footer",
            )
        rows = pd.DataFrame(self.cols).astype(ROW_COLUMNS)
        if rows.empty:
            raise refuse("run has no data rows", f, self.first_line, "row")
        notes: list[str] = []
        # world size
        world_size, ws_source = None, None
        if self.ranks and not self.device_list_truncated:
            ranks = sorted(self.ranks)
            if ranks != list(range(len(ranks))):
                raise refuse(
                    f"device list ranks {ranks[:8]}... are not 0..{len(ranks) - 1} each once",
                    f,
                    self.first_line,
                    "rank",
                )
            per_proc = self.nthread * self.ngpus
            if per_proc and len(ranks) % per_proc:
                raise refuse(
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
            raise refuse(
                f"--world-size {world_size_option} contradicts the {world_size} ranks of the device list",
                f,
                self.first_line,
                "world_size",
            )
        named = collective_from_program(self.program) if self.program else None
        if self.program and named is None:
            stem = os.path.basename(self.program).split("_perf")[0]
            raise refuse(f"collective {stem!r} is not supported", f, self.first_line, "collective")
        guess_ws = world_size if world_size is not None else world_size_option
        collective, coll_source = resolve_collective(
            named, "header", rows, guess_ws, f, self.first_line, collective_option
        )
        if world_size is None:
            derived = world_size_from_rows(rows, collective)
            if derived is not None:
                if world_size_option is not None and world_size_option != derived:
                    raise refuse(
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
                raise refuse(
                    "world size unknown: no device list and the rows do not imply it; pass --world-size",
                    f,
                    self.first_line,
                    "world_size",
                )
        check_world_size_rows(rows, collective, world_size, f)
        cycles, n_cycles = assign_cycles(rows, self.per_cycle, f, self.last_line)
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
                    raise refuse(
                        "pre-2.13 nccl-tests layout (no root column; 'error' is a max delta, not a "
                        "wrong-element count) is not supported",
                        file,
                        lineno,
                        "layout",
                    )
                if re.search(r"\bcputime\b", rest):
                    raise refuse(
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
        if not INTEGER.match(tokens[0]):
            continue  # stray program output (warnings, MPI chatter)
        if current is None:
            raise refuse("data row before any '# nThread' run header", file, lineno, "row")
        if current.closed:
            raise refuse(
                "data row after the run's '# Avg bus bandwidth' footer", file, lineno, "row"
            )
        current.add_row(tokens, lineno)
    if current is not None:
        runs.append(current.finish(world_size, collective))
    if not runs:
        raise ImportRefused("no nccl-tests run found (no '# nThread ...' header)", file=file)
    return runs
