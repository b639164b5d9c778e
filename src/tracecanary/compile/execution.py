"""Reduced execution: a repeated record, at any depth of the structure, executes k of
its n repetitions while standing for all n; every executed steady-state repetition
carries a weight, tail windows execute whole with weight 1.

Terms. A record's **path** names it from the top level down: ``"2"`` is top-level
record 2, ``"0.1"`` is record 1 of the body of top-level motif 0. A record inside
motifs occurs once per repetition of each enclosing motif; these **instances** are
numbered in logical order: a top-level record has the single instance 0, and a record
in the body of a motif of ``repeat`` R, inside that motif's instance j at repetition r,
is instance ``j * R + r``.

Policy (``normalize_policy``; recorded in the canary's ``execution.policy``):

* ``max_executed_repeats`` k (null: no default reduction) and ``records``
  ``{path: k}`` overriding it for every instance of one record;
* ``steady_fraction`` f in (0, 1] (default none; written only when given; excludes
  ``max_executed_repeats``): every reduced instance executes k = ceil(f x m) (at least 1)
  of its m steady repetitions, so records of different lengths are sampled in
  proportion (a capture whose steps differ splits into several motifs; one k for each
  would over-sample the short ones); ``records`` still overrides it per record;
* ``tail_latency_factor`` (default 4, null disables) and ``timing_outlier_factor``
  (default 4, null disables): the rules that make an occurrence a tail occurrence;
* ``tail_ids`` (default none; written only when non-empty): logical occurrence ids
  named as tail occurrences, strictly increasing, beside the rules. ``search`` names
  there the occurrences its tail-event check asks the canary to execute (the source
  replay's top-latency events under the configurations verified), with both rules off;
* ``tail_context`` [before, after] (default [0, 1]): repetitions joined to each tail
  window before and after it;
* ``edge_context`` [first, last] (default [1, 1]): repetitions at the start and the end
  of every reduced instance that execute whole;
* ``steady_selection`` (default ``"time"``; ``STEADY_SELECTIONS``): how the k steady
  repetitions are picked (see Selection). The default is never written: a normalized
  policy holds the key only when it is not ``"time"``, so canaries compiled before the
  key existed, and every canary using the default, keep their bytes and re-check as
  ``"time"``.

**Tail occurrences** (``tail_occurrences``): the source ``tail`` flag; or named in
``tail_ids``; or (latency
rule) a measured latency >= ``tail_latency_factor`` x the median measured latency of the
occurrence's signature; or (timing-outlier rule) a gap, a measured overlap or a largest
member arrival skew >= ``timing_outlier_factor`` x the median of that field over the
occurrence's signature (fields whose median is 0 are not screened). Medians are taken
over the canary's logical expansion.

**Selection**, top down. For an instance of a repeated record (``repeat`` n >= 2, k
given for its path):

* its **whole repetitions** are the tail windows (repetitions holding a tail
  occurrence), ``tail_context`` repetitions before and after each, and the
  ``edge_context`` first and last repetitions. In the scheduler model a disturbance
  (a tail window, the traffic before the repeated region) delays what follows it
  through the FIFO queues, not what precedes it, hence the asymmetric defaults;
* the other m repetitions are **steady**. If m > k, the instance is reduced: the whole
  repetitions execute with weight 1, and k steady ones execute with weight
  ``steady_weight = m / k``: with the m steady ones in **selection order**, those at
  positions ``floor((i + 0.5) * m / k)``, i < k. The selection order is, under
  ``steady_selection``:

  - ``"time"``: repetition order (k evenly spaced steady repetitions);
  - ``"skew_quantile"``: increasing **repetition skew**, ties broken by repetition
    index. A repetition's skew is the sum, over its occurrences, of the largest member
    arrival skew (the one the timing-outlier rule screens), taken from the canary's
    logical expansion. The chosen ones are then the (i + 0.5) / k quantiles of the
    steady repetitions' skew distribution: the sample spans the per-step arrival skew
    that dominates exposed latency, where evenly spaced ones can miss its mean. Without
    member skew (``skew_known`` false, or no members) every skew is 0 and the selection
    is the ``"time"`` one.

  Either selection is deterministic (integer skews, exact sums, a total order) and
  changes only which steady repetitions run, never how many or their weight. Every
  executed repetition runs entirely: nothing inside a reduced instance is reduced
  again;
* otherwise (m <= k, or no k) every repetition executes with weight 1, and the records
  of a motif's body are considered in each repetition in turn (deeper levels).

Guarantees (under either ``steady_selection``): the weights of a reduced instance sum
to its ``repeat``; every executed
occurrence has weight 1 or the ``steady_weight`` of the one reduced instance holding it,
so the weights of the executed program sum to ``occurrences_logical``; every tail
occurrence executes with weight 1 in a repetition that runs whole, in every outer
repetition where it occurs; executed occurrences keep their logical timing (their own
gap, overlap, latency and skew): a replay runs the chosen repetitions back to back,
except at a **junction** (the first executed occurrence after a skipped stretch), whose
gap is the logical gap plus the junction delay of ``compile.junctions``: the replay
resumes so that each channel is reached, relative to the latest readiness already on
it, as in the source (not behind whatever the preceding executed repetition left).
The delay is derived from the canary's own timing when the executed program is expanded
(``expand.executed_program``); nothing of it is stored in the canary.

Representation. A reduced top-level record carries ``execute`` (< ``repeat``),
``executed_reps`` (increasing repetition indices), ``whole_reps`` (the weight-1 subset)
and ``steady_weight``. A nested record keeps ``execute`` = ``repeat`` and lists its
reduced instances in ``reductions``: ``{"instance", "execute", "executed_reps",
"whole_reps", "steady_weight"}``, by increasing instance. ``read_reductions`` checks
all of it (``expand_canary`` refuses a canary whose reductions do not add up).
Cost: one Python step per record instance visited (not per occurrence); an instance
is visited only when its subtree can still be reduced.
"""

