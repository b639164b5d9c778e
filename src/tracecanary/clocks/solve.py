"""Feasible clock offsets (and drifts) under happens-before constraints.

Offsets only (``solve_offsets``): the constraints ``x[b] - x[a] <= w[a, b]`` form a
graph with edge a -> b of weight w; they are satisfiable iff it has no negative cycle
(Bellman-Ford), and with the reference fixed at 0 the feasible set of each offset is
exactly ``[-dist(v -> ref), dist(ref -> v)]`` (shortest paths). The edges of those two
paths are the binding constraints. A clock with no finite path both ways is unknown.

Offsets and linear drift (``solve_drift``): ``ref = local + o + k_ppb * (local - A) / 1e9``
per clock. Each kept constraint is linear in (o, k); the feasible interval of every
offset and drift is found by linear programs (scipy's HiGHS). The constraints given are a
subset of all the trace implies (the tightest per pair and time bin), so the intervals
are outer bounds: the true value lies inside whenever the model holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import NegativeCycleError, csgraph_from_dense, shortest_path

from tracecanary.clocks.constraints import NO_BOUND, ConstraintSet


class InfeasibleClocks(Exception):
    """No offsets satisfy the constraints: ``cycle`` lists the (a, b) domain edges of a
    negative cycle (a self-loop is one edge a == b)."""

    def __init__(self, cycle: list[tuple[int, int]]):
        super().__init__("clock constraints are infeasible")
        self.cycle = cycle


@dataclass(frozen=True)
class OffsetBounds:
    """Per domain (index into ``ConstraintSet.domains``): feasible offset interval
    [lo, hi] relative to the reference (NaN where unbounded), and the binding edges
    (a, b) of the paths that give each side."""

    lo_ns: np.ndarray
    hi_ns: np.ndarray
    upper_path: list[list[tuple[int, int]]]
    lower_path: list[list[tuple[int, int]]]


def _negative_cycle(bound: np.ndarray) -> list[tuple[int, int]]:
    """Edges of one negative cycle (Bellman-Ford from a virtual source)."""
    D = bound.shape[0]
    diag = np.flatnonzero(np.diag(bound) < 0)
    if diag.size:
        return [(int(diag[0]), int(diag[0]))]
    a, b = np.nonzero(bound != NO_BOUND)
    w = bound[a, b].astype(np.float64)
    dist = np.zeros(D)
    pred = np.full(D, -1, dtype=np.int64)
    last = -1
    for _ in range(D + 1):
        cand = dist[a] + w
        improved = cand < dist[b] - 0.5
        if not improved.any():
            return []
        # apply the best improvement per target
        order = np.lexsort((cand[improved], b[improved]))
        tb, ta, tc = b[improved][order], a[improved][order], cand[improved][order]
        first = np.concatenate(([True], tb[1:] != tb[:-1]))
        dist[tb[first]] = tc[first]
        pred[tb[first]] = ta[first]
        last = int(tb[first][0])
    v = last
    for _ in range(D):
        v = int(pred[v])
    cycle, u = [], v
    while True:
        p = int(pred[u])
        cycle.append((p, u))
        u = p
        if u == v or len(cycle) > D:
            break
    return cycle[::-1]


def _path(pred: np.ndarray, src: int, dst: int) -> list[tuple[int, int]]:
    edges, v = [], dst
    while v != src and v >= 0 and len(edges) <= pred.size:
        u = int(pred[v])
        if u < 0:
            return []
        edges.append((u, v))
        v = u
    return edges[::-1]


def solve_offsets(cs: ConstraintSet, reference: int) -> OffsetBounds:
    """Offset intervals relative to domain ``reference``; raises InfeasibleClocks."""
    bound = cs.bound_ns
    D = bound.shape[0]
    if (np.diag(bound) < 0).any():
        raise InfeasibleClocks(_negative_cycle(bound))
    dense = np.where(bound == NO_BOUND, np.inf, bound.astype(np.float64))
    np.fill_diagonal(dense, np.inf)
    graph = csgraph_from_dense(dense, null_value=np.inf)
    try:
        fwd, fpred = shortest_path(graph, method="BF", indices=reference, return_predecessors=True)
        back, bpred = shortest_path(
            graph.T.tocsr(), method="BF", indices=reference, return_predecessors=True
        )
    except NegativeCycleError:
        raise InfeasibleClocks(_negative_cycle(bound)) from None
    # scipy may stop at the first reachable negative cycle without raising on others
    cycle = _negative_cycle(bound)
    if cycle:
        raise InfeasibleClocks(cycle)
    hi = np.where(np.isfinite(fwd), fwd, np.nan)
    lo = np.where(np.isfinite(back), -back, np.nan)
    upper = [_path(fpred, reference, v) for v in range(D)]
    # the reverse graph's path ref -> v is the original path v -> ref, edges reversed
    lower = [[(b, a) for a, b in _path(bpred, reference, v)][::-1] for v in range(D)]
    return OffsetBounds(lo, hi, upper, lower)


@dataclass(frozen=True)
class DriftBounds:
    """Per domain: offset interval at its own ``anchor_ns`` (a time on that clock) and
    drift interval (ppb); NaN where unbounded. ``binding[v]``: (index into the binned
    constraints, side) of those that bind v's offset interval (nonzero duals). ``constraints``: rows used."""

    offset_lo_ns: np.ndarray
    offset_hi_ns: np.ndarray
    drift_lo_ppb: np.ndarray
    drift_hi_ppb: np.ndarray
    anchor_ns: np.ndarray
    binding: list[list[tuple[int, str]]]
    constraints: int
    unbounded: dict[int, str]  # per domain left unbounded: what the programs said


