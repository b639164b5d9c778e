"""Expansion: a canary back to a ``Program``.

``expand_canary(canary, executed=False)`` rebuilds every logical occurrence (for a
lossless canary: equal to the covered source, same ``source_digest``, every member's own
latency and overlap included; for a bounded canary: structure, masks and flags exact,
timing values the interval representatives, each member carrying its occurrence's
latency and overlap).
``executed=True`` gives only what a replay runs: the executed occurrences in order,
with ``weight`` (the logical occurrences each stands for; weights sum to the logical
count) and an extra column ``logical_occ`` (its logical index); every executed
occurrence keeps its logical timing except that a junction (the first occurrence after a
skipped stretch) has its gap lengthened or shortened by the junction delay of
``compile.junctions`` (its equation is there). It refuses a canary
whose reductions do not add up (``reductions.read_reductions``) or leave a tail-flagged
occurrence out or weighted other than 1.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from tracecanary.compile import splits, timing_streams
from tracecanary.compile.document import declared_order
from tracecanary.compile.reductions import executed_selection, read_reductions
from tracecanary.compile.structure import expand_structure, member_positions, structure_length
from tracecanary.compile.timing_streams import FIELDS, MEMBER_STREAMS
from tracecanary.errors import InputError, ResourceLimitExceeded
from tracecanary.limits import current_limits
from tracecanary.program import (
    MEMBER_COLUMNS,
    MEMBER_VALUE_COLUMNS,
    OCCURRENCE_COLUMNS,
    SPLITS_COLUMN,
    Program,
    TextColumn,
    unfit_bounds,
)

MAX_EXPAND_OCCURRENCES = 100_000_000
MAX_EXPAND_MEMBERS = 1_000_000_000


def _signature_columns(canary: dict, sig_ids: np.ndarray) -> dict[str, np.ndarray | TextColumn]:
    """The signature fields of the occurrences whose signature ids are ``sig_ids``:
    ``bytes`` and ``root`` int64; text as a ``TextColumn`` over the signatures' values
    (an object array when a value is not text)."""
    sigs = canary["signatures"]
    if len(sig_ids) and (sig_ids.min() < 0 or sig_ids.max() >= len(sigs)):
        raise InputError("structure refers to a signature that does not exist", field="structure")
    columns: dict[str, np.ndarray | TextColumn] = {}
    for key in ("op", "dtype", "group", "phase", "stream", "bytes", "root"):
        values = [s[key] for s in sigs]
        if key in ("bytes", "root") or not all(type(v) is str for v in values):
            columns[key] = signature_column(canary, key, sig_ids)
        else:
            columns[key] = TextColumn(np.asarray(sig_ids, dtype=np.int64), tuple(values))
    return columns


def signature_column(canary: dict, key: str, sig_ids: np.ndarray):
    """The occurrence column ``key`` (a signature field) of the occurrences whose
    signature ids are ``sig_ids`` (already checked to exist), as ``expand_canary`` holds
    it: text as a pandas ``str`` array (an object array when a value is not text),
    ``bytes`` and ``root`` int64."""
    sigs = canary["signatures"]
    if key in ("bytes", "root"):
        return np.array([int(s[key]) for s in sigs], dtype=np.int64)[sig_ids]
    values = [s[key] for s in sigs]
    if all(type(v) is str for v in values):
        import pandas as pd
        import pyarrow as pa

        # built in Arrow from the few signature strings: no Python string per row
        literals = pa.array(values, type=pa.large_string())
        return pd.array(literals.take(pa.array(sig_ids, type=pa.int64())), dtype="str")
    return np.array(values, dtype=object)[sig_ids]


DECODE_BLOCK_MEMBERS = 1 << 20
"""Most member events whose ranks are decoded at once (the decoder's own temporaries
are a few arrays of this length, not of the trace's)."""


@dataclass(frozen=True)
class Decoded:
    """Column arrays of a canary's logical occurrences (no strings materialized).

    ``ranks``: every member's rank (int64, flat, ``member_offsets`` per occurrence), or
    None when decoded without it (``decode_canary(..., ranks=False)``); ``rank_blocks``
    gives the same values a block at a time either way."""

    sig_ids: np.ndarray
    sizes: np.ndarray
    member_offsets: np.ndarray
    ranks: np.ndarray | None
    values: dict
    masks: dict
    tail: np.ndarray
    rank_table: np.ndarray  # the groups' ranks, concatenated in sorted group order
    rank_starts: np.ndarray  # per occurrence: where its group's ranks start in rank_table
    # all_to_allv send matrices (``compile.splits``): code per occurrence (-1: none) into
    # the canary's ``splits.values``; None for a canary without a splits stream
    split_codes: np.ndarray | None = None

    def rank_blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """(first member index, the ranks of a block of consecutive members) for blocks
        of whole occurrences of at most ``DECODE_BLOCK_MEMBERS`` members (at least one
        occurrence), covering every member in order."""
        offsets = self.member_offsets
        n = offsets.size - 1
        g0 = 0
        while g0 < n:
            last = int(np.searchsorted(offsets, offsets[g0] + DECODE_BLOCK_MEMBERS, "right")) - 1
            g1 = min(n, max(g0 + 1, last))
            positions = member_positions(self.rank_starts[g0:g1], self.sizes[g0:g1])
            yield int(offsets[g0]), self.rank_table[positions]
            g0 = g1


def decode_canary(canary: dict, *, ranks: bool = True) -> Decoded:
    """Decode structure, groups, timing and flags, checking that they fit together.
    ``ranks=False``: the members' ranks are not materialized (``Decoded.rank_blocks``
    gives them a block at a time); everything checked is the same."""
    records = canary["structure"]["records"]
    n = int(canary["structure"]["occurrences"])
    limit = min(MAX_EXPAND_OCCURRENCES, current_limits().max_occurrences)
    if n > limit:
        raise ResourceLimitExceeded(
            f"canary claims {n} occurrences (limit {limit})", field="structure"
        )
    length = structure_length(records)
    if length != n:
        raise InputError(
            f"structure records expand to {length} occurrences, not {n}", field="structure"
        )
    sig_ids = expand_structure(records)
    sigs = canary["signatures"]
    if len(sig_ids) and (sig_ids.min() < 0 or sig_ids.max() >= len(sigs)):
        raise InputError("structure refers to a signature that does not exist", field="structure")
    groups = canary["groups"]
    names = sorted(groups)
    if {s["group"] for s in sigs} - set(names):
        raise InputError("a signature names a group missing from groups", field="groups")
    gidx = {g: i for i, g in enumerate(names)}
    sizes_by_group = np.array([len(groups[g]) for g in names], dtype=np.int64)
    flat_ranks = np.array([r for g in names for r in groups[g]], dtype=np.int64)
    gstart = np.concatenate(([0], np.cumsum(sizes_by_group)[:-1]))
    sig_group = np.array([gidx[s["group"]] for s in sigs], dtype=np.int64)
    occ_group = sig_group[sig_ids]
    sizes = sizes_by_group[occ_group]
    if int(sizes.sum()) > MAX_EXPAND_MEMBERS:
        raise ResourceLimitExceeded("canary expands to too many member events", field="groups")
    member_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=member_offsets[1:])
    rank_starts = gstart[occ_group]
    del occ_group
    decoded = Decoded(
        sig_ids, sizes, member_offsets, None, {}, {}, np.zeros(0, bool), flat_ranks, rank_starts
    )
    all_ranks = None
    if ranks:  # filled a block at a time: no whole-trace index temporaries
        all_ranks = np.empty(int(member_offsets[-1]), dtype=np.int64)
        for m0, block in decoded.rank_blocks():
            all_ranks[m0 : m0 + block.size] = block
    values = {}
    masks = {}
    for name in FIELDS:
        stream = canary["timing"].get(name)
        if stream is None:
            if name != "skew" or canary["source"]["skew_known"]:
                raise InputError(f"timing stream {name} is missing", field=f"timing.{name}")
            continue
        values[name], masks[name] = timing_streams.decode_stream(name, stream, n, member_offsets)
    for name in MEMBER_STREAMS:
        stream = canary["timing"].get(name)
        if stream is not None:
            values[name], _ = timing_streams.decode_stream(name, stream, n, member_offsets)
    tail = timing_streams.decode_bool(canary["flags"]["tail"])
    if len(tail) != n:
        raise InputError(f"tail flags cover {len(tail)} occurrences, not {n}", field="flags.tail")
    _check_reductions(records)
    split_codes = None
    if splits.FIELD in canary:
        split_codes, _ = splits.decode_splits(canary[splits.FIELD], n)
    return dataclasses.replace(
        decoded, ranks=all_ranks, values=values, masks=masks, tail=tail, split_codes=split_codes
    )


