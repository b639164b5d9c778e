"""Measured cost curves: what one op costs on one machine, from its ladders.

A *cost curve* belongs to one (collective, dtype, group size) of one calibrated
configuration (``configs.<name>.measured.costs[i]`` of a ``tracecanary.backends/v1``
document, written by ``tracecanary calibrate-backends``). It holds the ladder's rungs
(``points``: bytes, measured median, the monotone value used) and the alpha/beta
segments that passed every trust gate (``segments``).

Evaluation of ``cost_us(bytes)`` (float64, vectorized, deterministic):
    1. inside a validated segment's [min_bytes, max_bytes]: alpha_us + bytes * slope
       (slope = 1 / (1000 * beta_gbps) us per byte); the first listed segment wins;
    2. otherwise between two rungs: linear interpolation of the monotone values (the
       medians made non-decreasing by pool-adjacent-violators, weighted by cycles), so
       a larger message never costs less than a smaller one;
    3. below the smallest rung: the smallest rung's monotone value (a latency floor);
    4. above the largest rung: the last segment's line when one ends at the largest
       rung, else the last two rungs' slope (never negative); such occurrences are
       counted as ``extrapolated``.

Guarantees: a program op with no curve is refused by name (``missing_costs``), never
filled with a default; the op-to-collective mapping is written once here
(``LADDER_COLLECTIVE_OF_OP``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# program op -> the nccl-tests collective whose ladder prices it (send = one sendrecv pair)
LADDER_COLLECTIVE_OF_OP: dict[str, str] = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "all_to_all": "all_to_all",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "send": "sendrecv",
    "recv": "sendrecv",
}


def canonical_dtype_name(dtype: str) -> str:
    """The torch-style dtype name ladders and programs are matched by (``float`` -> float32)."""
    from tracecanary.alphabeta.nccltests import CANONICAL_DTYPE

    return CANONICAL_DTYPE.get(dtype, dtype)


def monotone_values(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted isotonic (non-decreasing) regression by pool-adjacent-violators."""
    blocks: list[list[float]] = []  # [weighted mean, weight, count]
    for v, w in zip(values.astype(np.float64), weights.astype(np.float64), strict=True):
        blocks.append([float(v), float(w), 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            v2, w2, c2 = blocks.pop()
            v1, w1, c1 = blocks[-1]
            blocks[-1] = [(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, c1 + c2]
    out: list[float] = []
    for mean, _, count in blocks:
        out.extend([mean] * count)
    return np.asarray(out, dtype=np.float64)


@dataclass(frozen=True)
class CostCurve:
    """One (collective, dtype, group size) curve; arrays sorted by bytes."""

    collective: str
    dtype: str
    group_size: int
    bytes: np.ndarray  # int64 rung sizes
    monotone_us: np.ndarray  # float64
    segments: tuple[tuple[int, int, float, float], ...]  # (min, max, alpha_us, slope_us/B)

    @classmethod
    def from_document(cls, doc: dict) -> CostCurve:
        pts = sorted(doc["points"], key=lambda p: p["bytes"])
        return cls(
            collective=doc["collective"],
            dtype=doc["dtype"],
            group_size=int(doc["group_size"]),
            bytes=np.asarray([p["bytes"] for p in pts], dtype=np.int64),
            monotone_us=np.asarray([p["monotone_us"] for p in pts], dtype=np.float64),
            segments=tuple(
                (
                    int(s["min_bytes"]),
                    int(s["max_bytes"]),
                    float(s["alpha_us"]),
                    1.0 / (1000.0 * float(s["beta_gbps"])),
                )
                for s in doc["segments"]
            ),
        )

    def cost_us(self, nbytes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(float64 cost in us, bool extrapolated) per size (see module doc)."""
        b = np.asarray(nbytes, dtype=np.float64)
        xs = self.bytes.astype(np.float64)
        out = np.interp(b, xs, self.monotone_us)
        above = b > xs[-1]
        if xs.size >= 2:
            tail_slope = max(0.0, (self.monotone_us[-1] - self.monotone_us[-2]) / (xs[-1] - xs[-2]))
        else:
            tail_slope = 0.0
        out = np.where(above, self.monotone_us[-1] + (b - xs[-1]) * tail_slope, out)
        covered = np.zeros(b.shape, dtype=bool)
        for lo, hi, alpha, slope in self.segments:
            inside = ~covered & (b >= lo) & (b <= hi)
            if hi == int(xs[-1]):
                inside |= ~covered & above
            out = np.where(inside, alpha + b * slope, out)
            covered |= inside
        return out, above


def curve_key(op: str, dtype: str, group_size: int) -> tuple[str, str, int]:
    """The (collective, dtype, group size) a program op is priced by."""
    return (LADDER_COLLECTIVE_OF_OP.get(op, op), dtype, int(group_size))


@dataclass(frozen=True)
class CostTable:
    """All curves of one calibrated configuration."""

    curves: dict[tuple[str, str, int], CostCurve]

    @classmethod
    def from_document(cls, costs: list[dict]) -> CostTable:
        curves = {}
        for doc in costs:
            curve = CostCurve.from_document(doc)
            curves[(curve.collective, curve.dtype, curve.group_size)] = curve
        return cls(curves=curves)

    def missing(self, keys) -> list[tuple[str, str, int]]:
        """The keys (collective, dtype, group size) this table has no curve for."""
        return sorted({k for k in keys if k not in self.curves})

    def evaluate(
        self, ops: np.ndarray, dtypes: np.ndarray, group_sizes: np.ndarray, nbytes: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(float64 cost us, bool extrapolated) per op; KeyError for a missing curve."""
        cost = np.zeros(len(ops), dtype=np.float64)
        extra = np.zeros(len(ops), dtype=bool)
        keys = [curve_key(o, d, g) for o, d, g in zip(ops, dtypes, group_sizes, strict=True)]
        by_key: dict[tuple[str, str, int], list[int]] = {}
        for i, k in enumerate(keys):
            by_key.setdefault(k, []).append(i)
        for k, idx in by_key.items():
            sel = np.asarray(idx, dtype=np.int64)
            c, e = self.curves[k].cost_us(np.asarray(nbytes)[sel])
            cost[sel] = c
            extra[sel] = e
        return cost, extra


def format_key(key: tuple[str, str, int]) -> str:
    return f"{key[0]} {key[1]} on {key[2]} ranks"
