"""Reading a ``tracecanary.calibration/v1`` document into a per-rank clock mapping.

Guarantees:
- ``load_calibration`` parses under the resource policy and validates against the schema;
  offsets, anchors and uncertainties lie within ``max_time_ns`` and drift within 10^9 ppb,
  so mapping a timestamp cannot overflow; refusals name file, clock entry and field;
- ``clock_map_from_calibration`` refuses a captured rank whose clock the calibration
  omits (or leaves unknown), naming the rank, its clock and the ways out;
- ``mapped_skew_uncertainty_ns``: the bound on the error of an arrival difference
  between two mapped ranks (the two largest uncertainties of distinct clocks added).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from tracecanary.clocks.status import WAYS_OUT
from tracecanary.errors import InputError, MergeError
from tracecanary.formats.schemas import validate
from tracecanary.limits import current_limits, load_json

MAX_DRIFT_PPB = 1e9  # a clock running at twice (or zero) the reference rate is no clock


@dataclass(frozen=True)
class ClockMap:
    """Per-rank mapping local ns -> reference ns: ref = local + offset + drift_ppb*(local-anchor)/1e9."""

    offset_ns: np.ndarray
    drift_ppb: np.ndarray
    anchor_ns: np.ndarray
    uncertainty_ns: np.ndarray
    reference: str
    entry: np.ndarray | None = None  # per rank: index of its calibration entry (its clock)

    def to_reference(self, rank: np.ndarray, local_ns: np.ndarray) -> np.ndarray:
        drift = self.drift_ppb[rank] * (local_ns - self.anchor_ns[rank]).astype(np.float64) / 1e9
        return local_ns + self.offset_ns[rank] + np.rint(drift).astype(np.int64)


def load_calibration(path: str | os.PathLike) -> dict:
    """A ``tracecanary.calibration/v1`` document, parsed under the resource policy and
    validated; offsets, anchors and uncertainties must lie within ``max_time_ns`` and
    drift within 10^9 ppb, so mapping a timestamp cannot overflow."""
    limits = current_limits()
    doc = load_json(path, limits)
    validate(doc, "calibration", file=str(path))
    for i, clock in enumerate(doc["clocks"]):
        for key in ("offset_ns", "anchor_ns", "uncertainty_ns"):
            if key in clock:
                limits.check(
                    "max_time_ns", abs(clock[key]), file=path, record=i, field=f"clocks/{i}/{key}"
                )
        if not abs(clock["drift_ppb"]) <= MAX_DRIFT_PPB:
            raise InputError(
                f"drift_ppb {clock['drift_ppb']} is beyond +-{MAX_DRIFT_PPB:.0e} ppb",
                file=str(path),
                record=i,
                field=f"clocks/{i}/drift_ppb",
            )
    return doc


def clock_map_from_calibration(
    calibration: dict, clocks: dict[int, str], ranks: list[int], world_size: int, *, file: str
) -> ClockMap:
    """Per-rank clock mapping; refuses a captured rank whose clock the calibration omits."""
    by_clock = {c["clock"]: c for c in calibration["clocks"] if "clock" in c}
    by_rank = {r: c for c in calibration["clocks"] for r in c.get("ranks", [])}
    unknown = {u["clock"]: u["reason"] for u in calibration.get("unknown_clocks", [])}
    offset = np.zeros(world_size, dtype=np.int64)
    drift = np.zeros(world_size, dtype=np.float64)
    anchor = np.zeros(world_size, dtype=np.int64)
    unc = np.zeros(world_size, dtype=np.int64)
    entry_of = np.full(world_size, -1, dtype=np.int64)
    index = {id(c): i for i, c in enumerate(calibration["clocks"])}
    for r in ranks:
        entry = by_rank.get(r) or by_clock.get(clocks[r])
        if entry is None:
            why = (
                f"leaves clock {clocks[r]!r} unknown ({unknown[clocks[r]]})"
                if clocks[r] in unknown
                else f"does not cover rank {r} (clock {clocks[r]!r})"
            )
            raise MergeError(
                f"calibration {why}; {WAYS_OUT}" if clocks[r] in unknown else f"calibration {why}",
                file=file,
                record=f"rank {r}",
                field="clocks",
            )
        offset[r] = entry["offset_ns"]
        drift[r] = entry["drift_ppb"]
        anchor[r] = entry.get("anchor_ns", 0)
        unc[r] = entry["uncertainty_ns"]
        entry_of[r] = index[id(entry)]
    return ClockMap(offset, drift, anchor, unc, calibration["reference"], entry_of)


def mapped_skew_uncertainty_ns(clock_map: ClockMap, ranks: list[int]) -> int:
    """Bound on the error of an arrival difference between two ranks mapped by
    ``clock_map``: the two largest uncertainties of distinct clocks added (two ranks read
    through one calibration entry share its error, which cancels in their difference)."""
    per_clock: dict[object, int] = {}
    for r in ranks:
        key = int(clock_map.entry[r]) if clock_map.entry is not None else ("rank", r)
        per_clock[key] = int(clock_map.uncertainty_ns[r])
    return int(sum(sorted(per_clock.values(), reverse=True)[:2]))
