"""The vectorized scheduler simulator (the model is documented in docs/simulator.md).

Two steps: ``prepare(program, ablations)`` turns a Program into configuration-independent
arrays (issue, ready, channel, cost inputs), ``simulate(prepared, config)`` computes the
service, queueing and exposed latency of every occurrence under one configuration.

Guarantees:
- all times are int64 nanoseconds; service times are computed in float64 in the exact
  operation order documented in docs/simulator.md and rounded with ``np.rint`` (half to
  even), so a plain per-event implementation following the equations agrees bit for bit;
- no Python loop runs per occurrence: per-channel FIFO queueing is the max-plus
  recurrence S_i = P_i + cummax_{k<=i}(R_k - P_k) evaluated with grouped cumsum/cummax;
- unknown skew is never simulated as a measured zero: ``Prepared.skew_status`` is
  ``"unknown"`` and the report says skew was not simulated;
- bad programs (negative gaps or skews, non-positive or non-finite weights, group sizes
  below 1, ops without a cost model) raise ``InputError`` naming the record and field.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from tracecanary.errors import InputError
from tracecanary.program import Program
from tracecanary.sim.backends import BackendConfig

ABLATIONS: tuple[str, ...] = ("skew", "overlap", "order", "tail")
# Model ablations (docs/simulator.md, "Model ablations"): they change one equation of the
# model instead of removing a preserved mechanism of the program.
MODEL_ABLATIONS: tuple[str, ...] = ("no_queue_reset", "compute_pressure", "observed_latency")
ALL_ABLATIONS: tuple[str, ...] = ABLATIONS + MODEL_ABLATIONS
# Under ``compute_pressure`` compute overlapping a collective hides only this share of
# what it hides otherwise (the overlap efficiency is multiplied by it).
COMPUTE_PRESSURE_EFFICIENCY_FACTOR = 0.5

# Cost kinds of the collectives; ``custom:<name>`` ops are served as a single generic
# transfer (one step, bus factor 1) and the report lists them.
_KIND_ALL_REDUCE = 0
_KIND_N_MINUS_1 = 1  # all_gather, reduce_scatter, all_to_all
_KIND_ROOTED = 2  # broadcast, reduce
_KIND_BARRIER = 3
_KIND_P2P = 4  # send (a matched pair), recv
_KIND_CUSTOM = 5

OP_KINDS: dict[str, int] = {
    "all_reduce": _KIND_ALL_REDUCE,
    "all_gather": _KIND_N_MINUS_1,
    "reduce_scatter": _KIND_N_MINUS_1,
    "all_to_all": _KIND_N_MINUS_1,
    "broadcast": _KIND_ROOTED,
    "reduce": _KIND_ROOTED,
    "barrier": _KIND_BARRIER,
    "send": _KIND_P2P,
    "recv": _KIND_P2P,
}


def op_kind(op: str) -> int:
    """Cost kind of an op name; InputError for an op with no cost model."""
    if op in OP_KINDS:
        return OP_KINDS[op]
    if op.startswith("custom:"):
        return _KIND_CUSTOM
    raise InputError(f"op {op!r} has no cost model in the simulator", field="op")


@dataclass(frozen=True)
class Prepared:
    """Configuration-independent arrays of a program in simulated order.

    ``occ`` maps each simulated position to the Program's occurrence index (the order
    ablation permutes it, the tail ablation drops entries).
    """

    occ: np.ndarray
    issue_ns: np.ndarray
    ready_ns: np.ndarray
    rendezvous_wait_ns: np.ndarray  # R - T: the wait of the first-arriving member
    member_wait_ns: np.ndarray  # sum over members of R - A_r
    op_code: np.ndarray  # index into op_names
    op_names: tuple[str, ...]  # sorted
    kind: np.ndarray
    bytes: np.ndarray
    group_size: np.ndarray
    group_code: np.ndarray  # index into group_names
    group_names: tuple[str, ...]  # sorted
    phase_code: np.ndarray  # index into phase_names
    phase_names: tuple[str, ...]  # sorted ("" = no phase)
    dtype_code: np.ndarray  # index into dtype_names
    dtype_names: tuple[str, ...]  # sorted
    overlap_ns: np.ndarray  # 0 where not has_overlap
    has_overlap: np.ndarray
    channel: np.ndarray  # code of (group, stream)
    weight: np.ndarray
    ring_steps: np.ndarray  # float64
    tree_steps: np.ndarray  # float64, -1 where tree does not serve the op
    transfer_bytes: np.ndarray  # float64: bytes * bus factor (documented order)
    skew_status: str  # "simulated" | "unknown" | "ablated"
    skew_reason: str | None
    ablations: tuple[str, ...]
    custom_ops: tuple[str, ...]
    observed_latency_ns: np.ndarray  # the trace's measured latency; 0 where not measured
    has_observed_latency: np.ndarray

    @property
    def n(self) -> int:
        return int(self.occ.size)


@dataclass(frozen=True)
class SimResult:
    """Per-occurrence outcome of one configuration (arrays aligned with Prepared)."""

    config: str
    candidate: np.ndarray  # index into the configuration's file candidate list
    service_ns: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    queue_wait_ns: np.ndarray
    hidden_ns: np.ndarray
    latency_ns: np.ndarray


def normalize_ablations(ablations) -> tuple[str, ...]:
    """Sorted, de-duplicated ablations; InputError for an unknown one."""
    out = sorted(set(ablations or ()))
    for a in out:
        if a not in ALL_ABLATIONS:
            raise InputError(
                f"unknown ablation {a!r} (known: {', '.join(ALL_ABLATIONS)})", field="ablate"
            )
    return tuple(out)


def _factorize(column: pd.Series, take) -> tuple[np.ndarray, tuple[str, ...]]:
    """(int64 codes of take(column) into the sorted distinct values, those values).

    Values absent from take(column) may appear among the names (the tail ablation drops
    occurrences); consumers only report names whose code occurs."""
    codes, uniques = pd.factorize(column, sort=True)
    return take(codes.astype(np.int64, copy=False)), tuple(str(u) for u in uniques)


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _member_skews(program: Program, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(max skew, sum over members of (max skew - skew)) per occurrence."""
    occ = program.members["occ"].to_numpy()  # int32 (a view): compared and indexed
    skew = program.members["skew_ns"].to_numpy(np.int64)
    max_skew = np.zeros(n, dtype=np.int64)
    wait_sum = np.zeros(n, dtype=np.int64)
    if occ.size == 0:
        return max_skew, wait_sum
    if (occ < 0).any() or (occ >= n).any():
        bad = _first_bad((occ < 0) | (occ >= n))
        raise InputError("member refers to no occurrence", record=f"member {bad}", field="occ")
    if (skew < 0).any():
        bad = _first_bad(skew < 0)
        raise InputError("negative arrival skew", record=f"member {bad}", field="skew_ns")
    if (np.diff(occ) < 0).any():
        order = np.argsort(occ, kind="stable")
        occ, skew = occ[order], skew[order]
    starts = np.flatnonzero(np.r_[True, occ[1:] != occ[:-1]])
    owners = occ[starts]
    seg_max = np.maximum.reduceat(skew, starts)
    seg_sum = np.add.reduceat(skew, starts)
    seg_len = np.diff(np.r_[starts, occ.size])
    max_skew[owners] = seg_max
    wait_sum[owners] = seg_max * seg_len - seg_sum
    return max_skew, wait_sum


