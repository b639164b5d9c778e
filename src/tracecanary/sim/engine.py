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
- bad programs (negative gaps in time order, negative skews, non-positive or non-finite weights, group sizes
  below 1, ops without a cost model) raise ``InputError`` naming the record and field.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tracecanary.errors import InputError
from tracecanary.formats.vocab import DTYPE_BYTES
from tracecanary.grouped import Grouping, grouped_cummax
from tracecanary.program import SPLITS_COLUMN, Program
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
    op_code: np.ndarray  # index into op_names (int32, like every code below)
    op_names: tuple[str, ...]  # sorted
    kind: np.ndarray  # int8
    bytes: np.ndarray
    group_size: np.ndarray
    group_code: np.ndarray  # index into group_names
    group_names: tuple[str, ...]  # sorted
    phase_code: np.ndarray  # index into phase_names
    phase_names: tuple[str, ...]  # sorted ("" = no phase)
    dtype_code: np.ndarray  # index into dtype_names
    dtype_names: tuple[str, ...]  # sorted
    measured_overlap_ns: np.ndarray  # the overlap column (any value where not has_overlap)
    has_overlap: np.ndarray
    channel: np.ndarray  # code of (group, stream); int64 only past int32
    weight: np.ndarray
    skew_status: str  # "simulated" | "unknown" | "ablated"
    skew_reason: str | None
    ablations: tuple[str, ...]
    custom_ops: tuple[str, ...]
    # the trace's latency column (any value where not measured); kept only when prepared
    # for the observed_latency ablation, the one reader
    measured_latency_ns: np.ndarray | None
    has_observed_latency: np.ndarray

    @property
    def n(self) -> int:
        return int(self.occ.size)

    # derived on use, not held (peak memory): the same values, in the documented order

    @property
    def ring_steps(self) -> np.ndarray:
        """float64 steps of the ring algorithm per occurrence."""
        return _ring_steps(self.kind, self.group_size)

    @property
    def tree_steps(self) -> np.ndarray:
        """float64 steps of the tree algorithm, -1 where tree does not serve the op."""
        return _tree_steps(self.kind, self.group_size)

    @property
    def transfer_bytes(self) -> np.ndarray:
        """float64: bytes * bus factor (documented order)."""
        return _transfer_bytes(self.kind, self.group_size, self.bytes)

    @property
    def overlap_ns(self) -> np.ndarray:
        """int64 compute overlap per occurrence; 0 where not ``has_overlap``."""
        return np.where(self.has_overlap, self.measured_overlap_ns, 0).astype(np.int64, copy=False)

    @property
    def observed_latency_ns(self) -> np.ndarray:
        """The trace's measured latency (int64); 0 where not measured. Only for a
        preparation with the observed_latency ablation (ValueError otherwise)."""
        if self.measured_latency_ns is None:
            raise ValueError("prepared without the observed_latency ablation: no latency kept")
        return np.where(self.has_observed_latency, self.measured_latency_ns, 0).astype(
            np.int64, copy=False
        )


def _is_all_reduce_like(kind: np.ndarray) -> np.ndarray:
    return (kind == _KIND_ALL_REDUCE) | (kind == _KIND_BARRIER)


def _ring_steps(kind: np.ndarray, gsize: np.ndarray) -> np.ndarray:
    nm1 = (gsize - 1).astype(np.float64)
    ring = np.where(
        _is_all_reduce_like(kind),
        2.0 * nm1,
        np.where((kind == _KIND_N_MINUS_1) | (kind == _KIND_ROOTED), nm1, 1.0),
    )
    return ring.astype(np.float64, copy=False)


def _tree_steps(kind: np.ndarray, gsize: np.ndarray) -> np.ndarray:
    # ceil(log2 n) = bit length of n - 1, exact for n - 1 < 2**53
    depth = np.frexp((gsize - 1).astype(np.float64))[1].astype(np.float64)
    tree = np.where(
        _is_all_reduce_like(kind), 2.0 * depth, np.where(kind == _KIND_ROOTED, depth, -1.0)
    )
    return tree.astype(np.float64, copy=False)