def with_splits(canary: dict, d: Decoded, columns: dict) -> dict:
    """``columns`` (``_signature_columns`` of every logical occurrence) with each
    occurrence's all_to_allv matrix (``program.SPLITS_COLUMN``) and, where it has one, the
    ``bytes`` it derives (``compile.splits``); unchanged for a canary without matrices."""
    if d.split_codes is None:
        return columns
    codes = d.split_codes
    literals = ("", *canary[splits.FIELD]["values"])  # code -1 -> literal 0: no matrix
    columns[SPLITS_COLUMN] = TextColumn(codes + 1, literals)
    columns["bytes"] = splits.split_bytes(canary, d.sig_ids, codes, columns["bytes"])
    return columns


def _check_reductions(records: list[dict]) -> None:
    read_reductions(records)


def check_member_ranks(d: Decoded) -> None:
    """Refuse a member rank that a program's rank column cannot hold, as
    ``expand_canary`` does (same message and field), reading each used group's ranks
    once instead of every member's."""
    used = d.sizes > 0
    if not used.any():
        return
    starts, first = np.unique(d.rank_starts[used], return_index=True)
    lengths = d.sizes[used][first]
    ranks = np.concatenate(
        [d.rank_table[s : s + n] for s, n in zip(starts.tolist(), lengths.tolist(), strict=True)]
    )
    _member_array("rank", ranks, MEMBER_COLUMNS["rank"])