from __future__ import annotations

import json
import math

import numpy as np

from tracecanary.canonical import canonical_json_bytes
from tracecanary.compile import timing_streams
from tracecanary.compile.expand import expand_canary
from tracecanary.compile.reductions import (
    INLINE_KEYS,
    Reduction,
    executed_selection,
    is_count,
    read_reductions,
)
from tracecanary.compile.selection import (
    DEFAULT_STEADY_SELECTION,
    SKEW_QUANTILE_SELECTION,
    STEADY_SELECTIONS,
)
from tracecanary.compile.sequence import copy_json
from tracecanary.compile.structure import count_structure_records, record_length
from tracecanary.errors import InputError
from tracecanary.factorize import group_medians

DEFAULT_TAIL_LATENCY_FACTOR = 4.0
DEFAULT_TIMING_OUTLIER_FACTOR = 4.0
DEFAULT_TAIL_CONTEXT = (0, 1)
DEFAULT_EDGE_CONTEXT = (1, 1)
_POLICY_KEYS = {
    "max_executed_repeats",
    "records",
    "tail_latency_factor",
    "timing_outlier_factor",
    "tail_context",
    "edge_context",
    "steady_selection",
    "tail_ids",
    "steady_fraction",
}


def _factor(policy: dict, key: str, default: float) -> float | None:
    value = policy.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 1:
        raise InputError(f"{key} {value!r} must be a number > 1 or null", field=key)
    return float(value)


def _pair(policy: dict, key: str, default: tuple[int, int]) -> list[int]:
    """A [before, after] pair of repetition counts; a single integer means both."""
    value = policy.get(key, list(default))
    if is_count(value, 0):
        return [value, value]
    if isinstance(value, list | tuple) and len(value) == 2 and all(is_count(v, 0) for v in value):
        return [int(value[0]), int(value[1])]
    raise InputError(
        f"{key} {value!r} must be an integer >= 0 or a pair [before, after] of them", field=key
    )


def _path_key(key) -> str:
    text = str(key)
    parts = text.split(".")
    if not all(p.isdigit() and (p == "0" or not p.startswith("0")) for p in parts):
        raise InputError(
            f"records key {key!r} is not a record path like '2' or '0.1'",
            field="execution_policy.records",
        )
    return text