def _transfer_bytes(kind: np.ndarray, gsize: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    n_f = gsize.astype(np.float64)
    nm1 = (gsize - 1).astype(np.float64)
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
    return nbytes.astype(np.float64) * factor


@dataclass(frozen=True)
class SimResult:
    """Per-occurrence outcome of one configuration (arrays aligned with Prepared).
    ``start_ns`` and ``end_ns`` are derived on use from the ready times simulated
    (``ready_ns``, shared with the Prepared arrays), not held."""

    config: str
    candidate: np.ndarray  # index into the configuration's file candidate list
    service_ns: np.ndarray
    queue_wait_ns: np.ndarray
    hidden_ns: np.ndarray
    latency_ns: np.ndarray
    ready_ns: np.ndarray

    @property
    def start_ns(self) -> np.ndarray:
        return self.ready_ns + self.queue_wait_ns

    @property
    def end_ns(self) -> np.ndarray:
        return self.start_ns + self.service_ns


def normalize_ablations(ablations) -> tuple[str, ...]:
    """Sorted, de-duplicated ablations; InputError for an unknown one."""
    out = sorted(set(ablations or ()))
    for a in out:
        if a not in ALL_ABLATIONS:
            raise InputError(
                f"unknown ablation {a!r} (known: {', '.join(ALL_ABLATIONS)})", field="ablate"
            )
    return tuple(out)


def _factorize(program: Program, name: str, take) -> tuple[np.ndarray, tuple[str, ...]]:
    """(int32 codes of take(column ``name``) into the sorted distinct values, those
    values).

    Values absent from take(column) may appear among the names (the tail ablation drops
    occurrences); consumers only report names whose code occurs."""
    codes, names = program.factorized(name, sort=True)
    return take(codes.astype(np.int32)), names


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _member_skews(program: Program, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(max skew, sum over members of (max skew - skew)) per occurrence."""
    occ = program.member_column("occ")  # int32 (a view): compared and indexed
    skew = program.member_column("skew_ns", np.int64)
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
    n = program.n
    gap = program.column("gap_ns", np.int64)
    # in the canonical order an occurrence may precede one issued earlier: gaps are signed
    if n and program.occurrence_order == "time" and (gap < 0).any():
        raise InputError("negative gap", record=f"occurrence {_first_bad(gap < 0)}", field="gap_ns")
    weight_all = program.column("weight", np.float64)
    bad_w = ~np.isfinite(weight_all) | (weight_all <= 0)
    if bad_w.any():
        raise InputError(
            "weight must be finite and > 0",
            record=f"occurrence {_first_bad(bad_w)}",
            field="weight",
        )
    gsize_all = program.column("group_size", np.int64)
    if (gsize_all < 1).any():
        raise InputError(
            "group_size below 1",
            record=f"occurrence {_first_bad(gsize_all < 1)}",
            field="group_size",
        )
    bytes_all = program.column("bytes", np.int64)
    if (bytes_all < 0).any():
        raise InputError(
            "negative bytes", record=f"occurrence {_first_bad(bytes_all < 0)}", field="bytes"
        )
    overlap_all = program.column("overlap_ns", np.int64)
    has_overlap_all = program.column("has_overlap", bool)
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


@dataclass(frozen=True)
class GroupedSkews:
    """``grouped_skews``: per occurrence of a member layout, the largest member skew (0
    for an occurrence without members) and the sum over its members of (largest -
    skew); ``negative``: the members whose skew is negative (what ``prepare`` refuses)."""

    offsets: np.ndarray
    max_skew: np.ndarray
    wait_sum: np.ndarray
    negative: np.ndarray


def grouped_skews(offsets: np.ndarray, skew: np.ndarray) -> GroupedSkews:
    """The skew figures of the members ``skew[offsets[i]:offsets[i + 1]]`` of each
    occurrence i (members sorted by occurrence), computed as ``member_skews`` computes
    them from a member table, without one (no occurrence index per member)."""
    offsets = np.asarray(offsets, dtype=np.int64)
    skew = np.asarray(skew, dtype=np.int64)
    sizes = np.diff(offsets)
    max_skew = np.zeros(sizes.size, dtype=np.int64)
    wait_sum = np.zeros(sizes.size, dtype=np.int64)
    some = sizes > 0
    if skew.size:
        starts = offsets[:-1][some]
        seg_max = np.maximum.reduceat(skew, starts)
        max_skew[some] = seg_max
        wait_sum[some] = seg_max * sizes[some] - np.add.reduceat(skew, starts)
    return GroupedSkews(offsets, max_skew, wait_sum, np.flatnonzero(skew < 0))


def selected_skews(grouped: GroupedSkews, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``member_skews`` of the program made of the occurrences ``idx`` (increasing) with
    their members in order, from ``grouped_skews`` of all occurrences: the same values,
    and the same refusal of a negative skew (its record numbers the selected members).
    The caller makes the occurrence-level refusals first (``check_occurrences``)."""
    idx = np.asarray(idx, dtype=np.int64)
    offsets, neg = grouped.offsets, grouped.negative
    if neg.size:
        owner = np.searchsorted(offsets, neg, side="right") - 1
        at = np.minimum(np.searchsorted(idx, owner), max(idx.size - 1, 0))
        selected = (at < idx.size) & (idx[at] == owner) if idx.size else np.zeros(0, bool)
        if selected.any():
            k = int(np.flatnonzero(selected)[0])
            sizes = np.diff(offsets)[idx[: at[k]]]
            bad = int(sizes.sum()) + int(neg[k] - offsets[owner[k]])
            raise InputError("negative arrival skew", record=f"member {bad}", field="skew_ns")
    if idx.size == grouped.max_skew.size and np.array_equal(idx, np.arange(idx.size)):
        return grouped.max_skew, grouped.wait_sum
    return grouped.max_skew[idx], grouped.wait_sum[idx]


def all_to_allv_bytes(program: Program, nbytes: np.ndarray) -> np.ndarray:
    """The bytes an occurrence is priced at: its ``bytes``, but for an all_to_allv
    (``program.SPLITS_COLUMN``) group size x its largest pair volume (the most elements one
    member sends another, self-sends excluded, times the element size). An even
    all_to_all of ``bytes`` moves ``bytes / n`` per pair; pricing the uneven one as the even
    one whose every pair carries its slowest pair makes the slowest pair, not the mean,
    set its cost. ``nbytes`` itself where the program has no splits."""
    if SPLITS_COLUMN not in program.column_names:
        return nbytes
    codes, texts = program.factorized(SPLITS_COLUMN, sort=False)
    largest = np.zeros(len(texts) + 1, dtype=np.int64)  # elements; last: code -1
    uneven = np.zeros(len(texts) + 1, dtype=bool)
    for code, text in enumerate(texts):
        if not text:
            continue
        rows = [[int(v) for v in row.split(",")] for row in text.split(";")]
        off_diagonal = [v for i, row in enumerate(rows) for j, v in enumerate(row) if i != j]
        largest[code] = max(off_diagonal, default=0)
        uneven[code] = True
    if not uneven.any():
        return nbytes
    dtype_codes, dtypes = program.factorized("dtype", sort=False)
    element = np.array([DTYPE_BYTES.get(d, 1) for d in dtypes], dtype=np.int64)[dtype_codes]
    gsize = program.column("group_size", np.int64)
    return np.where(uneven[codes], gsize * largest[codes] * element, nbytes)


def check_occurrences(program: Program) -> None:
    """The occurrence-level refusals ``prepare`` (and ``member_skews``) make, in order."""
    _checked_columns(program)


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
        positions = positions[~program.column("tail", bool)]
    issue = issue_all[positions] if "tail" in abl else issue_all
    perm = positions
    if "order" in abl and positions.size:
        sig, _ = program.signature_rows()
        perm = positions[np.argsort(sig[positions], kind="stable")]
    # without the tail or order ablation every position is simulated in place: the
    # arrays are used as they are (read-only views of the program's columns where
    # pandas gives one) instead of being copied through an identity permutation
    identity = "tail" not in abl and ("order" not in abl or not positions.size)

    def take(values: np.ndarray) -> np.ndarray:
        return values if identity else values[perm]

    op_codes, op_names = _factorize(program, "op", take)
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
        np.asarray(kinds_of_names, dtype=np.int8)[op_codes] if perm.size else np.zeros(0, np.int8)
    )
    gsize = take(gsize_all)
    nbytes = take(all_to_allv_bytes(program, bytes_all))

    has_overlap = take(has_overlap_all) & ("overlap" not in abl)

    group_codes, group_names = _factorize(program, "group", take)
    stream_codes, stream_names = _factorize(program, "stream", take)
    channel = group_codes.astype(np.int64) * max(len(stream_names), 1) + stream_codes
    if channel.size and int(channel.max()) <= np.iinfo(np.int32).max:
        channel = channel.astype(np.int32)
    del stream_codes
    phase_codes, phase_names = _factorize(program, "phase", take)
    dtype_codes, dtype_names = _factorize(program, "dtype", take)

    maxs = take(max_skew)
    custom = tuple(
        o for code, o in enumerate(op_names) if o.startswith("custom:") and op_present[code]
    )
    return Prepared(
        occ=take(program.column("occ", np.int64)),
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
        measured_overlap_ns=take(overlap_all),
        has_overlap=has_overlap,
        channel=channel,
        weight=take(weight_all),
        skew_status=skew_status,
        skew_reason=program.skew_reason if skew_status == "unknown" else None,
        ablations=abl,
        custom_ops=custom,
        measured_latency_ns=(
            take(program.column("latency_ns", np.int64)) if "observed_latency" in abl else None
        ),
        has_observed_latency=take(program.column("has_latency", bool)),
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
    transfer = prep.transfer_bytes
    steps_of: dict[bool, np.ndarray] = {}  # derived once per call, not held by ``prep``
    for cand in config.candidates:
        ring = cand.algorithm == "ring"
        if ring not in steps_of:
            steps_of[ring] = prep.ring_steps if ring else prep.tree_steps
        steps = steps_of[ring]
        cost = cand.latency_us * steps + transfer / (1000.0 * cand.effective_busbw_gbps)
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


HASHED_FROM_CHANNELS = 256
"""From this many channels the per-channel running sums and maxima are hashed by
pandas' groupby (one pass, no sort; pandas imported then) instead of sorted by
``tracecanary.grouped`` (numpy only), which is faster below it (fewer gathers) and
slower above it (measured in the commit that set this). The two agree bit for bit
(tests/test_grouped.py); small programs, with few channels, never import pandas here."""


def _many_channels(channel: np.ndarray) -> bool:
    """Whether ``channel`` (codes 0..k-1 from ``prepare``) may hold
    ``HASHED_FROM_CHANNELS`` or more channels."""
    return channel.size > 0 and int(channel.max()) + 1 >= HASHED_FROM_CHANNELS


def channel_fifo(ready_ns: np.ndarray, service_ns: np.ndarray, channel: np.ndarray) -> np.ndarray:
    """Start times of a FIFO server per channel, occurrences served in array order.

    S_i = max(R_i, E_prev) unrolls to S_i = P_i + cummax_{k<=i, same channel}(R_k - P_k)
    with P the exclusive cumulative service within the channel (exact int64).
    Below ``HASHED_FROM_CHANNELS`` channels computed by ``tracecanary.grouped`` (rows
    sorted by channel chunk by chunk, both scans on that one sort; no sort for one
    channel), from there by pandas' groupby.
    """
    if ready_ns.size == 0:
        return ready_ns.copy()
    if not _many_channels(channel):
        return Grouping.by(channel).queue_starts(ready_ns, service_ns)
    import pandas as pd

    # copy=False: pandas 3 would otherwise copy each array into its Series
    by_channel = pd.Series(service_ns, copy=False).groupby(channel, sort=False)
    prior = by_channel.cumsum().to_numpy(np.int64) - service_ns
    del by_channel
    slack = pd.Series(ready_ns - prior, copy=False).groupby(channel, sort=False).cummax()
    return prior + slack.to_numpy(np.int64)


def channel_cummax(values: np.ndarray, channel: np.ndarray) -> np.ndarray:
    """Running maximum of ``values`` within each channel, in array order (int64,
    exact; computed as ``channel_fifo`` computes its scans)."""
    if not _many_channels(channel):
        return grouped_cummax(values, channel)
    import pandas as pd

    running = pd.Series(values, copy=False).groupby(channel, sort=False).cummax()
    return running.to_numpy(np.int64)


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
        wait = channel_cummax(start - prep.ready_ns, prep.channel)
        start = prep.ready_ns + wait
    latency = start + service  # the end
    latency -= prep.issue_ns
    latency -= hidden
    if "observed_latency" in prep.ablations:
        latency = np.where(prep.has_observed_latency, prep.observed_latency_ns, latency)
    start -= prep.ready_ns  # the queue wait
    return SimResult(
        config=config.name,
        candidate=choice,
        service_ns=service,
        queue_wait_ns=start,
        hidden_ns=hidden,
        latency_ns=latency.astype(np.int64, copy=False),  # no second copy of an int64 array
        ready_ns=prep.ready_ns,
    )