def _lower_hull(t: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Indices of the lower convex hull of points (t, w) (monotone chain): the only
    constraints of one domain pair that can bind a line o + k t <= w(t)."""
    order = np.lexsort((w, t))
    hull: list[int] = []
    for i in order.tolist():
        while len(hull) >= 2:
            o, p = hull[-2], hull[-1]
            cross = (t[p] - t[o]) * (w[i] - w[o]) - (w[p] - w[o]) * (t[i] - t[o])
            if cross <= 0:
                hull.pop()
            else:
                break
        if hull and t[hull[-1]] == t[i]:
            continue  # same abscissa: the lower point is already kept
        hull.append(i)
    return np.asarray(hull, dtype=np.int64)


def solve_drift(cs: ConstraintSet, reference: int) -> DriftBounds:
    """Offset (at each clock's anchor: the middle of its own span) and drift intervals;
    the reference has offset 0 and drift 0. Raises InfeasibleClocks when no offsets and
    drifts satisfy the constraints kept."""
    binned = cs.binned
    D = len(cs.domains)
    anchor = (cs.domain_span_ns[:, 0] + cs.domain_span_ns[:, 1]) // 2
    a, b = binned["a"], binned["b"]
    e = binned["end_ns"].astype(np.int64)
    s = binned["start_ns"].astype(np.int64)
    t_s = (s - anchor[b]).astype(np.float64) / 1e9  # seconds from b's anchor, on b's clock
    t_e = (e - anchor[a]).astype(np.float64) / 1e9
    keep = []
    pair = a * D + b
    for p in np.unique(pair):
        idx = np.flatnonzero(pair == p)
        if a[idx[0]] == b[idx[0]]:
            continue  # one clock: no offset information
        keep.append(idx[_lower_hull(t_s[idx], (e[idx] - s[idx]).astype(np.float64))])
    rows = np.concatenate(keep) if keep else np.zeros(0, dtype=np.int64)
    unknowns = [v for v in range(D) if v != reference]
    col = {v: i for i, v in enumerate(unknowns)}
    nv = len(unknowns)
    # x = [o_v ..., k_v ...] (k in ppb); row: o_b + k_b t_s - o_a - k_a t_e <= e - s
    rhs = (e[rows] - s[rows]).astype(np.float64)
    entries: list[tuple[int, int, float]] = []
    for r, i in enumerate(rows.tolist()):
        ai, bi = int(a[i]), int(b[i])
        if bi != reference:
            entries += [(r, col[bi], 1.0), (r, nv + col[bi], float(t_s[i]))]
        if ai != reference:
            entries += [(r, col[ai], -1.0), (r, nv + col[ai], -float(t_e[i]))]
    r_idx, c_idx, vals = zip(*entries, strict=True) if entries else ((), (), ())
    A = csr_matrix((vals, (r_idx, c_idx)), shape=(rows.size, 2 * nv))
    bounds = [(None, None)] * (2 * nv)
    out = {name: np.full(D, np.nan) for name in ("olo", "ohi", "klo", "khi")}
    for name in out:
        out[name][reference] = 0.0
    binding: list[list[tuple[int, str]]] = [[] for _ in range(D)]
    unbounded: dict[int, str] = {}
    for v in unknowns:
        for k, (name, sign) in enumerate((("olo", 1), ("ohi", -1), ("klo", 1), ("khi", -1))):
            c = np.zeros(2 * nv)
            c[col[v] + (nv if k >= 2 else 0)] = sign
            res = linprog(c, A_ub=A, b_ub=rhs, bounds=bounds, method="highs")
            if res.status == 2:
                raise InfeasibleClocks(_negative_cycle(cs.bound_ns))
            if res.status != 0:
                what = {"olo": "offset from below", "ohi": "offset from above"}.get(
                    name, "drift from below" if name == "klo" else "drift from above"
                )
                unbounded.setdefault(
                    v,
                    f"the constraints do not bound its {what}"
                    if res.status == 3
                    else f"the linear program failed ({res.message})",
                )
            if res.status == 0:
                out[name][v] = sign * res.fun
                if k < 2:
                    active = np.flatnonzero(np.abs(res.ineqlin.marginals) > 1e-12)
                    side = "lower" if name == "olo" else "upper"
                    binding[v] += [(int(i), side) for i in rows[active].tolist()]
    return DriftBounds(
        out["olo"], out["ohi"], out["klo"], out["khi"], anchor, binding, int(rows.size), unbounded
    )