def _checked_columns(program: Program) -> tuple[np.ndarray, ...]:
    """(gap, weight, group_size, bytes, overlap, has_overlap) of every occurrence, after
    the occurrence-level refusals ``prepare`` makes (in its order)."""
    occ_df = program.occurrences
    n = program.n
    gap = occ_df["gap_ns"].to_numpy(np.int64)
    if n and (gap < 0).any():
        raise InputError("negative gap", record=f"occurrence {_first_bad(gap < 0)}", field="gap_ns")
    weight_all = occ_df["weight"].to_numpy(np.float64)
    bad_w = ~np.isfinite(weight_all) | (weight_all <= 0)
    if bad_w.any():
        raise InputError(
            "weight must be finite and > 0",
            record=f"occurrence {_first_bad(bad_w)}",
            field="weight",
        )
    gsize_all = occ_df["group_size"].to_numpy(np.int64)
    if (gsize_all < 1).any():
        raise InputError(
            "group_size below 1",
            record=f"occurrence {_first_bad(gsize_all < 1)}",
            field="group_size",
        )
    bytes_all = occ_df["bytes"].to_numpy(np.int64)
    if (bytes_all < 0).any():
        raise InputError(
            "negative bytes", record=f"occurrence {_first_bad(bytes_all < 0)}", field="bytes"
        )
    overlap_all = occ_df["overlap_ns"].to_numpy(np.int64)
    has_overlap_all = occ_df["has_overlap"].to_numpy(bool)
    if (has_overlap_all & (overlap_all < 0)).any():
        bad = _first_bad(has_overlap_all & (overlap_all < 0))
        raise InputError("negative overlap", record=f"occurrence {bad}", field="overlap_ns")
    return gap, weight_all, gsize_all, bytes_all, overlap_all, has_overlap_all