def _tail_ids(policy: dict) -> list[int]:
    """The named tail occurrences: strictly increasing logical occurrence ids (empty
    when absent)."""
    value = policy.get("tail_ids", [])
    if not isinstance(value, list | tuple) or not all(is_count(v, 0) for v in value):
        raise InputError(
            f"tail_ids must be a list of logical occurrence ids (integers >= 0), got {value!r}",
            field="execution_policy.tail_ids",
        )
    ids = [int(v) for v in value]
    if any(b <= a for a, b in zip(ids, ids[1:], strict=False)):
        raise InputError("tail_ids must be strictly increasing", field="execution_policy.tail_ids")
    return ids


def _steady_fraction(policy: dict) -> float | None:
    """The share of a reduced instance's steady repetitions that execute (None: absent)."""
    value = policy.get("steady_fraction")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise InputError(
            f"steady_fraction {value!r} must be a number in (0, 1]",
            field="execution_policy.steady_fraction",
        )
    if policy.get("max_executed_repeats") is not None:
        raise InputError(
            "steady_fraction and max_executed_repeats exclude each other: give one",
            field="execution_policy.steady_fraction",
        )
    return float(value)


def _steady_selection(policy: dict) -> str:
    value = policy.get("steady_selection", DEFAULT_STEADY_SELECTION)
    if value not in STEADY_SELECTIONS:
        raise InputError(
            f"steady_selection {value!r} must be one of {', '.join(STEADY_SELECTIONS)}",
            field="execution_policy.steady_selection",
        )
    return value


def normalize_policy(policy: dict | None) -> dict:
    """The policy with every key present and defaults filled (see module doc), except
    ``steady_selection``, present only when it is not the default ``"time"``, and
    ``tail_ids``, present only when it names at least one occurrence, and
    ``steady_fraction``, present only when given."""
    policy = dict(policy or {})
    unknown = set(policy) - _POLICY_KEYS
    if unknown:
        raise InputError(
            f"unknown execution policy keys {sorted(unknown)}", field="execution_policy"
        )
    k = policy.get("max_executed_repeats")
    if k is not None and not is_count(k, 1):
        raise InputError(
            f"max_executed_repeats {k!r} must be an integer >= 1", field="max_executed_repeats"
        )
    records = {}
    raw = policy.get("records") or {}
    if not isinstance(raw, dict):
        raise InputError("records must map record paths to k", field="execution_policy.records")
    for key, val in raw.items():
        if not is_count(val, 1):
            raise InputError(
                f"records[{key}] = {val!r} must be an integer >= 1",
                field="execution_policy.records",
            )
        records[_path_key(key)] = val
    selection = _steady_selection(policy)
    norm = {
        "max_executed_repeats": k,
        "records": dict(sorted(records.items())),
        "tail_latency_factor": _factor(policy, "tail_latency_factor", DEFAULT_TAIL_LATENCY_FACTOR),
        "timing_outlier_factor": _factor(
            policy, "timing_outlier_factor", DEFAULT_TIMING_OUTLIER_FACTOR
        ),
        "tail_context": _pair(policy, "tail_context", DEFAULT_TAIL_CONTEXT),
        "edge_context": _pair(policy, "edge_context", DEFAULT_EDGE_CONTEXT),
    }
    if selection != DEFAULT_STEADY_SELECTION:
        norm["steady_selection"] = selection
    tail_ids = _tail_ids(policy)
    if tail_ids:
        norm["tail_ids"] = tail_ids
    fraction = _steady_fraction(policy)
    if fraction is not None:
        norm["steady_fraction"] = fraction
    return norm


def steady_selection(norm: dict) -> str:
    """The ``steady_selection`` of a normalized policy (absent: the default)."""
    return norm.get("steady_selection", DEFAULT_STEADY_SELECTION)


def _above_signature_median(
    sig: np.ndarray, values: np.ndarray, measured: np.ndarray, factor: float
) -> np.ndarray:
    """values >= factor x the median of the measured values of the same signature
    (only where measured, and only where that median is > 0)."""
    out = np.zeros(len(values), dtype=bool)
    if not measured.any():
        return out
    keys, medians = group_medians(sig[measured], values[measured].astype(np.float64))
    per_sig = np.full(int(sig.max()) + 1, np.inf)
    per_sig[keys.astype(np.int64)] = medians
    m = per_sig[sig]
    return measured & (m > 0) & (values >= factor * m)


