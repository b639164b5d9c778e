"""Recompute every receipt a canary carries from the source it claims to summarize.

``verify_commitments(source, canary)`` returns a list of mismatches, each
``{"segment": where, "expected": what the canary states, "found": what the source
gives}``; an empty list means every receipt holds. Checked:

- ``source``: the whole source's ``source_digest`` against ``source.digest``;
- ``source_commitment``: the segment commitment of the covered occurrences [0, N);
- every bounded interval's ``commitment`` (segment [start, stop));
- every interval's stated ``max_error_ns`` against the error the representative really
  has on the source, and against the budget of its signature;
- exactness of everything stated exactly: the signature sequence, groups, measured
  masks, tail flags, and every lossless timing stream;
- ``execution``: the stated reduced execution is exactly what the recorded
  ``execution.policy`` selects on this canary (no policy: nothing reduced), so what a
  replay runs and with which weights is recomputable, not merely asserted.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracecanary.compile import timing
from tracecanary.compile.budget import FIELDS, parse_overrides
from tracecanary.compile.canary import prefix_program
from tracecanary.compile.execution import check_execution
from tracecanary.compile.expand import expand_canary
from tracecanary.compile.source import SourceSerialization, serialize_source
from tracecanary.program import Program

_COLS = {
    "gap": ("gap_ns", None),
    "overlap": ("overlap_ns", "has_overlap"),
    "latency": ("latency_ns", "has_latency"),
}


def _mismatch(segment: str, expected, found) -> dict:
    return {"segment": segment, "expected": expected, "found": found}


def verify_commitments(
    source: Program,
    canary: dict,
    *,
    serialization: SourceSerialization | None = None,
    expanded: Program | None = None,
) -> list[dict]:
    """Mismatches between ``canary``'s receipts and ``source`` (see module doc).

    ``serialization``: ``serialize_source(source)`` when the caller already holds it
    (the behavior search); used only if it was made from this very ``source`` object,
    else recomputed. ``expanded``: ``expand_canary(canary)`` (logical) when the caller
    already holds it. Neither changes the result, only what is recomputed."""
    out: list[dict] = []
    ser = (
        serialization
        if serialization is not None and serialization.program is source
        else serialize_source(source)
    )
    digest = ser.digest()
    if digest != canary["source"]["digest"]:
        out.append(_mismatch("source", canary["source"]["digest"], digest))
    sc = canary["source_commitment"]
    stop = int(sc["stop"])
    if stop > source.n:
        out.append(
            _mismatch(
                f"source_commitment [0, {stop})", sc["sha256"], f"source has {source.n} occurrences"
            )
        )
        return out
    found = ser.segment(int(sc["start"]), stop)
    if found != sc["sha256"]:
        out.append(_mismatch(f"source_commitment [{sc['start']}, {stop})", sc["sha256"], found))
    for name in FIELDS:
        stream = canary["timing"].get(name)
        if stream is None or stream["encoding"] != "bounded_intervals":
            continue
        for k, itv in enumerate(stream["intervals"]):
            s, e = int(itv["start"]), int(itv["stop"])
            where = f"timing.{name}.intervals[{k}] [{s}, {e})"
            if not 0 <= s < e <= ser.n:
                out.append(_mismatch(where, itv["commitment"], "range outside the source"))
                continue
            got = ser.segment(s, e)
            if got != itv["commitment"]:
                out.append(_mismatch(where, itv["commitment"], got))
    del ser, serialization  # no more commitments to read: free the lines if ours
    covered = prefix_program(source, stop)
    out.extend(_check_content(covered, canary, expanded))
    out.extend(
        _mismatch("execution", "the reduction execution.policy selects", found)
        for found in check_execution(canary)
    )
    return out


def _differs(a: pd.Series, b: pd.Series) -> np.ndarray:
    """Row-wise ``a != b`` as a numpy bool array (string columns compared in Arrow,
    without materializing one Python string per row; missing compares unequal, as
    numpy's object comparison of NaN does)."""
    if isinstance(a.dtype, pd.StringDtype) and isinstance(b.dtype, pd.StringDtype):
        return np.asarray(a.array != b.array, dtype=bool)
    return np.asarray(a.to_numpy() != b.to_numpy(), dtype=bool)


def _check_content(source: Program, canary: dict, expanded: Program | None = None) -> list[dict]:
    out: list[dict] = []
    if expanded is None:
        expanded = expand_canary(canary, executed=False)
    if expanded.n != source.n:
        return [_mismatch("structure", f"{expanded.n} occurrences", f"{source.n} occurrences")]
    so, eo = source.occurrences, expanded.occurrences
    for col in (
        "op",
        "bytes",
        "dtype",
        "group",
        "root",
        "phase",
        "stream",
        "group_size",
        "tail",
        "has_overlap",
        "has_latency",
    ):
        diff = np.flatnonzero(_differs(eo[col], so[col]))
        if len(diff):
            i = int(diff[0])
            out.append(
                _mismatch(f"occurrence {i} field {col}", _py(eo[col].iloc[i]), _py(so[col].iloc[i]))
            )
    if len(expanded.members) != len(source.members) or not np.array_equal(
        expanded.members["rank"].to_numpy(), source.members["rank"].to_numpy()
    ):
        out.append(
            _mismatch("members", "the canary's group members", "different members in the source")
        )
        return out
    if bool(canary["source"]["skew_known"]) != bool(source.skew_known):
        out.append(
            _mismatch("source.skew_known", canary["source"]["skew_known"], source.skew_known)
        )
        return out
    if out:
        return out
    sig_ids, _ = source.signature_ids()
    overrides = parse_overrides(canary["budget"].get("overrides", {}))
    offsets = np.concatenate(([0], np.cumsum(so["group_size"].to_numpy(dtype=np.int64))))
    for name in FIELDS:
        stream = canary["timing"].get(name)
        if stream is None:
            continue
        if name == "skew":
            src = source.members["skew_ns"].to_numpy(dtype=np.int64)
            got = expanded.members["skew_ns"].to_numpy(dtype=np.int64)
            mask = None
        else:
            col, mcol = _COLS[name]
            src = so[col].to_numpy(dtype=np.int64)
            got = eo[col].to_numpy(dtype=np.int64)
            mask = None if mcol is None else so[mcol].to_numpy(dtype=bool)
        err = np.abs(src - got)
        if mask is not None:
            err = np.where(mask, err, 0)
        if stream["encoding"] == "exact":
            bad = np.flatnonzero(err)
            if len(bad):
                i = int(bad[0])
                occ_i = int(np.searchsorted(offsets, i, side="right") - 1) if name == "skew" else i
                out.append(_mismatch(f"timing.{name} occurrence {occ_i}", int(got[i]), int(src[i])))
            continue
        budget = np.full(
            len(canary["signatures"]), int(canary["budget"][f"{name}_ns"]), dtype=np.int64
        )
        for sig, fields in overrides.items():
            if name in fields and 0 <= sig < len(budget):
                budget[sig] = fields[name]
        out.extend(_check_intervals(name, stream["intervals"], err, offsets, budget[sig_ids], mask))
    return out


def _check_intervals(name, intervals, err, offsets, budget_occ, mask) -> list[dict]:
    out = []
    skew = name == "skew"
    for k, itv in enumerate(intervals):
        s, e, p = int(itv["start"]), int(itv["stop"]), int(itv["period"])
        where = f"timing.{name}.intervals[{k}] [{s}, {e})"
        if skew:
            per_member = err[offsets[s] : offsets[e]]
            occ_of = np.repeat(np.arange(s, e), np.diff(offsets[s : e + 1]))
            per_occ = np.zeros(e - s, dtype=np.int64)
            np.maximum.at(per_occ, occ_of - s, per_member)
            has = np.ones((e - s) // p * p, dtype=bool).reshape(-1, p)
        else:
            per_occ = err[s:e]
            has = (np.ones(e - s, bool) if mask is None else mask[s:e]).reshape(-1, p)
        actual_pos = np.where(has, per_occ.reshape(-1, p), -1).max(axis=0)
        stated = [(-1 if v is None else int(v)) for v in itv["max_error_ns"]]
        if [int(v) for v in actual_pos] != stated:
            out.append(
                _mismatch(
                    f"{where} max_error_ns",
                    itv["max_error_ns"],
                    [None if v < 0 else int(v) for v in actual_pos],
                )
            )
        over = np.flatnonzero(per_occ > budget_occ[s:e])
        if len(over):
            i = s + int(over[0])
            out.append(
                _mismatch(
                    f"{where} budget at occurrence {i}", int(budget_occ[i]), int(per_occ[over[0]])
                )
            )
    return out


def _py(v):
    if isinstance(v, np.generic):
        return v.item()
    return v


__all__ = ["verify_commitments", "timing"]