def logical_occurrences(canary: dict, d: Decoded) -> Program:
    """``expand_canary(canary)`` (``d = decode_canary(canary)``, ranks not needed) with
    an empty member table: the same occurrence columns, dtypes and values, sharing the
    decoded arrays. What a replay reads besides each occurrence's member skews (those
    come from ``d`` directly: ``sim.engine.grouped_skews``)."""
    occurrences = {
        **with_splits(canary, d, _signature_columns(canary, d.sig_ids)),
        "group_size": d.sizes,
        "gap_ns": d.values["gap"],
        "overlap_ns": d.values["overlap"],
        "has_overlap": d.masks["overlap"],
        "latency_ns": d.values["latency"],
        "has_latency": d.masks["latency"],
        "tail": d.tail,
    }
    members = {name: np.zeros(0, dtype=dtype) for name, dtype in MEMBER_COLUMNS.items()}
    return _make_program(
        occurrences,
        members,
        world_size=int(canary["source"]["world_size"]),
        skew_known=bool(canary["source"]["skew_known"]),
        skew_reason=canary["source"].get("skew_reason"),
        notes=_expansion_notes(canary, False),
        occurrence_order=declared_order(canary),
    )


def _make_program(
    occurrences: dict,
    members: dict,
    *,
    world_size: int,
    skew_known: bool,
    skew_reason: str | None,
    notes: tuple[str, ...],
    occurrence_order: str = "time",
) -> Program:
    """``make_program`` of an expansion (every column given but ``occ`` and ``weight``),
    held as column arrays (``Program.from_columns``: no pandas until a DataFrame is
    asked for; text columns as ``TextColumn``, no Python string per row). Its
    DataFrames are ``make_program``'s: same columns in the same order, dtypes and
    values. A text column with a value that is not text is built into the DataFrame at
    once, so that every reader sees it as ``make_program`` would have made it."""
    n = len(occurrences["gap_ns"])
    defaults = {"occ": np.arange(n, dtype=np.int64), "weight": np.ones(n, dtype=np.float64)}
    data: dict[str, np.ndarray | TextColumn] = {}
    not_text = False
    for name, dtype in OCCURRENCE_COLUMNS.items():
        value = occurrences[name] if name in occurrences else defaults[name]
        if dtype != "str":
            data[name] = np.asarray(value, dtype=dtype)
        elif isinstance(value, TextColumn):
            data[name] = value
        else:
            data[name] = np.asarray(value, dtype=object)
            not_text = not_text or not all(type(v) is str for v in data[name].tolist())
    if SPLITS_COLUMN in occurrences:  # optional: a canary of a source with an all_to_allv
        value = occurrences[SPLITS_COLUMN]
        data[SPLITS_COLUMN] = (
            value if isinstance(value, TextColumn) else np.asarray(value, dtype=object)
        )
    mcols = {
        name: _member_array(name, members[name], dtype) for name, dtype in MEMBER_COLUMNS.items()
    }
    mcols.update(
        {
            name: np.asarray(members[name], dtype)
            for name, dtype in MEMBER_VALUE_COLUMNS.items()
            if name in members
        }
    )
    program = Program.from_columns(
        data,
        mcols,  # the decoded arrays, not a second copy
        world_size=world_size,
        skew_known=skew_known,
        skew_reason=skew_reason,
        notes=tuple(notes),
        occurrence_order=occurrence_order,
    )
    if not_text:
        program.occurrences  # noqa: B018 (built now: readers see make_program's text)
    return program