def member_skews(program: Program) -> tuple[np.ndarray, np.ndarray]:
    """(max skew, sum over members of (max skew - skew)) per occurrence of ``program``:
    all that ``prepare`` reads of its members. Refuses what ``prepare`` refuses, in its
    order (the occurrence columns first, then the members)."""
    _checked_columns(program)
    return _member_skews(program, program.n)


def prepare(
    program: Program,
    ablations=(),
    *,
    skews: tuple[np.ndarray, np.ndarray] | None = None,
) -> Prepared:
    """Configuration-independent arrays of ``program`` with ``ablations`` applied.
    ``skews``: ``member_skews(program)`` when the caller already has it (then the
    members table is not read, and the caller may have dropped it).

    Ablations (simulator controls, not physical interventions): ``tail`` drops tail
    occurrences (the others keep their issue times); ``order`` stably sorts the
    remaining occurrences by signature id while issue times stay in place (each
    occurrence's own attributes, skews and overlap travel with it); ``skew`` sets every
    skew to 0; ``overlap`` removes all compute overlap. The model ablations
    (``MODEL_ABLATIONS``) act in ``simulate``.
    """
    abl = normalize_ablations(ablations)
    occ_df = program.occurrences
    n = program.n
    gap, weight_all, gsize_all, bytes_all, overlap_all, has_overlap_all = _checked_columns(program)

    issue_all = np.cumsum(gap, dtype=np.int64)
    if not program.skew_known:
        skew_status = "unknown"
    elif "skew" in abl:
        skew_status = "ablated"
    else:
        skew_status = "simulated"
    if skew_status == "simulated":
        max_skew, wait_sum = skews if skews is not None else _member_skews(program, n)
    else:
        max_skew = np.zeros(n, dtype=np.int64)
        wait_sum = np.zeros(n, dtype=np.int64)

    positions = np.arange(n, dtype=np.int64)
    if "tail" in abl:
        positions = positions[~occ_df["tail"].to_numpy(bool)]
    issue = issue_all[positions] if "tail" in abl else issue_all
    perm = positions
    if "order" in abl and positions.size:
        sig, _ = program.signature_ids()
        perm = positions[np.argsort(sig[positions], kind="stable")]
    # without the tail or order ablation every position is simulated in place: the
    # arrays are used as they are (read-only views of the program's columns where
    # pandas gives one) instead of being copied through an identity permutation
    identity = "tail" not in abl and ("order" not in abl or not positions.size)

    def take(values: np.ndarray) -> np.ndarray:
        return values if identity else values[perm]

    op_codes, op_names = _factorize(occ_df["op"], take)
    op_present = np.bincount(op_codes, minlength=len(op_names)) > 0
    kinds_of_names = []
    for code, name in enumerate(op_names):
        if not op_present[code]:
            kinds_of_names.append(_KIND_CUSTOM)  # not simulated (dropped by an ablation)
            continue
        try:
            kinds_of_names.append(op_kind(name))
        except InputError:
            bad = int(perm[np.flatnonzero(op_codes == code)[0]])
            raise InputError(
                f"op {name!r} has no cost model in the simulator",
                record=f"occurrence {bad}",
                field="op",
            ) from None
    kind = (
        np.asarray(kinds_of_names, dtype=np.int64)[op_codes] if perm.size else np.zeros(0, np.int64)
    )
    gsize = take(gsize_all)
    nbytes = take(bytes_all)

    # Cost inputs, float64 in the documented order.
    n_f = gsize.astype(np.float64)
    nm1 = (gsize - 1).astype(np.float64)
    # ceil(log2 n) = bit length of n - 1, exact for n - 1 < 2**53
    depth = np.frexp(nm1)[1].astype(np.float64)
    is_ar = (kind == _KIND_ALL_REDUCE) | (kind == _KIND_BARRIER)
    ring = np.where(
        is_ar, 2.0 * nm1, np.where((kind == _KIND_N_MINUS_1) | (kind == _KIND_ROOTED), nm1, 1.0)
    )
    tree = np.where(is_ar, 2.0 * depth, np.where(kind == _KIND_ROOTED, depth, -1.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        factor = np.where(
            kind == _KIND_ALL_REDUCE,
            (2.0 * nm1) / n_f,
            np.where(
                kind == _KIND_N_MINUS_1,
                (1.0 * nm1) / n_f,
                np.where(kind == _KIND_BARRIER, 0.0, 1.0),
            ),
        )
    transfer = nbytes.astype(np.float64) * factor

    has_overlap = take(has_overlap_all) & ("overlap" not in abl)
    overlap = np.where(has_overlap, take(overlap_all), 0).astype(np.int64, copy=False)

    group_codes, group_names = _factorize(occ_df["group"], take)
    stream_codes, stream_names = _factorize(occ_df["stream"], take)
    channel = group_codes * max(len(stream_names), 1) + stream_codes
    del stream_codes
    phase_codes, phase_names = _factorize(occ_df["phase"], take)
    dtype_codes, dtype_names = _factorize(occ_df["dtype"], take)

    maxs = take(max_skew)
    custom = tuple(
        o for code, o in enumerate(op_names) if o.startswith("custom:") and op_present[code]
    )
    return Prepared(
        occ=take(occ_df["occ"].to_numpy(np.int64)),
        issue_ns=issue,
        ready_ns=issue + maxs,
        rendezvous_wait_ns=maxs,
        member_wait_ns=take(wait_sum),
        op_code=op_codes,
        op_names=op_names,
        kind=kind,
        bytes=nbytes,
        group_size=gsize,
        group_code=group_codes,
        group_names=group_names,
        phase_code=phase_codes,
        phase_names=phase_names,
        dtype_code=dtype_codes,
        dtype_names=dtype_names,
        overlap_ns=overlap,
        has_overlap=has_overlap,
        channel=channel,
        weight=take(weight_all),
        ring_steps=ring.astype(np.float64, copy=False),
        tree_steps=tree.astype(np.float64, copy=False),
        transfer_bytes=transfer,
        skew_status=skew_status,
        skew_reason=program.skew_reason if skew_status == "unknown" else None,
        ablations=abl,
        custom_ops=custom,
        observed_latency_ns=take(
            np.where(
                occ_df["has_latency"].to_numpy(bool), occ_df["latency_ns"].to_numpy(np.int64), 0
            ).astype(np.int64, copy=False)
        ),
        has_observed_latency=take(occ_df["has_latency"].to_numpy(bool)),
    )


def base_service_ns(prep: Prepared, config: BackendConfig) -> tuple[np.ndarray, np.ndarray]:
    """(float64 base service ns, chosen candidate's file index) per occurrence.

    cost_c = latency_us * steps + transfer_bytes / (1000.0 * effective_busbw_gbps)  [us]
    base = min_c cost_c * 1000.0  [ns]; ties go to the earlier candidate in the file.
    A measured configuration prices each occurrence from its cost curve instead
    (``measured_service_ns``; chosen candidate -1).
    """
    if config.costs is not None:
        return measured_service_ns(prep, config), np.full(prep.n, -1, dtype=np.int64)
    n = prep.n
    best = np.full(n, np.inf, dtype=np.float64)
    choice = np.full(n, -1, dtype=np.int64)
    for cand in config.candidates:
        steps = prep.ring_steps if cand.algorithm == "ring" else prep.tree_steps
        cost = cand.latency_us * steps + prep.transfer_bytes / (1000.0 * cand.effective_busbw_gbps)
        if cand.algorithm != "ring":
            cost = np.where(steps < 0, np.inf, cost)
        better = cost < best
        best = np.where(better, cost, best)
        choice = np.where(better, cand.index, choice)
    return best * 1000.0, choice


def measured_service_ns(prep: Prepared, config: BackendConfig) -> np.ndarray:
    """float64 ns per occurrence from a measured configuration's cost curves; an op
    without a curve (barrier and custom ops have no ladder) is refused by name."""
    from tracecanary.sim.costs import canonical_dtype_name, curve_key, format_key

    ops = np.asarray(prep.op_names, dtype=object)[prep.op_code]
    dtypes = np.asarray([canonical_dtype_name(d) for d in prep.dtype_names], dtype=object)[
        prep.dtype_code
    ]
    keys = {curve_key(o, d, g) for o, d, g in zip(ops, dtypes, prep.group_size, strict=True)}
    missing = config.costs.missing(keys)
    if missing:
        raise InputError(
            f"configuration {config.name!r} has no measured evidence for "
            + ", ".join(format_key(k) for k in missing)
            + ": refused, never filled with a default",
            record=f"configs/{config.name}",
            field="measured/costs",
        )
    cost_us, _ = config.costs.evaluate(ops, dtypes, prep.group_size, prep.bytes)
    return cost_us * 1000.0


def channel_fifo(ready_ns: np.ndarray, service_ns: np.ndarray, channel: np.ndarray) -> np.ndarray:
    """Start times of a FIFO server per channel, occurrences served in array order.

    S_i = max(R_i, E_prev) unrolls to S_i = P_i + cummax_{k<=i, same channel}(R_k - P_k)
    with P the exclusive cumulative service within the channel (exact int64).
    """
    if ready_ns.size == 0:
        return ready_ns.copy()
    # copy=False: pandas 3 would otherwise copy each array into its Series
    by_channel = pd.Series(service_ns, copy=False).groupby(channel, sort=False)
    prior = by_channel.cumsum().to_numpy(np.int64) - service_ns
    del by_channel
    slack = pd.Series(ready_ns - prior, copy=False).groupby(channel, sort=False).cummax()
    return prior + slack.to_numpy(np.int64)


def simulate(
    prep: Prepared,
    config: BackendConfig,
    *,
    service_factor: np.ndarray | None = None,
    arrival_delay_ns: np.ndarray | None = None,
) -> SimResult:
    """Simulate every occurrence of ``prep`` under ``config`` (see module doc).

    Noise hooks (``sim.noise``; both None = the plain, noise-free model): the float64
    service time is multiplied by ``service_factor`` before rounding, and each
    occurrence's issue and ready times are delayed by ``arrival_delay_ns`` (int64 >= 0).
    """
    if arrival_delay_ns is not None:
        prep = replace(
            prep,
            issue_ns=prep.issue_ns + arrival_delay_ns,
            ready_ns=prep.ready_ns + arrival_delay_ns,
        )
    # peak memory: each float64 temporary is dropped as soon as its value is taken
    base, choice = base_service_ns(prep, config)
    overlap_f = prep.overlap_ns.astype(np.float64)
    contended = prep.has_overlap & (base > 0)
    frac = np.zeros(prep.n, dtype=np.float64)
    np.divide(overlap_f, base, out=frac, where=contended)
    frac = np.minimum(1.0, frac)
    service_f = np.where(contended, base * (1.0 + config.contention * frac), base)
    del base, frac, contended
    if service_factor is not None:
        service_f = service_f * service_factor
    service = np.rint(service_f).astype(np.int64)
    del service_f
    efficiency = config.overlap_efficiency
    if "compute_pressure" in prep.ablations:
        efficiency = efficiency * COMPUTE_PRESSURE_EFFICIENCY_FACTOR
    hideable = np.floor(efficiency * overlap_f).astype(np.int64)
    del overlap_f
    hidden = np.where(prep.has_overlap, np.minimum(service, hideable), 0).astype(np.int64)
    del hideable
    start = channel_fifo(prep.ready_ns, service, prep.channel)
    if "no_queue_reset" in prep.ablations and start.size:
        wait = pd.Series(start - prep.ready_ns).groupby(prep.channel, sort=False).cummax()
        start = prep.ready_ns + wait.to_numpy(np.int64)
    end = start + service
    latency = end - prep.issue_ns - hidden
    if "observed_latency" in prep.ablations:
        latency = np.where(prep.has_observed_latency, prep.observed_latency_ns, latency)
    return SimResult(
        config=config.name,
        candidate=choice,
        service_ns=service,
        start_ns=start,
        end_ns=end,
        queue_wait_ns=start - prep.ready_ns,
        hidden_ns=hidden,
        latency_ns=latency.astype(np.int64, copy=False),  # no second copy of an int64 array
    )
