"""NCCL TUNING logs (``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING``) -> per-size records.

Each record line carries NCCL's ``host:pid:tid [dev] NCCL INFO `` prefix (optionally after
an ``NCCL_DEBUG_TIMESTAMP_FORMAT`` stamp or an mpirun ``[1,0]<stdout>:`` tag). Three
message forms exist, by NCCL version:

    2.20-2.22  ``%ld Bytes -> Algo %d proto %d time %f``
    2.23       ``%s: %ld Bytes -> Algo %d proto %d time %f``   (function name first)
    2.24+      ``%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}``  (no time)

Enumerations (NCCL ``nccl_common.h``): algorithm 0 TREE, 1 RING, 2 COLLNET_DIRECT,
3 COLLNET_CHAIN, 4 NVLS, 5 NVLS_TREE, 6 PAT; protocol 0 LL, 1 LL128, 2 SIMPLE.

``time`` is NCCL's *model prediction* in microseconds (its tuner's latency + bytes/bw
estimate), never a measurement.

Bytes: the 2.20-2.23 forms log ``typeSize * maxSendRecvCount`` = the nccl-tests size for
every collective. The 2.24+ form logs ``count * typeSize`` of the call, which for
AllGather and ReduceScatter is the per-rank count: the nccl-tests size is that times the
world size (``ladder_bytes``).

Guarantees: repeated records for one (function, size) must agree exactly in algorithm,
protocol and time, else ``ImportRefused`` naming the size and both lines; a line that
announces ``Bytes -> Algo`` but matches none of the forms is refused with its line.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tracecanary.errors import ImportRefused
from tracecanary.limits import current_limits

ALGORITHMS: tuple[str, ...] = (
    "TREE",
    "RING",
    "COLLNET_DIRECT",
    "COLLNET_CHAIN",
    "NVLS",
    "NVLS_TREE",
    "PAT",
)
PROTOCOLS: tuple[str, ...] = ("LL", "LL128", "SIMPLE")

# NCCL's ncclFuncToString -> our collective names.
FUNC_TO_COLLECTIVE: dict[str, str] = {
    "AllReduce": "all_reduce",
    "AllGather": "all_gather",
    "ReduceScatter": "reduce_scatter",
    "Broadcast": "broadcast",
    "Reduce": "reduce",
    "SendRecv": "sendrecv",
    "Send": "sendrecv",
    "Recv": "sendrecv",
}
# Collectives whose 2.24+ byte count is per rank (count * typeSize of the call).
PER_RANK_BYTES_V224: frozenset[str] = frozenset({"all_gather", "reduce_scatter"})

_INFO = re.compile(
    r"(?P<host>\S+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] NCCL INFO (?P<msg>.*)$"
)
_FORM1 = re.compile(
    r"^(?P<bytes>\d+) Bytes -> Algo (?P<algo>-?\d+) proto (?P<proto>-?\d+) time (?P<time>\S+)$"
)
_FORM2 = re.compile(
    r"^(?P<func>[A-Za-z]+): (?P<bytes>\d+) Bytes -> Algo (?P<algo>-?\d+) proto (?P<proto>-?\d+) "
    r"time (?P<time>\S+)$"
)
_FORM3 = re.compile(
    r"^(?P<func>[A-Za-z]+): (?P<bytes>\d+) Bytes -> Algo (?P<algo>[A-Z_0-9]+) "
    r"proto (?P<proto>[A-Z_0-9]+) channel\{Lo\.\.Hi\}=\{(?P<lo>\d+)\.\.(?P<hi>\d+)\}$"
)
_NRANKS = re.compile(r"\bnranks (?P<n>\d+)\b.*Init COMPLETE", re.IGNORECASE)
_OTHER_TUNING = re.compile(r"^[A-Za-z]+ \[[^\]]+\]: \d+ Bytes -> ")

RECORD_COLUMNS: dict[str, str] = {
    "func": "object",  # str, or None for the 2.20-2.22 form
    "bytes": "int64",
    "algorithm": "str",
    "protocol": "str",
    "time_us": "float64",  # NaN for the 2.24+ form (no time logged)
    "form": "int64",  # 1, 2 or 3 as in the module docstring
    "channels": "object",  # tuple of "lo..hi" strings seen (form 3), () otherwise
    "n_lines": "int64",
    "first_line": "int64",
}


@dataclass
class TuningLog:
    """Parsed TUNING evidence of one log file."""

    file: str
    records: pd.DataFrame
    form_counts: dict[int, int]
    nranks: tuple[int, ...]
    other_tuning_lines: int
    notes: list[str] = field(default_factory=list)


MAX_TIME_US = 1e15  # 31 years: beyond any tuner prediction


def _refuse(message: str, file: str, line: int, field_name: str) -> ImportRefused:
    return ImportRefused(f"line {line}: {message}", file=file, record=line, field=field_name)


def _enum_name(token: str, names: tuple[str, ...], file: str, line: int, field_name: str) -> str:
    if token.lstrip("-").isdigit():
        value = int(token) if len(token) <= 18 else len(names)
        if 0 <= value < len(names):
            return names[value]
        raise _refuse(
            f"{field_name} {value} is not a known NCCL enum value", file, line, field_name
        )
    if token in names:
        return token
    raise _refuse(f"{field_name} {token!r} is not a known NCCL name", file, line, field_name)


def parse_tuning(text: str, *, file: str) -> TuningLog:
    """Parse every TUNING algorithm record in ``text``; other lines are ignored."""
    merged: dict[tuple[str | None, int], dict] = {}
    limits = current_limits()
    form_counts = {1: 0, 2: 0, 3: 0}
    nranks: set[int] = set()
    other = 0
    for lineno, raw in enumerate(text.splitlines(), start=1):
        m = _INFO.search(raw)
        if m is None:
            continue
        msg = m.group("msg").rstrip()
        nr = _NRANKS.search(msg)
        if nr is not None:
            n = int(nr.group("n")) if len(nr.group("n")) <= 18 else limits.max_ranks + 1
            if not 1 <= n <= limits.max_ranks:
                raise _refuse(
                    f"nranks {nr.group('n')[:40]} is not 1..max_ranks", file, lineno, "nranks"
                )
            nranks.add(n)
            continue
        if _OTHER_TUNING.match(msg):
            other += 1
            continue
        if "Bytes -> Algo" not in msg:
            continue
        func: str | None
        channels: tuple[str, ...] = ()
        if (g := _FORM3.match(msg)) is not None:
            form, func, time_us = 3, g.group("func"), math.nan
            if len(g.group("lo")) > 9 or len(g.group("hi")) > 9:
                raise _refuse("channel index is too large", file, lineno, "channels")
            channels = (f"{int(g.group('lo'))}..{int(g.group('hi'))}",)
        elif (g := _FORM2.match(msg)) is not None:
            form, func = 2, g.group("func")
        elif (g := _FORM1.match(msg)) is not None:
            form, func = 1, None
        else:
            raise _refuse(f"malformed TUNING record {msg!r}", file, lineno, "record")
        if func is not None and func not in FUNC_TO_COLLECTIVE:
            raise _refuse(f"unknown NCCL function {func!r}", file, lineno, "func")
        algorithm = _enum_name(g.group("algo"), ALGORITHMS, file, lineno, "algorithm")
        protocol = _enum_name(g.group("proto"), PROTOCOLS, file, lineno, "protocol")
        if form != 3:
            try:
                time_us = float(g.group("time"))
            except ValueError:
                raise _refuse(
                    f"time {g.group('time')!r} is not a number", file, lineno, "time"
                ) from None
            if not math.isfinite(time_us):
                raise _refuse(f"time {g.group('time')!r} is not finite", file, lineno, "time")
            if abs(time_us) > MAX_TIME_US:
                raise _refuse(f"time {g.group('time')!r} is out of range", file, lineno, "time")
        if len(g.group("bytes")) > 18:
            raise _refuse(f"{g.group('bytes')[:40]}... bytes is too large", file, lineno, "bytes")
        size = int(g.group("bytes"))
        if size > limits.max_message_bytes:
            raise _refuse(
                f"{size} bytes is over max_message_bytes={limits.max_message_bytes}",
                file,
                lineno,
                "bytes",
            )
        form_counts[form] += 1
        key = (func, size)
        prev = merged.get(key)
        if prev is None:
            merged[key] = {
                "func": func,
                "bytes": size,
                "algorithm": algorithm,
                "protocol": protocol,
                "time_us": time_us,
                "form": form,
                "channels": set(channels),
                "n_lines": 1,
                "first_line": lineno,
            }
            continue
        same_time = (math.isnan(prev["time_us"]) and math.isnan(time_us)) or prev[
            "time_us"
        ] == time_us
        if prev["algorithm"] != algorithm or prev["protocol"] != protocol or not same_time:
            what = (
                "algorithm"
                if prev["algorithm"] != algorithm
                else ("protocol" if prev["protocol"] != protocol else "time")
            )
            name = f"{func} " if func else ""
            raise _refuse(
                f"inconsistent TUNING records for {name}{size} bytes: line {prev['first_line']} says "
                f"{prev['algorithm']}/{prev['protocol']} time {_fmt_time(prev['time_us'])}, this line "
                f"says {algorithm}/{protocol} time {_fmt_time(time_us)}",
                file,
                lineno,
                what,
            )
        prev["channels"].update(channels)
        prev["n_lines"] += 1
    rows = sorted(merged.values(), key=lambda r: (r["func"] or "", r["bytes"]))
    for r in rows:
        r["channels"] = tuple(
            sorted(r["channels"], key=lambda s: tuple(int(v) for v in s.split("..")))
        )
    records = pd.DataFrame(rows, columns=list(RECORD_COLUMNS)).astype(
        {k: v for k, v in RECORD_COLUMNS.items() if v != "object"}
    )
    # keep None (2.20-2.22 form) as None: pandas would turn a str/None mix into NaN
    records["func"] = pd.Series([r["func"] for r in rows], dtype=object, index=records.index)
    return TuningLog(
        file=file,
        records=records,
        form_counts={k: v for k, v in form_counts.items() if v},
        nranks=tuple(sorted(nranks)),
        other_tuning_lines=other,
    )


def _fmt_time(value: float) -> str:
    return "none" if math.isnan(value) else f"{value:f}"


def merge_logs(logs: list[TuningLog]) -> pd.DataFrame:
    """Union of several logs' records; the same (function, size) must agree across logs."""
    frames = []
    for log in logs:
        frame = log.records.copy()
        frame["file"] = log.file
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=[*RECORD_COLUMNS, "file"])
    all_rows = pd.concat(frames, ignore_index=True)
    seen: dict[tuple, pd.Series] = {}
    keep = []
    for idx, row in all_rows.iterrows():
        key = (row["func"], int(row["bytes"]))
        prev = seen.get(key)
        if prev is None:
            seen[key] = row
            keep.append(idx)
            continue
        same_time = (math.isnan(prev["time_us"]) and math.isnan(row["time_us"])) or prev[
            "time_us"
        ] == row["time_us"]
        if (
            prev["algorithm"] != row["algorithm"]
            or prev["protocol"] != row["protocol"]
            or not same_time
        ):
            raise _refuse(
                f"inconsistent TUNING records for {row['func'] or ''} {int(row['bytes'])} bytes across "
                f"logs: {prev['file']} line {int(prev['first_line'])} says "
                f"{prev['algorithm']}/{prev['protocol']} time {_fmt_time(prev['time_us'])}",
                row["file"],
                int(row["first_line"]),
                "algorithm",
            )
    return all_rows.loc[keep].reset_index(drop=True)