def _member_array(name: str, values: np.ndarray, dtype: str) -> np.ndarray:
    """``values`` as the members column ``name`` of ``dtype``; InputError (field
    ``groups``) for a value the column cannot hold (a narrower column never wraps it)."""
    values = np.asarray(values)
    bounds = unfit_bounds(values, dtype)
    if bounds is not None:
        lo, hi = bounds
        bad = lo if lo < np.iinfo(dtype).min else hi
        raise InputError(f"member {name} {bad} does not fit a program ({dtype})", field="groups")
    return values.astype(dtype, copy=False)


def _expansion_notes(canary: dict, executed: bool) -> tuple[str, ...]:
    return tuple(canary["source"].get("notes", [])) + (
        f"expanded ({'executed' if executed else 'logical'}) from a {canary['timing_mode']} "
        f"canary of source {canary['source']['digest']}",
    )


def expand_canary(canary: dict, executed: bool = False) -> Program:
    """The program a canary stands for (logical) or runs (executed)."""
    d = decode_canary(canary)
    n = len(d.sig_ids)
    cols = with_splits(canary, d, _signature_columns(canary, d.sig_ids))
    sizes, ranks, values, masks, tail = d.sizes, d.ranks, d.values, d.masks, d.tail
    skew_known = bool(canary["source"]["skew_known"])
    occurrences = {
        **cols,
        "group_size": sizes,
        "gap_ns": values["gap"],
        "overlap_ns": values["overlap"],
        "has_overlap": masks["overlap"],
        "latency_ns": values["latency"],
        "has_latency": masks["latency"],
        "tail": tail,
    }
    members = {
        "occ": np.repeat(np.arange(n, dtype=MEMBER_COLUMNS["occ"]), sizes),  # n < 2^31
        "rank": ranks,
        "skew_ns": values["skew"] if skew_known else np.zeros(len(ranks), dtype=np.int64),
    }
    for name, field in MEMBER_STREAMS.items():  # each member's own value, where stated
        if name in values:
            occ_value = np.where(masks[field], values[field], 0)[members["occ"]]
            members[f"{field}_ns"] = occ_value - values[name]
    notes = _expansion_notes(canary, executed)
    program = _make_program(
        occurrences,
        members,
        world_size=int(canary["source"]["world_size"]),
        skew_known=skew_known,
        skew_reason=canary["source"].get("skew_reason"),
        notes=notes,
        occurrence_order=declared_order(canary),
    )
    if not executed:
        return program
    return executed_program(canary, program)


def executed_program(
    canary: dict, logical: Program, largest_skew: np.ndarray | None = None
) -> Program:
    """What ``canary`` runs, given ``logical = expand_canary(canary)`` (its logical
    program): equal to ``expand_canary(canary, executed=True)`` without decoding twice.
    ``largest_skew``: per logical occurrence, the largest of 0 and its members' skews,
    when ``logical``'s member table is left out (``logical_occurrences``; the executed
    program's member table is then empty too)."""
    program = logical.replace(notes=_expansion_notes(canary, True))
    tail = program.column("tail", bool)
    idx, weights = executed_selection(canary)
    flagged = np.flatnonzero(tail)
    pos = np.searchsorted(idx, flagged)
    good = pos < len(idx)
    good[good] = idx[pos[good]] == flagged[good]
    good[good] = weights[pos[good]] == 1.0
    if not good.all():
        raise InputError(
            "a tail-flagged occurrence does not execute with weight 1",
            record=int(flagged[~good][0]),
            field="structure",
        )
    return replayed_selection(program, idx, weights, largest_skew)


def replayed_selection(
    program: Program,
    idx: np.ndarray,
    weights: np.ndarray,
    largest_skew: np.ndarray | None = None,
) -> Program:
    """What a replay of the occurrences ``idx`` (increasing) of ``program`` runs:
    ``select_occurrences`` with each junction's gap plus its junction delay
    (``compile.junctions``; no junction, no change). ``largest_skew``: as
    ``junction_delays`` takes it, when ``program``'s member table is left out."""
    from tracecanary.compile.junctions import junction_delays  # not on a compile's path

    selected = select_occurrences(program, idx, weights)
    delays = junction_delays(program, idx, largest_skew)
    if delays.any():
        selected = selected.with_column("gap_ns", selected.column("gap_ns", np.int64) + delays)
    return selected


