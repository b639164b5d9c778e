"""The compiler: a normalized source ``Program`` -> a ``tracecanary.canary/v1`` document.

Guarantees (each checked before a canary is returned; a failure raises ``ClaimFailed``
and nothing is written):
- lossless: expanding the canary gives back the covered source exactly (same
  ``source_digest``), every member's own latency and overlap included;
- bounded: structure, measured masks and tail flags are exact; every timing value is
  within its field budget (signature overrides applied) and each interval's stated
  ``max_error_ns`` is the error actually incurred;
- unknown skew stays unknown (no skew stream, claim ``behaviorally_unverified``); a known
  skew whose uncertainty exceeds the skew budget is ``behaviorally_unverified`` too, the
  reason naming both and the ways out (``tracecanary.verify.claims``);
- same program and settings -> same canonical bytes.

See docs/formats-canary.md for the document and schemas/canary.schema.json.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

import numpy as np

from tracecanary.canonical import canonical_json_bytes
from tracecanary.compile import intervals as iv
from tracecanary.compile import splits, timing
from tracecanary.compile.budget import Budget
from tracecanary.compile.execution import finalize, reduce_execution
from tracecanary.compile.expand import decode_canary
from tracecanary.compile.source import SourceSerialization, serialize_source
from tracecanary.compile.structure import (
    encode_structure,
    group_table,
    signature_table,
    top_level_spans,
)
from tracecanary.compile.timing_streams import FIELDS, MASKED, MEMBER_STREAMS
from tracecanary.errors import ClaimFailed, InputError
from tracecanary.formats.ids import CANARY_FORMAT
from tracecanary.memory import release_freed_memory
from tracecanary.program import MEMBER_COLUMNS, SPLITS_COLUMN, Program, TextColumn
from tracecanary.verify.claims import (
    NOT_YET_VERIFIED,
    compile_claim,
    skew_budget_ns,
    skew_obstacle,
)

COMPILER = "tracecanary.compile/1"


def validate_source(program: Program) -> None:
    """Refuse programs the compiler cannot represent faithfully (InputError, exit 2)."""
    n = program.n
    if n == 0:
        raise InputError("program has no occurrences: nothing to compile", field="occurrences")
    if not np.array_equal(program.column("occ", np.int64), np.arange(n)):
        raise InputError("occurrences are not numbered 0..n-1 in order", field="occ")
    w = program.column("weight", np.float64)
    if (w != 1.0).any():
        i = int(np.flatnonzero(w != 1.0)[0])
        raise InputError(
            f"weight {w[i]!r}: compile takes a source program (every weight 1), not a reduced one",
            record=i,
            field="weight",
        )
    checks = [("gap_ns", None), ("overlap_ns", "has_overlap"), ("latency_ns", "has_latency")]
    for col, mask_col in checks:
        v = program.column(col, np.int64)
        m = np.ones(n, bool) if mask_col is None else program.column(mask_col, bool)
        # a gap is signed in the canonical order (an occurrence placed before one issued
        # earlier); every other value, and a gap in time order, is non-negative
        signed = col == "gap_ns" and program.occurrence_order == "canonical"
        low = -iv.MAX_VALUE if signed else 0
        bad = m & ((v < low) | (v >= iv.MAX_VALUE))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            span = "(-2^60, 2^60)" if signed else "[0, 2^60)"
            raise InputError(f"value {int(v[i])} out of range {span}", record=i, field=col)
    mocc = program.member_column("occ")  # int32: only compared
    if len(mocc) and ((np.diff(mocc) < 0).any() or mocc[0] < 0 or mocc[-1] >= n):
        raise InputError(
            "members are not sorted by occurrence or refer outside the table", field="members"
        )
    ranks = program.member_column("rank")
    if len(ranks) and (ranks.min() < 0 or ranks.max() >= program.world_size):
        i = int(np.flatnonzero((ranks < 0) | (ranks >= program.world_size))[0])
        raise InputError(
            f"rank {int(ranks[i])} outside world_size {program.world_size}",
            record=int(mocc[i]),
            field="rank",
        )
    if program.skew_known:
        skew = program.member_column("skew_ns", np.int64)
        bad = (skew < 0) | (skew >= iv.MAX_VALUE)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(
                f"skew {int(skew[i])} out of range [0, 2^60)", record=int(mocc[i]), field="skew_ns"
            )


def prefix_program(program: Program, stop: int) -> Program:
    """The first ``stop`` occurrences as a program of their own, held as ``program``
    is (column arrays or DataFrames)."""
    if stop >= program.n:
        return program
    if program.holds_columns:
        columns = {name: program.raw_column(name) for name in program.column_names}
        keep = program.member_column("occ") < stop
        return program.replace(
            occurrences={
                name: value.take(slice(0, stop)) if isinstance(value, TextColumn) else value[:stop]
                for name, value in columns.items()
            },
            members={
                name: program.member_column(name)[keep]
                for name in (*MEMBER_COLUMNS, *program.held_member_values())
            },
        )
    occ = program.occurrences.iloc[:stop].reset_index(drop=True)
    mem = program.members[program.members["occ"].to_numpy() < stop].reset_index(drop=True)
    return Program(
        occurrences=occ,
        members=mem,
        world_size=program.world_size,
        skew_known=program.skew_known,
        skew_reason=program.skew_reason,
        notes=program.notes,
        skew_uncertainty_ns=program.skew_uncertainty_ns,
        occurrence_order=program.occurrence_order,
    )


def compile_program(
    program: Program,
    *,
    budget: Budget | None = None,
    prefix: int | None = None,
    max_records: int | None = None,
    execution_policy: dict | None = None,
    serialization: SourceSerialization | None = None,
    intervals_always: bool = False,
) -> dict:
    """Compile ``program``; ``budget=None`` is lossless mode, else bounded mode.

    ``prefix``: compile only the first N occurrences (coverage ``partial`` when N < n).
    ``max_records``: at most this many encoded records per timing field (exact records or
    intervals, measured-mask records included), else ClaimFailed naming the field and
    the source range that does not fit.
    ``execution_policy``: passed to ``reduce_execution`` (see execution.py).
    ``intervals_always``: use bounded intervals for every field with a budget > 0 even
    where the exact encoding would be smaller (for inspection and tests).
    """
    release_freed_memory()  # what earlier stages freed is not counted in this one's peak
    with gc_paused():
        return _compile(
            program,
            budget=budget,
            prefix=prefix,
            max_records=max_records,
            execution_policy=execution_policy,
            serialization=serialization,
            intervals_always=intervals_always,
        )


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a block that builds millions of
    small containers (a canary's records): each collection pass would rescan all of
    them. Nothing is lost: cycles made meanwhile are collected after the block."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _compile(
    program: Program,
    *,
    budget: Budget | None,
    prefix: int | None,
    max_records: int | None,
    execution_policy: dict | None,
    serialization: SourceSerialization | None,
    intervals_always: bool,
) -> dict:
    validate_source(program)
    if prefix is not None and prefix < 1:
        raise InputError(f"--prefix {prefix}: need at least 1 occurrence", field="prefix")
    if max_records is not None and max_records < 1:
        raise InputError(f"max_records {max_records} must be >= 1", field="max_records")
    ser = serialization if serialization is not None else serialize_source(program)
    total = program.n
    covered_n = total if prefix is None else min(int(prefix), total)
    covered = prefix_program(program, covered_n)
    lossless = budget is None

    sig_ids, sigs = signature_table(covered)
    groups = group_table(covered)
    records = encode_structure(sig_ids)
    spans = top_level_spans(records)
    arrays = timing.timing_arrays(covered)

    streams: dict[str, dict | None] = {}
    stream_bytes: dict[str, int] = {}  # canonical size of each stream, as computed
    effective = Budget.exact() if lossless else budget
    for name in FIELDS:
        if name == "skew" and not covered.skew_known:
            streams[name] = None
            continue
        b_sig = effective.per_signature(name, len(sigs))
        plan = None
        if not lossless and b_sig.any():
            plan = timing.plan_bounded(name, arrays, spans, b_sig[sig_ids])
        if plan is not None and intervals_always:
            streams[name] = timing.encode_bounded(
                name, arrays, spans, b_sig[sig_ids], ser, plan=plan
            )
            continue
        streams[name], stream_bytes[name] = _choose_stream(
            name, plan, arrays, spans, b_sig[sig_ids], ser, max_records, covered_n
        )
    if lossless:  # members' own values, where some differ from their occurrence's
        for name in MEMBER_STREAMS:
            if arrays.deficits and name in arrays.deficits:
                streams[name], stream_bytes[name] = _choose_stream(
                    name, None, arrays, spans, None, ser, max_records, covered_n
                )
    plan = None  # its interval summaries are not needed past the streams
    partial = covered_n < total
    reasons = []
    if partial:
        reasons.append(f"coverage partial: built from the first {covered_n} of {total} occurrences")
    obstacle = skew_obstacle(
        covered.skew_known,
        covered.skew_reason,
        covered.skew_uncertainty_ns,
        skew_budget_ns(effective.to_json()),
    )
    if obstacle is not None:
        reasons.append(obstacle)
    claim = compile_claim(partial=partial, obstacle=obstacle)
    reasons.append(NOT_YET_VERIFIED)

    doc = {
        "format": CANARY_FORMAT,
        "compiler": COMPILER,
        "source": {
            "digest": ser.digest(),
            "occurrences": int(total),
            "member_events": int(program.member_count),
            "world_size": int(program.world_size),
            "skew_known": bool(program.skew_known),
            "skew_reason": program.skew_reason,
            **(
                {"skew_uncertainty_ns": int(program.skew_uncertainty_ns)}
                if program.skew_known
                else {}
            ),
            "notes": list(program.notes),
            # declared where not the default time order, so readers load the source in it
            **(
                {"occurrence_order": program.occurrence_order}
                if program.occurrence_order != "time"
                else {}
            ),
            "covered_occurrences": int(covered_n),
            "covered_digest": ser.digest(covered_n),
        },
        "coverage": "partial" if partial else "full",
        "timing_mode": "lossless" if lossless else "bounded_approximate",
        "budget": effective.to_json(),
        "claim": claim,
        "claim_reasons": reasons,
        "signatures": sigs,
        "groups": {g: ranks for g, ranks in sorted(groups.items())},
        "structure": {"occurrences": int(covered_n), "records": records},
        "timing": streams,
        "flags": {"tail": timing._bool_records(covered.column("tail", bool))},
        "source_commitment": {
            "start": 0,
            "stop": int(covered_n),
            "sha256": ser.segment(0, covered_n),
        },
        "execution": None,
        "stats": {
            "events_source": int(covered.member_count),
            "occurrences_source": int(covered_n),
            "bytes_source": int(ser.size_bytes(covered_n)),
        },
    }
    if SPLITS_COLUMN in covered.column_names:  # every all_to_allv's matrix, exactly
        doc[splits.FIELD] = splits.encode_splits(covered.column(SPLITS_COLUMN, object))
    del ser, serialization  # the check below reads no commitment: free the lines if ours
    drift = _self_check(covered, doc, effective, sig_ids)
    doc["stats"]["gap_issue_drift_max_ns"] = int(drift)
    if execution_policy:
        return reduce_execution(doc, execution_policy, timing_bytes=stream_bytes)
    return finalize(doc, timing_bytes=stream_bytes)


def _choose_stream(name, plan, arrays, spans, budget_occ, ser, max_records, n) -> tuple[dict, int]:
    """Exact encodings first: intervals are used only where they make the stream smaller
    (canonical bytes), both within the record limit. Fails closed when neither fits.
    Returns the stream and its canonical size (``len(canonical_json_bytes(stream))``).

    Sizes and record counts are computed from the encodings' arrays (``jsonsize``), and
    only the chosen stream is built. Work is skipped where the outcome is already
    decided: the bounded size is not computed when it cannot be smaller than the exact
    stream, and the exact encoding is not planned when the intervals are already smaller
    than any exact encoding can be."""
    cache: dict = {}

    def exact() -> timing.ExactPlan:
        if "exact" not in cache:
            cache["exact"] = timing.plan_exact(name, arrays)
        return cache["exact"]

    def exact_fits() -> bool:
        return max_records is None or exact().records() <= max_records

    def bounded_bytes() -> int:
        if "bounded_bytes" not in cache:
            cache["bounded_bytes"] = plan.stream_bytes(mask_len)
        return cache["bounded_bytes"]

    def take_exact() -> tuple[dict, int]:
        if plan is not None:
            plan.release()  # the intervals lost: free their summaries before building
        return exact().encode(), exact().stream_bytes()

    def take_bounded() -> tuple[dict, int]:
        stream = timing.encode_bounded(name, arrays, spans, budget_occ, ser, plan=plan)
        return stream, bounded_bytes()

    if plan is None:
        if exact_fits():
            return take_exact()
        raise ClaimFailed(
            f"exact encoding needs {exact().records()} records, over the limit "
            f"of {max_records}; source occurrences [0, {n}) do not fit (a budget > 0 allows intervals)",
            record=f"[0, {n})",
            field=name,
        )
    mask = arrays.values(name)[1] if name in MASKED else None
    mask_len, mask_records = (None, 0) if mask is None else timing.bool_records_len(mask)
    bounded_records = plan.intervals + mask_records
    if max_records is not None and bounded_records > max_records:
        if exact_fits():
            return take_exact()
        first = plan.interval_start(max(0, max_records - mask_records))
        raise ClaimFailed(
            f"cannot be represented within budget {int(budget_occ.max())} ns in at most {max_records} "
            f"records (bounded intervals need {bounded_records}); source occurrences [{first}, {n}) do not fit",
            record=f"[{first}, {n})",
            field=name,
        )
    exact_floor = timing.exact_bytes_lower_bound(name, arrays)
    bounded_floor = plan.bytes_lower_bound()
    if bounded_floor < exact_floor and bounded_bytes() < exact_floor:
        return take_bounded()
    if exact_fits() and exact().stream_bytes() <= bounded_floor:
        return take_exact()
    if exact_fits() and exact().stream_bytes() <= bounded_bytes():
        return take_exact()
    return take_bounded()


def _self_check(source: Program, doc: dict, budget: Budget, sig_ids: np.ndarray) -> int:
    """Fail closed unless the canary decodes to ``source`` as claimed: structure, groups,
    masks and flags exact; timing exact (lossless) or within budget (bounded). Returns
    the largest issue-time drift (ns) that gap approximation causes."""
    d = decode_canary(doc, ranks=False)  # ranks compared a block at a time below

    def fail(what: str):
        raise ClaimFailed("canary does not decode to its source (internal error)", field=what)

    if not np.array_equal(d.sig_ids, sig_ids):
        fail("structure")
    if not _same_ranks(d, source.member_column("rank")):
        fail("groups")
    if not np.array_equal(d.tail, source.column("tail", bool)):
        fail("flags.tail")
    lossless = doc["timing_mode"] == "lossless"
    for name, col, mask_col in (
        ("gap", "gap_ns", None),
        ("overlap", "overlap_ns", "has_overlap"),
        ("latency", "latency_ns", "has_latency"),
        ("skew", "skew_ns", None),
    ):
        if name == "skew":
            if not source.skew_known:
                continue
            src = source.member_column("skew_ns", np.int64)
        else:
            src = source.column(col, np.int64)
        got = d.values[name]
        if mask_col is not None:
            measured = source.column(mask_col, bool)
            if not np.array_equal(d.masks[name], measured):
                fail(f"timing.{name}.measured")
            src = np.where(measured, src, 0)
        if name == "skew":  # members are contiguous per occurrence: max over each
            err = _largest_member_error(src, got, d.member_offsets)
        else:
            err = np.abs(src - got)
        b = (
            np.zeros(source.n, np.int64)
            if lossless
            else budget.per_signature(name, len(doc["signatures"]))[sig_ids]
        )
        _raise_if_over(name, err, b)
    deficits = timing.timing_arrays(source).deficits or {}
    for name in MEMBER_STREAMS:
        if lossless and name in deficits:
            if name not in d.values or not np.array_equal(d.values[name], deficits[name]):
                fail(f"timing.{name}")
        elif name in d.values:
            fail(f"timing.{name}")
    gap = source.column("gap_ns", np.int64)
    drift = np.cumsum(d.values["gap"]) - np.cumsum(gap)
    return int(np.abs(drift).max()) if len(drift) else 0


_SELF_CHECK_MEMBERS = 1 << 20  # member events per step of the skew self-check


def _same_ranks(d, ranks: np.ndarray) -> bool:
    """Whether the decoded members' ranks equal ``ranks`` (``np.array_equal`` of the
    whole arrays), compared a block of members at a time."""
    if int(d.member_offsets[-1]) != len(ranks):
        return False
    return all(np.array_equal(block, ranks[m0 : m0 + block.size]) for m0, block in d.rank_blocks())


def _largest_member_error(src: np.ndarray, got: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per occurrence (members ``offsets[i]:offsets[i + 1]``): the largest
    ``|src - got|`` over its members, 0 for none; computed a block of occurrences at a
    time (no whole-trace error array)."""
    n = offsets.size - 1
    out = np.zeros(n, dtype=np.int64)
    g0 = 0
    while g0 < n:
        last = int(np.searchsorted(offsets, offsets[g0] + _SELF_CHECK_MEMBERS, "right")) - 1
        g1 = min(n, max(g0 + 1, last))
        m0, m1 = int(offsets[g0]), int(offsets[g1])
        err = np.abs(src[m0:m1] - got[m0:m1])
        starts = offsets[g0:g1] - m0
        nonempty = offsets[g0 + 1 : g1 + 1] > offsets[g0:g1]
        if err.size:
            out[g0:g1][nonempty] = np.maximum.reduceat(err, starts[nonempty])
        g0 = g1
    return out


def _raise_if_over(name: str, err: np.ndarray, budget: np.ndarray) -> None:
    over = np.flatnonzero(err > budget)
    if len(over):
        i = int(over[0])
        raise ClaimFailed(
            f"error {int(err[i])} ns exceeds the budget {int(budget[i])} ns (internal error)",
            record=f"[{i}, {i + 1})",
            field=name,
        )


def canary_bytes(doc: dict) -> bytes:
    """The canary's canonical JSON bytes (what ``write_json`` writes; ``bytes_canary``)."""
    return canonical_json_bytes(doc)