def tail_occurrences(
    program, latency_factor: float | None, outlier_factor: float | None = None
) -> np.ndarray:
    """Tail flag per logical occurrence: the source flag, the latency rule, the
    timing-outlier rule (see the module doc)."""
    tail = program.column("tail", bool).copy()
    if program.n == 0 or (latency_factor is None and outlier_factor is None):
        return tail
    sig, _ = program.signature_rows()
    if latency_factor is not None:
        tail |= _above_signature_median(
            sig,
            program.column("latency_ns", np.int64),
            program.column("has_latency", bool),
            latency_factor,
        )
    if outlier_factor is not None:
        every = np.ones(program.n, dtype=bool)
        tail |= _above_signature_median(
            sig, program.column("gap_ns", np.int64), every, outlier_factor
        )
        tail |= _above_signature_median(
            sig,
            program.column("overlap_ns", np.int64),
            program.column("has_overlap", bool),
            outlier_factor,
        )
        if program.skew_known and program.member_count:
            tail |= _above_signature_median(
                sig, largest_member_skew(program), every, outlier_factor
            )
    return tail


def policy_tail_occurrences(logical, norm: dict) -> np.ndarray:
    """Tail flag per logical occurrence under a normalized policy: ``tail_occurrences``
    with its factors, and the occurrences named in ``tail_ids`` (refused when one lies
    beyond the program)."""
    tail = tail_occurrences(logical, norm["tail_latency_factor"], norm["timing_outlier_factor"])
    named = np.asarray(norm.get("tail_ids", []), dtype=np.int64)
    if named.size and named[-1] >= logical.n:
        raise InputError(
            f"tail_ids names occurrence {int(named[-1])}, beyond the canary's "
            f"{logical.n} logical occurrences",
            field="execution_policy.tail_ids",
        )
    tail[named] = True
    return tail


def largest_member_skew(program) -> np.ndarray:
    """Per logical occurrence, the largest arrival skew of its members (int64 ns; all 0
    when the program's skew is unknown or it has no members)."""
    skew_max = np.zeros(program.n, dtype=np.int64)
    if program.skew_known and program.member_count:
        np.maximum.at(
            skew_max,
            program.member_column("occ"),  # int32: indices
            program.member_column("skew_ns", np.int64),
        )
    return skew_max


def select_steady(steady: np.ndarray, k: int, skew: np.ndarray | None) -> np.ndarray:
    """The k of the m > k ``steady`` repetition indices (increasing) that execute,
    increasing: those at positions ``floor((i + 0.5) * m / k)``, i < k, of the steady
    ones in selection order: repetition order when ``skew`` is None (``"time"``),
    otherwise increasing ``skew`` (one integer per steady repetition), ties broken by
    repetition index (``"skew_quantile"``). Deterministic; k distinct repetitions."""
    m = len(steady)
    positions = ((np.arange(k) + 0.5) * m / k).astype(np.int64)
    if skew is None:
        return steady[positions]
    order = np.lexsort((steady, skew))  # by skew, then by repetition index
    return np.sort(steady[order[positions]])


# ---------------------------------------------------------------------------------------
# writing a reduction
# ---------------------------------------------------------------------------------------


def _clear_reduction(records: list[dict]) -> None:
    for rec in records:
        rec["execute"] = rec["repeat"]
        for key in (*INLINE_KEYS, "reductions"):
            rec.pop(key, None)
        if "body" in rec:
            _clear_reduction(rec["body"])


def _k_for(norm: dict, path: tuple[int, ...]) -> int | None:
    return norm["records"].get(".".join(map(str, path)), norm["max_executed_repeats"])


def _steady_k(norm: dict, path: tuple[int, ...], steady: int) -> int | None:
    """k for an instance of the record at ``path`` with ``steady`` steady repetitions:
    the record's own k, else ceil(``steady_fraction`` x steady) (at least 1), else
    ``max_executed_repeats``."""
    key = ".".join(map(str, path))
    if key not in norm["records"] and norm.get("steady_fraction") is not None:
        return max(1, math.ceil(norm["steady_fraction"] * steady))
    return _k_for(norm, path)