def select_occurrences(program: Program, idx: np.ndarray, weights: np.ndarray) -> Program:
    """The occurrences ``idx`` (in that order) renumbered 0.., with the given weights.
    Selecting every occurrence in order shares ``program``'s columns and member table
    (the same values a copy would hold: members are sorted by occurrence; the columns
    set here replace, never modify, the shared ones) instead of copying them. The
    selection is held as ``program`` is (column arrays or DataFrames)."""
    every = len(idx) == program.n and np.array_equal(idx, np.arange(program.n))
    extra = {
        "occ": np.arange(len(idx), dtype=np.int64),
        "weight": np.asarray(weights, dtype=np.float64),
        "logical_occ": np.asarray(idx, dtype=np.int64),
    }
    if every:
        members = None  # shared
    else:
        mocc = program.member_column("occ")  # int32 (a view): only counted
        counts = np.bincount(mocc, minlength=program.n)
        offsets = np.concatenate(([0], np.cumsum(counts)))
        pos = member_positions(offsets[idx], counts[idx])
        members = {
            "occ": np.repeat(np.arange(len(idx), dtype=MEMBER_COLUMNS["occ"]), counts[idx]),
            "rank": program.member_column("rank")[pos],
            "skew_ns": program.member_column("skew_ns", np.int64)[pos],
            **{name: program.member_column(name)[pos] for name in program.held_member_values()},
        }
    if program.holds_columns:
        columns = {name: program.raw_column(name) for name in program.column_names}
        if not every:
            columns = {
                name: value.take(idx) if isinstance(value, TextColumn) else value[idx]
                for name, value in columns.items()
            }
        columns.update(extra)
        return program.replace(  # skew uncertainty not carried, as before
            occurrences=columns,
            members=program.raw_members() if members is None else members,
            skew_uncertainty_ns=0,
        )
    import pandas as pd

    if every:
        occ = program.occurrences.copy(deep=False)
    else:
        occ = program.occurrences.iloc[idx].reset_index(drop=True)
    for name, values in extra.items():
        occ[name] = values
    return program.replace(
        occurrences=occ,
        members=program.members if members is None else pd.DataFrame(members),
        skew_uncertainty_ns=0,
    )


def expanded_trace_meta(
    canary: dict, program: Program, *, executed: bool, canary_name: str, canary_sha256: str
) -> dict:
    """The native-trace ``meta`` of ``program = expand_canary(canary, executed)``: notes
    on how it was expanded, and ``canary`` (the canary's digest, source digest, timing
    mode, coverage, claim and the expansion); with ``executed``, also ``execution`` (the
    executed logical occurrences and their weights, and ``junctions``, the executed
    positions whose gap carries a junction delay, where there is one)."""
    expansion = "executed" if executed else "logical"
    notes = [f"expanded ({expansion}) from a {canary['timing_mode']} canary"]
    if canary["timing_mode"] != "lossless":
        notes.append(
            "timing values are interval representatives within the canary's stated budgets"
        )
    if declared_order(canary) != "time":
        notes.append(
            f"occurrences in the {declared_order(canary)} order: compile or search this "
            f"trace with --order {declared_order(canary)} to get the canary's source back"
        )
    extra = {
        "canary": {
            "sha256": canary_sha256,
            "source_digest": canary["source"]["digest"],
            "timing_mode": canary["timing_mode"],
            "coverage": canary["coverage"],
            "claim": canary["claim"],
            "expansion": expansion,
        }
    }
    if executed:
        idx, weights = executed_selection(canary)
        extra["execution"] = {
            "occurrences_logical": int(canary["structure"]["occurrences"]),
            "occurrences_executed": int(len(idx)),
            "logical_occ": [int(i) for i in idx],
            "weights": [float(w) for w in weights],
        }
        from tracecanary.compile.junctions import segment_starts

        junctions = segment_starts(idx)[1:]
        if junctions.size:
            extra["execution"]["junctions"] = [int(j) for j in junctions]
            notes.append(
                "the gap of each executed position in meta.execution.junctions (the first "
                "after a skipped stretch) is its logical gap plus its junction delay"
            )
    from tracecanary.compile.tracefile import trace_meta  # gzip: only where a trace is written

    return trace_meta(program, source=f"tracecanary expand {canary_name}", notes=notes, extra=extra)
