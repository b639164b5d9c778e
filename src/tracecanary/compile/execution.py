"""Reduced execution: a repeated top-level record executes k < n of its repetitions
while standing for all n, each executed steady-state repetition carrying a weight.

Rules (the policy and the resulting selection are recorded in the canary's
``execution`` section):

* Only top-level run and motif records are reduced; literal blocks always execute.
* **Tail windows execute whole, with weight 1.** A repetition is a tail window when one
  of its occurrences has ``tail`` set in the source, or (the documented rule) a
  measured latency of at least ``tail_latency_factor`` (default 4) times the median
  measured latency of its signature in the canary. ``tail_context`` (default 1)
  neighbouring repetitions on each side join the window, so the queueing that led into
  and out of the tail is replayed too.
* Of the remaining (steady-state) repetitions, k = ``max_executed_repeats`` (or a
  per-record ``records: {"<top-level index>": k}``) are executed, chosen evenly
  spaced (repetition ``floor((i + 0.5) * m / k)`` of the m steady ones, i < k); each
  stands for ``steady_weight = m / k`` logical repetitions. The weights of a record
  therefore sum to its ``repeat``, and the weights of the whole executed program to
  ``occurrences_logical``.
* Executed occurrences keep their logical timing (their own gap, overlap, latency,
  skew): a replay runs the chosen repetitions back to back as they happened.

A record that was reduced gets ``execute`` (< ``repeat``), ``executed_reps`` (sorted
repetition indices), ``whole_reps`` (the tail-window subset, weight 1) and
``steady_weight``.
"""

from __future__ import annotations

import json

import numpy as np

from tracecanary.canonical import canonical_json_bytes
from tracecanary.compile import timing
from tracecanary.compile.sequence import copy_json
from tracecanary.compile.structure import count_structure_records, top_level_spans
from tracecanary.errors import InputError

DEFAULT_TAIL_LATENCY_FACTOR = 4.0
DEFAULT_TAIL_CONTEXT = 1
_POLICY_KEYS = {"max_executed_repeats", "records", "tail_latency_factor", "tail_context"}


def normalize_policy(policy: dict | None) -> dict:
    policy = dict(policy or {})
    unknown = set(policy) - _POLICY_KEYS
    if unknown:
        raise InputError(
            f"unknown execution policy keys {sorted(unknown)}", field="execution_policy"
        )
    k = policy.get("max_executed_repeats")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise InputError(
            f"max_executed_repeats {k!r} must be an integer >= 1", field="max_executed_repeats"
        )
    records = {}
    for key, val in (policy.get("records") or {}).items():
        if isinstance(val, bool) or not isinstance(val, int) or val < 1:
            raise InputError(
                f"records[{key}] = {val!r} must be an integer >= 1",
                field="execution_policy.records",
            )
        try:
            records[str(int(key))] = val
        except ValueError as err:
            raise InputError(
                f"records key {key!r} is not a record index", field="execution_policy.records"
            ) from err
    factor = policy.get("tail_latency_factor", DEFAULT_TAIL_LATENCY_FACTOR)
    if factor is not None and (
        isinstance(factor, bool) or not isinstance(factor, int | float) or factor <= 1
    ):
        raise InputError(
            f"tail_latency_factor {factor!r} must be > 1 or null", field="tail_latency_factor"
        )
    context = policy.get("tail_context", DEFAULT_TAIL_CONTEXT)
    if isinstance(context, bool) or not isinstance(context, int) or context < 0:
        raise InputError(f"tail_context {context!r} must be an integer >= 0", field="tail_context")
    return {
        "max_executed_repeats": k,
        "records": records,
        "tail_latency_factor": None if factor is None else float(factor),
        "tail_context": context,
    }


def tail_occurrences(program, latency_factor: float | None) -> np.ndarray:
    """Tail flag per logical occurrence: the source flag, or the latency rule."""
    occ = program.occurrences
    tail = occ["tail"].to_numpy(dtype=bool).copy()
    if latency_factor is None:
        return tail
    has = occ["has_latency"].to_numpy(dtype=bool)
    if not has.any():
        return tail
    lat = occ["latency_ns"].to_numpy(dtype=np.float64)
    sig, _ = program.signature_ids()
    med = np.full(int(sig.max()) + 1, np.inf)
    for s in np.unique(sig[has]):
        med[s] = np.median(lat[has & (sig == s)])
    return tail | (has & (lat >= latency_factor * med[sig]) & (med[sig] > 0))


def _clear_reduction(records: list[dict]) -> None:
    for rec in records:
        rec["execute"] = rec["repeat"]
        for key in ("executed_reps", "whole_reps", "steady_weight"):
            rec.pop(key, None)