def _may_reduce(norm: dict, path: tuple[int, ...], reps: int) -> bool:
    """Whether some instance of the record at ``path``, of ``reps`` repetitions, could
    execute fewer than all of them under ``norm``."""
    if reps < 2:
        return False
    key = ".".join(map(str, path))
    if key not in norm["records"] and norm.get("steady_fraction") is not None:
        return norm["steady_fraction"] < 1
    k = _k_for(norm, path)
    return k is not None and k < reps


def _reducible(records: list[dict], prefix: tuple[int, ...], norm: dict, out: dict) -> bool:
    """Fill ``out[path]`` = whether the subtree of the record at ``path`` holds a record
    that some instance could reduce (k < repeat); return it for the whole list."""
    any_here = False
    for i, rec in enumerate(records):
        if "sigs" in rec:
            continue
        path = prefix + (i,)
        below = _reducible(rec["body"], path, norm, out) if "body" in rec else False
        mine = _may_reduce(norm, path, int(rec["repeat"]))
        out[path] = below
        any_here = any_here or mine or below
    return any_here


def _whole_reps(rep_tail: np.ndarray, norm: dict) -> np.ndarray:
    reps = len(rep_tail)
    whole = np.zeros(reps, dtype=bool)
    before, after = norm["tail_context"]
    hits = np.flatnonzero(rep_tail)
    if len(hits):
        lo = np.maximum(hits - before, 0)
        hi = np.minimum(hits + after + 1, reps)
        cover = np.zeros(reps + 1, dtype=np.int64)
        np.add.at(cover, lo, 1)
        np.add.at(cover, hi, -1)
        whole |= np.cumsum(cover[:reps]) > 0
    first, last = norm["edge_context"]
    whole[: min(first, reps)] = True
    if last:
        whole[max(reps - last, 0) :] = True
    return whole


def plan_reductions(
    records: list[dict], tail: np.ndarray, norm: dict, skew: np.ndarray | None = None
) -> list[Reduction]:
    """The reduced instances the policy selects (see the module doc), in logical order.
    ``skew``: per logical occurrence, the largest member arrival skew
    (``largest_member_skew``); needed when the policy's ``steady_selection`` is
    ``"skew_quantile"`` (None: every repetition's skew is 0)."""
    by_skew = steady_selection(norm) == SKEW_QUANTILE_SELECTION
    if by_skew and skew is None:
        skew = np.zeros(len(tail), dtype=np.int64)
    reducible: dict = {}
    if not _reducible(records, (), norm, reducible):
        return []
    out: list[Reduction] = []

    def walk(recs: list[dict], start: int, prefix: tuple[int, ...], instance: int) -> None:
        pos = start
        for i, rec in enumerate(recs):
            length = record_length(rec)
            if "sigs" in rec:
                pos += length
                continue
            path = prefix + (i,)
            reps = int(rec["repeat"])
            period = length // reps
            reduced = False
            if _may_reduce(norm, path, reps):
                rep_tail = tail[pos : pos + length].reshape(reps, period).any(axis=1)
                whole = _whole_reps(rep_tail, norm)
                steady = np.flatnonzero(~whole)
                m = len(steady)
                k = _steady_k(norm, path, m)
                if k is not None and m > k:
                    rep_skew = None
                    if by_skew:
                        rep_skew = skew[pos : pos + length].reshape(reps, period).sum(axis=1)
                        rep_skew = rep_skew[steady]
                    chosen = select_steady(steady, k, rep_skew)  # steady: none is whole
                    out.append(
                        Reduction(
                            path,
                            instance,
                            pos,
                            period,
                            reps,
                            np.sort(np.concatenate((chosen, np.flatnonzero(whole)))),
                            np.flatnonzero(whole),
                            m / k,
                        )
                    )
                    reduced = True
            if not reduced and "body" in rec and reducible[path]:
                for r in range(reps):
                    walk(rec["body"], pos + r * period, path, instance * reps + r)
            pos += length

    walk(records, 0, (), 0)
    return out


def _record_at(records: list[dict], path: tuple[int, ...]) -> dict | None:
    rec = None
    level = records
    for i in path:
        if level is None or not 0 <= i < len(level):
            return None
        rec = level[i]
        level = rec.get("body")
    return rec


