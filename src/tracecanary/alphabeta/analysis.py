"""Per-ladder analysis: rung table, fits, saturation entry, latency plateau, tuner check.

Only *included* rungs (not excluded as correctness_failed or zero_bytes) enter the fits,
the saturation entry and the plateau; excluded rungs stay in the rung table with their
reason.

Definitions (units in the names):
    saturation_entry_bytes  the smallest included size from which every larger included
                            size keeps algbw >= saturation_fraction * peak algbw (None when
                            the largest size itself falls below that)
    latency_plateau         the run of smallest included sizes whose median stays within
                            plateau_tolerance_pct of the smallest size's median
    segments                one fit per contiguous run of included rungs with the same
                            TUNING algorithm/protocol (a rung without evidence ends a run);
                            without TUNING evidence one fit from the saturation entry up,
                            labelled as such
    large_message           the fit over the included rungs from the saturation entry up
    tuner                   per size with a TUNING time: predicted_us (NCCL's model),
                            measured_us (median), error_pct = (predicted - measured) /
                            measured * 100
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tracecanary.alphabeta.fit import GateThresholds, fit_alpha_beta
from tracecanary.alphabeta.ladder import busbw_factor, summarize_rungs
from tracecanary.errors import ImportRefused


@dataclass(frozen=True)
class AnalysisParams:
    gates: GateThresholds = field(default_factory=GateThresholds)
    cv_max_pct: float = 5.0
    saturation_fraction: float = 0.8
    plateau_tolerance_pct: float = 5.0

    def as_dict(self) -> dict:
        return {
            **self.gates.as_dict(),
            "cv_max_pct": self.cv_max_pct,
            "saturation_fraction": self.saturation_fraction,
            "plateau_tolerance_pct": self.plateau_tolerance_pct,
        }


def saturation_entry(
    bytes_: np.ndarray, algbw: np.ndarray, fraction: float
) -> tuple[int | None, float | None]:
    """``(entry_bytes, peak_algbw_gbps)`` over rungs sorted by bytes (see module docstring)."""
    b = np.asarray(bytes_, dtype=np.int64)
    a = np.asarray(algbw, dtype=np.float64)
    if len(b) == 0:
        return None, None
    peak = float(a.max())
    if peak <= 0:
        return None, peak
    ok = a >= fraction * peak
    # suffix-all: ok[i:] all True
    suffix_ok = np.flip(np.logical_and.accumulate(np.flip(ok)))
    if not suffix_ok[-1]:
        return None, peak
    first = int(np.argmax(suffix_ok))
    return int(b[first]), peak


def latency_plateau(bytes_: np.ndarray, median_us: np.ndarray, tolerance_pct: float) -> dict | None:
    """The range of smallest sizes whose median stays within tolerance of the first's."""
    b = np.asarray(bytes_, dtype=np.int64)
    m = np.asarray(median_us, dtype=np.float64)
    if len(b) == 0:
        return None
    base = m[0]
    within = np.abs(m - base) / base * 100.0 <= tolerance_pct
    n = int(np.argmin(within)) if not within.all() else len(b)
    return {
        "min_bytes": int(b[0]),
        "max_bytes": int(b[n - 1]),
        "n_rungs": n,
        "base_median_us": float(base),
        "max_median_us": float(m[:n].max()),
        "tolerance_pct": float(tolerance_pct),
    }


def contiguous_segments(labels: list) -> list[tuple[object, int, int]]:
    """``(label, start, stop)`` for each maximal run of equal non-None labels."""
    out = []
    start = None
    for i, lab in enumerate([*labels, None]):
        if start is not None and (lab is None or lab != labels[start]):
            out.append((labels[start], start, i))
            start = None
        if lab is not None and start is None:
            start = i
    return out


def ladder_id(key: dict) -> str:
    raw = (
        f"{key['collective']}.{key['dtype']}.n{key['world_size']}.{key['placement']}."
        f"{key['op']}.in{key['input']}r{key['run']}"
    )
    return re.sub(r"[^A-Za-z0-9._@-]", "_", raw)


def _tuning_map(tuning: pd.DataFrame | None, source_file: str) -> dict[int, tuple[str, str, float]]:
    """ladder bytes -> (algorithm, protocol, predicted_us); refuses disagreeing duplicates."""
    out: dict[int, tuple[str, str, float, int, str]] = {}
    if tuning is None:
        return {}
    for b, algo, proto, pred, line, file in zip(
        tuning["ladder_bytes"],
        tuning["algorithm"],
        tuning["protocol"],
        tuning["predicted_us"],
        tuning["first_line"],
        tuning["file"],
        strict=True,
    ):
        b = int(b)
        prev = out.get(b)
        entry = (algo, proto, float(pred), int(line), file)
        if prev is None:
            out[b] = entry
            continue
        same_time = (np.isnan(prev[2]) and np.isnan(entry[2])) or prev[2] == entry[2]
        if prev[0] != algo or prev[1] != proto or not same_time:
            raise ImportRefused(
                f"line {int(line)}: inconsistent TUNING records for {b} bytes (also line {prev[3]})",
                file=file or source_file,
                record=int(line),
                field="algorithm",
            )
    return {b: (v[0], v[1], v[2]) for b, v in out.items()}