def records_for_ladder(
    records: pd.DataFrame,
    *,
    collective: str,
    world_size: int,
    funcless_applies: bool,
) -> pd.DataFrame:
    """TUNING records that describe one ladder, keyed by the ladder's nccl-tests bytes.

    ``funcless_applies``: whether records without a function name (2.20-2.22 form) may be
    attributed to this collective (the caller decides: only when one eligible collective is
    present). Returns columns ladder_bytes, algorithm, protocol, predicted_us (NaN without
    time), form, first_line, file.
    """
    if records.empty:
        return pd.DataFrame(
            columns=[
                "ladder_bytes",
                "algorithm",
                "protocol",
                "predicted_us",
                "form",
                "first_line",
                "file",
            ]
        )
    funcs = list(records["func"])
    named = np.array(
        [isinstance(f, str) and FUNC_TO_COLLECTIVE[f] == collective for f in funcs], dtype=bool
    )
    funcless = np.array([not isinstance(f, str) for f in funcs], dtype=bool)
    mask = named | funcless if funcless_applies else named
    chosen = records.loc[mask]
    multiplier = [
        world_size if (form == 3 and collective in PER_RANK_BYTES_V224) else 1
        for form in chosen["form"].to_numpy()
    ]
    out = pd.DataFrame(
        {
            "ladder_bytes": chosen["bytes"].to_numpy(dtype="int64")
            * pd.Series(multiplier, dtype="int64").to_numpy(),
            "algorithm": chosen["algorithm"].to_numpy(),
            "protocol": chosen["protocol"].to_numpy(),
            "predicted_us": chosen["time_us"].to_numpy(dtype="float64"),
            "form": chosen["form"].to_numpy(),
            "first_line": chosen["first_line"].to_numpy(),
            "file": chosen["file"].to_numpy() if "file" in chosen else "",
        }
    )
    return out.sort_values("ladder_bytes", kind="stable").reset_index(drop=True)