def _write_reductions(records: list[dict], plan: list[Reduction]) -> None:
    for red in plan:
        rec = _record_at(records, red.path)
        fields = {
            "execute": int(len(red.executed_reps)),
            "executed_reps": [int(x) for x in red.executed_reps],
            "whole_reps": [int(x) for x in red.whole_reps],
            "steady_weight": red.steady_weight,
        }
        if len(red.path) == 1:
            rec.update(fields)
        else:
            rec.setdefault("reductions", []).append({"instance": red.instance, **fields})


def reduce_execution(
    canary: dict, policy: dict | None, *, timing_bytes: dict[str, int] | None = None
) -> dict:
    """A copy of ``canary`` whose repeated records execute fewer repetitions (see the
    module docstring); ``policy`` replaces any earlier reduction.

    The structure records, ``execution`` and ``stats`` are new containers; the large,
    untouched parts (timing streams, flags, signatures, groups, source) are shared with
    ``canary`` rather than copied: copy them before editing either document in place.
    ``timing_bytes``: passed to ``finalize`` (the streams are not changed here)."""
    norm = normalize_policy(policy)
    doc = dict(canary)
    # no aliasing where this function or finalize() edits in place
    doc["structure"] = {**canary["structure"], "records": copy_json(canary["structure"]["records"])}
    doc["stats"] = dict(canary["stats"])
    records = doc["structure"]["records"]
    _clear_reduction(records)
    for key in norm["records"]:
        rec = _record_at(records, tuple(int(p) for p in key.split(".")))
        if rec is None or "sigs" in rec:
            raise InputError(
                f"records key {key!r} names no run or motif record of this canary",
                field="execution_policy.records",
            )
    doc["execution"] = None
    logical = expand_canary(doc, executed=False)
    tail = policy_tail_occurrences(logical, norm)
    by_skew = steady_selection(norm) == SKEW_QUANTILE_SELECTION
    skew = largest_member_skew(logical) if by_skew else None
    _write_reductions(records, plan_reductions(records, tail, norm, skew))
    doc["execution"] = {"policy": norm, "tail_occurrences": int(tail.sum())}
    return finalize(doc, timing_bytes=timing_bytes)


def check_execution(canary: dict) -> list[str]:
    """Where the stated reduction differs from what its recorded policy selects on this
    canary (empty when it reproduces; a canary without a policy must reduce nothing)."""
    execution = canary.get("execution") or {}
    policy = execution.get("policy")
    records = canary["structure"]["records"]
    if policy is None:
        if read_reductions(records):
            return ["structure: reductions present but execution.policy is null"]
        return []
    redo = reduce_execution(canary, policy)
    out = []
    if canonical_json_bytes(redo["structure"]["records"]) != canonical_json_bytes(records):
        out.append("structure: the reductions differ from what execution.policy selects")
    for key in ("policy", "tail_occurrences"):
        if redo["execution"][key] != execution.get(key):
            out.append(f"execution.{key}")
    return out


def finalize(doc: dict, *, timing_bytes: dict[str, int] | None = None) -> dict:
    """Fill ``execution`` totals and ``stats`` (records, bytes, compression) in place.

    ``bytes_canary`` is the size of the canary's own canonical JSON, stats included:
    the numbers are iterated to a fixed point. ``timing_bytes`` (optional): for some
    timing streams, ``len(canonical_json_bytes(stream))`` as the compiler already
    computed it (``compile.jsonsize``); those streams are then not serialized again."""
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
    timing_records = sum(timing_streams.count_stream_records(s) for s in doc["timing"].values())
    flag_records = timing_streams.count_stream_records(
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
    base = _document_bytes(doc, timing_bytes)  # with placeholders "0", "0.0", "false"
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


def _document_bytes(doc: dict, timing_bytes: dict[str, int] | None) -> int:
    """``len(canonical_json_bytes(doc))``; streams whose size is in ``timing_bytes`` are
    measured as ``null`` and their known size (less its newline) added instead."""
    timing_streams = doc["timing"]
    known = {
        name: int(size)
        for name, size in (timing_bytes or {}).items()
        if timing_streams.get(name) is not None
    }
    if not known:
        return len(canonical_json_bytes(doc))
    shallow = dict(doc)
    shallow["timing"] = {k: (None if k in known else v) for k, v in timing_streams.items()}
    null_len = len("null")
    return len(canonical_json_bytes(shallow)) + sum(size - 1 - null_len for size in known.values())
