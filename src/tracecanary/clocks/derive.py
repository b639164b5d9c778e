"""A clock calibration derived from the trace itself (``method: derived-causality``).

``derive_calibration`` turns the happens-before constraints of matched collectives and
send/recv (``constraints``) into a ``tracecanary.calibration/v1`` document:

- per clock domain that constraints connect to the reference both ways: the feasible
  offset interval ``offset_interval_ns`` (every offset in it satisfies every constraint
  used, and no offset outside it does, given the model), the estimate ``offset_ns`` (the
  interval's midpoint), ``uncertainty_ns`` (the half-width, rounded up; with drift: the
  largest error of the mapped time over the capture for any offset and drift inside their
  intervals), ``constraints`` (event pairs used) and ``binding`` (the constraints that
  give the interval's two ends, each naming its two events);
- clocks not connected both ways are listed in ``unknown_clocks`` with the reason;
- infeasible constraints raise ClockError naming the events and ranks of a contradiction;
- events without a measured end time are counted and said in ``notes``, never used.

Drift: ``drift="none"`` assumes every clock runs at the reference rate; ``"fit"`` solves
for a linear drift per clock as well; ``"auto"`` fits drift when the capture spans at
least ``DRIFT_MIN_SPAN_NS``.

``calibrate_captures`` is the library entry point the CLI and a workflow rule call:
captures in, validated through ingest and matching (every merge refusal applies), the
document out (written atomically by the caller's choice of path).
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from tracecanary.clocks import DRIFT_MIN_SPAN_NS, DRIFT_MODES
from tracecanary.clocks.constraints import (
    CAUSAL_ROLES,
    ClockError,
    ConstraintSet,
    collect_constraints,
    contradiction,
    describe_event,
)
from tracecanary.clocks.solve import InfeasibleClocks, solve_drift, solve_offsets
from tracecanary.errors import InputError
from tracecanary.formats.ids import CALIBRATION_FORMAT

METHOD = "derived-causality"
DRIFT_BINS = 32
MAX_BINDING = 4
BOUND_NOTE = (
    "derived-causality: each clock's offset maps its local time onto the reference "
    "(reference = local + offset_ns + drift_ppb * (local - anchor_ns) / 1e9). "
    "offset_interval_ns is the set of offsets every happens-before constraint used allows "
    "(a collective cannot complete on one member before the members it needs started it; "
    "a recv cannot complete before its send started); offset_ns is its midpoint and "
    "uncertainty_ns its half-width, rounded up. The true offset lies inside the interval "
    "whenever the captured start and end times are correct (an end time is the arrival, "
    "arrival_ns or else ts_ns, plus latency_ns) and the drift model holds."
)


def _binding(cs: ConstraintSet, frame: pd.DataFrame, edges: list[tuple[int, int]], side: str):
    out = []
    for a, b in edges[:MAX_BINDING]:
        out.append(
            {
                "side": side,
                "bound_ns": int(cs.bound_ns[a, b]),
                "later_clock": cs.domains[a],
                "later_event": describe_event(frame, int(cs.later_row[a, b])),
                "earlier_clock": cs.domains[b],
                "earlier_event": describe_event(frame, int(cs.earlier_row[a, b])),
            }
        )
    return out


def _drift_binding(
    cs: ConstraintSet, frame: pd.DataFrame, rows: list[tuple[int, str]]
) -> list[dict]:
    """The binned constraints with nonzero duals in the offset programs."""
    binned = cs.binned
    out = []
    for i, side in list(dict.fromkeys(rows))[: 2 * MAX_BINDING]:
        a, b = int(binned["a"][i]), int(binned["b"][i])
        out.append(
            {
                "side": side,
                "bound_ns": int(binned["end_ns"][i] - binned["start_ns"][i]),
                "later_clock": cs.domains[a],
                "later_event": describe_event(frame, int(binned["later_row"][i])),
                "earlier_clock": cs.domains[b],
                "earlier_event": describe_event(frame, int(binned["earlier_row"][i])),
            }
        )
    return out


def _connected_count(cs: ConstraintSet, v: int) -> int:
    off_diag = cs.count.copy()
    np.fill_diagonal(off_diag, 0)
    return int(off_diag[v, :].sum() + off_diag[:, v].sum())


def derive_calibration(
    frame: pd.DataFrame,
    clocks: dict[int, str],
    *,
    reference: str | None = None,
    drift: str = "auto",
    file: str | None = None,
) -> dict:
    """The ``tracecanary.calibration/v1`` document of the matched events in ``frame``."""
    if drift not in DRIFT_MODES:
        raise InputError(
            f"drift mode {drift!r}: use one of {', '.join(DRIFT_MODES)}", field="drift"
        )
    seen = sorted(int(r) for r in np.unique(frame["rank"].to_numpy()))
    domains = sorted({clocks[r] for r in seen})
    if reference is None:
        reference = clocks[seen[0]] if seen else None
    if reference not in domains:
        raise InputError(
            f"reference clock {reference!r} is not a clock of the captures "
            f"({', '.join(domains[:8])})",
            file=file,
            field="reference",
        )
    # the capture's length on one clock (offsets between clocks are no length)
    per_rank = frame.groupby("rank")["issue_ns"].agg(["min", "max"])
    span_ns = int((per_rank["max"] - per_rank["min"]).max()) if len(frame) else 0
    fit_drift = drift == "fit" or (drift == "auto" and span_ns >= DRIFT_MIN_SPAN_NS)
    cs = collect_constraints(frame, clocks, bins=DRIFT_BINS if fit_drift else 0)
    ref = cs.domains.index(reference)
    if cs.events_without_end == cs.events - cs.events_custom and len(domains) > 1:
        raise InputError(
            f"no event carries an end time (latency_ns): {cs.events_without_end} events "
            "without latency give no happens-before constraint, so no clock can be derived; "
            "capture with durations (a profiler records each op's duration) or give a "
            "measured calibration",
            file=file,
            field="latency_ns",
        )
    try:
        bounds = solve_offsets(cs, ref)
    except InfeasibleClocks as err:
        if not fit_drift:  # with drift, constant offsets may be infeasible and drifts not
            raise contradiction(cs, frame, err.cycle, file) from None
        bounds = None
    notes = [BOUND_NOTE]
    notes.append(
        "constraints used per op: "
        + "; ".join(f"{op}: {rule}" for op, rule in CAUSAL_ROLES.items())
        + "; custom ops give none"
    )
    if cs.events_without_end:
        notes.append(
            f"{cs.events_without_end} of {cs.events} events have no end time (no latency_ns): "
            "nothing was derived from them"
        )
    if cs.events_custom:
        notes.append(f"{cs.events_custom} custom-op events have no known data dependence: unused")
    drift_bounds = None
    if fit_drift:
        try:
            drift_bounds = solve_drift(cs, ref)
        except InfeasibleClocks as err:
            raise contradiction(cs, frame, err.cycle or [(ref, ref)], file) from None
        notes.append(
            "linear drift fitted per clock (anchor_ns: the middle of that clock's span); "
            "constraints reduced to the lower convex hull of the tightest per clock pair and "
            f"time bin ({DRIFT_BINS} bins); uncertainty_ns covers the whole span"
        )
    else:
        notes.append(
            f"drift assumed zero: the capture spans {span_ns / 1e9:.3f} s "
            f"(drift is fitted from {DRIFT_MIN_SPAN_NS / 1e9:.0f} s, or with --drift fit)"
        )
    entries, unknown = [], []
    for v, clock in enumerate(cs.domains):
        if drift_bounds is None:
            lo, hi = bounds.lo_ns[v], bounds.hi_ns[v]
        else:
            lo, hi = drift_bounds.offset_lo_ns[v], drift_bounds.offset_hi_ns[v]
            klo, khi = drift_bounds.drift_lo_ppb[v], drift_bounds.drift_hi_ppb[v]
            if np.isnan(klo) or np.isnan(khi):
                lo = hi = np.nan
        if drift_bounds is not None and v in drift_bounds.unbounded:
            unknown.append(
                {
                    "clock": clock,
                    "reason": f"with drift fitted, {drift_bounds.unbounded[v]} (reference "
                    f"{reference!r}); offsets only (--drift none) may still bound it",
                }
            )
            continue
        if np.isnan(lo) or np.isnan(hi):
            sides = []
            if np.isnan(hi):
                sides.append("nothing bounds it from above (no constraint path from the reference)")
            if np.isnan(lo):
                sides.append("nothing bounds it from below (no constraint path to the reference)")
            unknown.append(
                {
                    "clock": clock,
                    "reason": f"not connected to reference {reference!r} by constraints: "
                    + " and ".join(sides),
                }
            )
            continue
        entry: dict = {"clock": clock}
        if drift_bounds is None:
            lo_i, hi_i = int(lo), int(hi)
            mid = (lo_i + hi_i) // 2
            entry.update(
                offset_ns=mid,
                drift_ppb=0,
                anchor_ns=0,
                uncertainty_ns=max(hi_i - mid, mid - lo_i),
                offset_interval_ns=[lo_i, hi_i],
            )
        else:
            anchor = int(drift_bounds.anchor_ns[v])
            first, last = (int(x) for x in cs.domain_span_ns[v])
            half_span_s = max(abs(first - anchor), abs(last - anchor)) / 1e9
            lo_i, hi_i = math.floor(lo) - 1, math.ceil(hi) + 1  # LP tolerance margin
            mid = (lo_i + hi_i) // 2
            k_half = (khi - klo) / 2
            entry.update(
                offset_ns=mid,
                drift_ppb=round((klo + khi) / 2, 3),
                anchor_ns=anchor if v != ref else 0,
                uncertainty_ns=int(
                    math.ceil(max(hi_i - mid, mid - lo_i) + (k_half + 0.001) * half_span_s + 1)
                )
                if v != ref
                else 0,
                offset_interval_ns=[lo_i, hi_i] if v != ref else [0, 0],
                drift_interval_ppb=[math.floor(klo * 1000) / 1000, math.ceil(khi * 1000) / 1000],
            )
            if v == ref:
                entry["offset_ns"] = 0
        entry["constraints"] = _connected_count(cs, v)
        if v != ref and drift_bounds is None:
            entry["binding"] = _binding(cs, frame, bounds.upper_path[v], "upper") + _binding(
                cs, frame, bounds.lower_path[v], "lower"
            )
        elif v != ref:
            entry["binding"] = _drift_binding(cs, frame, drift_bounds.binding[v])
        entries.append(entry)
    if unknown:
        notes.append(
            "clocks left unknown (merge refuses their ranks): "
            + ", ".join(u["clock"] for u in unknown)
        )
    doc = {
        "format": CALIBRATION_FORMAT,
        "reference": reference,
        "method": METHOD,
        "notes": notes,
        "clocks": entries,
    }
    if unknown:
        doc["unknown_clocks"] = unknown
    return doc


CALIBRATION_COLUMNS = (
    "rank",
    "seq",
    "op",
    "group",
    "root",
    "peer",
    "instance",
    "issue_ns",
    "latency_ns",
    "bytes",
    "dtype",
    "phase",
    "stream",
    "overlap_ns",
    "arrival_ns",
    "send_splits",  # an all_to_allv's, where the captures have them (matching checks them)
    "recv_splits",
)


def calibrate_captures(
    captures: list[str],
    *,
    reference: str | None = None,
    drift: str = "auto",
) -> dict:
    """Derive the calibration of per-rank ``captures`` (the inputs of ``merge``).

    Every refusal of merge's validation applies first (ingest, duplicate ranks, matching:
    conflicting metadata, missing members, unpaired send/recv); then
    ``derive_calibration``. Returns the document; writes nothing."""
    from tracecanary.ingest import ingest_files
    from tracecanary.matching import build_program
    from tracecanary.merge import _refuse_duplicate_ranks

    if not captures:
        raise InputError("no captures given", field="captures")
    _refuse_duplicate_ranks(captures)
    with tempfile.TemporaryDirectory(prefix="tracecanary-calibrate-") as tmp:
        result = ingest_files(captures, Path(tmp) / "captures.parquet")
        import json

        sidecar = json.loads(result.sidecar.read_text())
        names = pq.read_schema(result.parquet).names
        table = pq.read_table(
            result.parquet, columns=[c for c in names if c in CALIBRATION_COLUMNS]
        )
        frame = table.to_pandas(self_destruct=True, split_blocks=True)
        del table
    if sidecar["timing_semantics"] != "timestamps":
        raise InputError(
            "the captures carry no timestamps (gaps only): there is no clock to calibrate",
            file=captures[0],
            field="ts_ns",
        )
    groups = {k: list(v) for k, v in sidecar["groups"].items()}
    clocks = {int(k): v for k, v in sidecar["clocks"].items()}
    build_program(  # every matching refusal, before any constraint is read
        frame, groups=groups, world_size=int(sidecar["meta"]["world_size"]), clocks=clocks
    )
    return derive_calibration(
        frame, clocks, reference=reference, drift=drift, file=os.fspath(captures[0])
    )


__all__ = ["ClockError", "calibrate_captures", "derive_calibration", "DRIFT_MODES", "METHOD"]