def reduce_execution(canary: dict, policy: dict | None) -> dict:
    """A copy of ``canary`` whose repeated top-level records execute fewer repetitions
    (see the module docstring); ``policy`` replaces any earlier reduction."""
    from tracecanary.compile.expand import expand_canary

    norm = normalize_policy(policy)
    doc = copy_json(canary)  # no aliasing: records are edited in place below
    records = doc["structure"]["records"]
    _clear_reduction(records)
    logical = expand_canary(doc, executed=False)
    tail = tail_occurrences(logical, norm["tail_latency_factor"])
    ctx = norm["tail_context"]
    for span in top_level_spans(records):
        rec = records[span.index]
        if "sigs" in rec or span.reps < 2:
            continue
        k = norm["records"].get(str(span.index), norm["max_executed_repeats"])
        if k is None:
            continue
        rep_tail = tail[span.start : span.stop].reshape(span.reps, span.period).any(axis=1)
        whole = np.zeros(span.reps, dtype=bool)
        for shift in range(-ctx, ctx + 1):
            src = np.flatnonzero(rep_tail) + shift
            whole[src[(src >= 0) & (src < span.reps)]] = True
        steady = np.flatnonzero(~whole)
        m = len(steady)
        if m <= k:
            continue
        chosen = steady[((np.arange(k) + 0.5) * m / k).astype(np.int64)]
        executed = np.union1d(chosen, np.flatnonzero(whole))
        rec["execute"] = int(len(executed))
        rec["executed_reps"] = [int(x) for x in executed]
        rec["whole_reps"] = [int(x) for x in np.flatnonzero(whole)]
        rec["steady_weight"] = m / k
    doc["execution"] = {"policy": norm, "tail_occurrences": int(tail.sum())}
    return finalize(doc)


def executed_selection(canary: dict) -> tuple[np.ndarray, np.ndarray]:
    """(logical occurrence index, weight) of every executed occurrence, in order."""
    records = canary["structure"]["records"]
    idx_parts, w_parts = [], []
    for span in top_level_spans(records):
        rec = records[span.index]
        if "executed_reps" not in rec:
            idx_parts.append(np.arange(span.start, span.stop, dtype=np.int64))
            w_parts.append(np.ones(span.stop - span.start))
            continue
        reps = np.asarray(rec["executed_reps"], dtype=np.int64)
        whole = np.isin(reps, np.asarray(rec["whole_reps"], dtype=np.int64))
        weight = np.where(whole, 1.0, float(rec["steady_weight"]))
        idx_parts.append(
            (span.start + reps[:, None] * span.period + np.arange(span.period)[None, :]).reshape(-1)
        )
        w_parts.append(np.repeat(weight, span.period))
    if not idx_parts:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    return np.concatenate(idx_parts), np.concatenate(w_parts)


def finalize(doc: dict) -> dict:
    """Fill ``execution`` totals and ``stats`` (records, bytes, compression) in place.

    ``bytes_canary`` is the size of the canary's own canonical JSON, stats included:
    the numbers are iterated to a fixed point."""
    records = doc["structure"]["records"]
    idx, weights = executed_selection(doc)
    logical = int(doc["structure"]["occurrences"])
    execution = doc.get("execution") or {"policy": None, "tail_occurrences": None}
    execution["occurrences_logical"] = logical
    execution["occurrences_executed"] = int(len(idx))
    execution["weight_sum"] = float(weights.sum())
    execution["note"] = (
        "every occurrence executes"
        if len(idx) == logical
        else "reduced: steady-state repetitions are weighted, tail windows execute whole"
    )
    doc["execution"] = execution
    st = doc["stats"]
    structure_records = count_structure_records(records)
    timing_records = sum(timing.count_stream_records(s) for s in doc["timing"].values())
    flag_records = timing.count_stream_records(
        {"encoding": "exact", "values": doc["flags"]["tail"]}
    )
    st["records_structure"] = structure_records
    st["records_timing"] = timing_records + flag_records
    st["records_canary"] = structure_records + timing_records + flag_records
    st["event_compression"] = round(st["events_source"] / st["records_canary"], 4)
    st["occurrences_logical"] = logical
    st["occurrences_executed"] = int(len(idx))
    st["execution_reduction"] = round(len(idx) / logical, 6) if logical else 1.0
    st["bytes_canary"] = 0
    st["byte_compression"] = 0.0
    st["compressed"] = False
    base = len(canonical_json_bytes(doc))  # with placeholders "0", "0.0", "false"
    bytes_source = st["bytes_source"]
    for digits in (4, 3, 5, 6, 2, 7):
        for size in range(base, base + 64):
            ratio = round(bytes_source / size, digits)
            compressed = size < bytes_source
            length = (
                base
                + len(str(size))
                - 1
                + len(json.dumps(ratio))
                - 3
                + (len("true") - len("false") if compressed else 0)
            )
            if length == size:
                st["bytes_canary"] = size
                st["byte_compression"] = ratio
                st["compressed"] = compressed
                return doc
    raise RuntimeError("canary byte count did not reach a fixed point")  # pragma: no cover