def analyze_ladder(
    key: dict,
    rows: pd.DataFrame,
    *,
    params: AnalysisParams,
    source_name: str,
    tuning: pd.DataFrame | None = None,
    tuning_notes: list[str] | None = None,
) -> dict:
    """Analyse one ladder (rows of one ``LADDER_KEY``); returns a JSON-ready dict with raw
    floats (the report rounds them)."""
    notes = list(tuning_notes or [])
    rungs = summarize_rungs(rows, cv_max_pct=params.cv_max_pct)
    tmap = _tuning_map(tuning, source_name)
    rung_list = []
    for r in rungs.itertuples(index=False):
        t = tmap.get(int(r.bytes))
        rung_list.append(
            {
                "bytes": int(r.bytes),
                "n_cycles": int(r.n_cycles),
                "median_us": float(r.median_us),
                "p95_us": float(r.p95_us),
                "cv_pct": None if np.isnan(r.cv_pct) else float(r.cv_pct),
                "unstable": r.unstable,
                "algbw_gbps": float(r.algbw_gbps),
                "busbw_gbps": float(r.busbw_gbps),
                "correctness_checked": bool(r.correctness_checked),
                "wrong_total": None if pd.isna(r.wrong_total) else int(r.wrong_total),
                "excluded": r.excluded,
                "first_line": int(r.first_line),
                "algorithm": None if t is None else t[0],
                "protocol": None if t is None else t[1],
                "predicted_us": None if t is None or np.isnan(t[2]) else float(t[2]),
            }
        )
    included = [r for r in rung_list if r["excluded"] is None]
    inc_bytes = np.array([r["bytes"] for r in included], dtype=np.int64)
    inc_median = np.array([r["median_us"] for r in included], dtype=np.float64)
    inc_algbw = np.array([r["algbw_gbps"] for r in included], dtype=np.float64)

    n_failed = sum(r["excluded"] == "correctness_failed" for r in rung_list)
    n_zero = sum(r["excluded"] == "zero_bytes" for r in rung_list)
    if n_failed:
        notes.append(f"{n_failed} rung(s) excluded: correctness check failed (#wrong > 0)")
    if n_zero:
        notes.append(
            f"{n_zero} zero-byte rung(s) excluded: NCCL returns without communicating, the time is "
            "harness overhead"
        )
    if not any(r["correctness_checked"] for r in rung_list):
        notes.append("correctness was not checked for any rung (#wrong N/A)")
    if all(r["cv_pct"] is None for r in rung_list):
        notes.append(
            "a single cycle per rung: no coefficient of variation (run nccl-tests with -N)"
        )

    gates = params.gates
    global_fit = fit_alpha_beta(inc_bytes, inc_median, gates)
    entry, peak = saturation_entry(inc_bytes, inc_algbw, params.saturation_fraction)
    if entry is None:
        large_fit = None
        notes.append(
            "no saturation entry: the largest size is below the saturation fraction of the peak"
        )
    else:
        sel = inc_bytes >= entry
        large_fit = fit_alpha_beta(inc_bytes[sel], inc_median[sel], gates)
    plateau = latency_plateau(inc_bytes, inc_median, params.plateau_tolerance_pct)

    labels = [None if r["algorithm"] is None else (r["algorithm"], r["protocol"]) for r in included]
    if any(lab is not None for lab in labels):
        items = []
        for (algo, proto), start, stop in contiguous_segments(labels):
            items.append(
                {
                    "basis": "tuning",
                    "algorithm": algo,
                    "protocol": proto,
                    "fit": fit_alpha_beta(inc_bytes[start:stop], inc_median[start:stop], gates),
                }
            )
        uncovered = sum(lab is None for lab in labels)
        seg_note = "one fit per contiguous algorithm/protocol segment from NCCL TUNING evidence"
        if uncovered:
            seg_note += (
                f"; {uncovered} included rung(s) have no TUNING record and are in no segment"
            )
        segments = {"evidence": "tuning", "note": seg_note, "items": items}
    else:
        items = []
        if large_fit is not None:
            items.append(
                {
                    "basis": "saturation_entry_up",
                    "algorithm": None,
                    "protocol": None,
                    "fit": large_fit,
                }
            )
        segments = {
            "evidence": "absent",
            "note": (
                "no NCCL TUNING evidence for this ladder, so algorithm/protocol segments are unknown; "
                "offered instead: one fit over the rungs from the saturation entry up"
            ),
            "items": items,
        }

    tuner = None
    timed = [r for r in included if r["predicted_us"] is not None]
    if timed:
        tuner = [
            {
                "bytes": r["bytes"],
                "algorithm": r["algorithm"],
                "protocol": r["protocol"],
                "predicted_us": r["predicted_us"],
                "measured_us": r["median_us"],
                "error_pct": (r["predicted_us"] - r["median_us"]) / r["median_us"] * 100.0,
            }
            for r in timed
        ]
    if tuning is not None and len(tuning):
        matched = {r["bytes"] for r in rung_list}
        unmatched = sorted(set(int(b) for b in tuning["ladder_bytes"]) - matched)
        if unmatched:
            notes.append(f"{len(unmatched)} TUNING record size(s) match no rung of this ladder")

    return {
        "id": ladder_id(key),
        "collective": key["collective"],
        "dtype": key["dtype"],
        "world_size": int(key["world_size"]),
        "placement": key["placement"],
        "op": key["op"],
        "input": int(key["input"]),
        "run": int(key["run"]),
        "source": source_name,
        "busbw_factor": busbw_factor(key["collective"], int(key["world_size"])),
        "n_cycles": int(rows["cycle"].nunique()),
        "rungs": rung_list,
        "fits": {"global": global_fit, "segments": segments, "large_message": large_fit},
        "saturation_entry_bytes": entry,
        "peak_algbw_gbps": peak,
        "latency_plateau": plateau,
        "tuner": tuner,
        "notes": notes,
    }
