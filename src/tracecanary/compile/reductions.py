"""Reading a canary's reduced execution: the reduced record instances its structure
states (``read_reductions``, checked: an InputError names the record whose reduction does
not add up) and the executed occurrences with their weights (``executed_selection``).
How a reduction is chosen, and what it guarantees, is in ``compile.execution``; this
module only reads one, so expansion and execution planning both build on it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracecanary.compile.structure import member_positions, record_length
from tracecanary.errors import InputError

INLINE_KEYS = ("executed_reps", "whole_reps", "steady_weight")


def is_count(x, minimum: int) -> bool:
    return not isinstance(x, bool) and isinstance(x, int) and x >= minimum


@dataclass(frozen=True)
class Reduction:
    """One reduced record instance: repetitions ``executed_reps`` of its ``repeat``
    (each ``period`` occurrences, the first starting at logical occurrence ``start``);
    ``whole_reps`` run with weight 1, the others with ``steady_weight``."""

    path: tuple[int, ...]
    instance: int
    start: int
    period: int
    repeat: int
    executed_reps: np.ndarray
    whole_reps: np.ndarray
    steady_weight: float

    @property
    def stop(self) -> int:
        return self.start + self.period * self.repeat


def _int_list(value, where: str, record) -> list[int]:
    if not isinstance(value, list) or not all(is_count(x, 0) for x in value):
        raise InputError(
            f"{where} must be a list of integers >= 0", record=record, field="structure"
        )
    return value


def _reduction_entry(rec: dict, entry: dict, path, instance: int, where: str) -> Reduction:
    repeat = int(rec["repeat"])
    reps = _int_list(entry.get("executed_reps"), "executed_reps", where)
    whole = _int_list(entry.get("whole_reps"), "whole_reps", where)
    if not reps or any(b <= a for a, b in zip(reps, reps[1:], strict=False)) or reps[-1] >= repeat:
        raise InputError(
            "executed_reps must be increasing repetition indices", record=where, field="structure"
        )
    if (
        not is_count(entry.get("execute"), 1)
        or len(reps) != entry["execute"]
        or any(b <= a for a, b in zip(whole, whole[1:], strict=False))
        or not set(whole) <= set(reps)
    ):
        raise InputError(
            "execute / whole_reps do not match executed_reps", record=where, field="structure"
        )
    steady = len(reps) - len(whole)
    want = (repeat - len(whole)) / steady if steady else None
    weight = entry.get("steady_weight")
    if (
        want is None
        or isinstance(weight, bool)
        or not isinstance(weight, int | float)
        or abs(float(weight) - want) > 1e-9 * max(1.0, want)
    ):
        raise InputError(
            "steady_weight does not make the weights sum to repeat", record=where, field="structure"
        )
    return Reduction(
        tuple(path),
        instance,
        -1,
        0,
        repeat,
        np.asarray(reps, dtype=np.int64),
        np.asarray(whole, dtype=np.int64),
        float(weight),
    )


def read_reductions(records: list[dict]) -> list[Reduction]:
    """Every reduced instance the structure records state, checked (InputError naming
    the record otherwise) and placed (``start``, ``period``), sorted by ``start``."""
    found: list[Reduction] = []
    layout: dict[tuple[int, ...], tuple[int, int, int]] = {}  # path -> (offset, repeat, period)

    def visit(recs: list[dict], prefix: tuple[int, ...], instances: int) -> None:
        offset = 0
        for i, rec in enumerate(recs):
            path = prefix + (i,)
            where = ".".join(map(str, path))
            length = record_length(rec)
            has_inline = any(key in rec for key in INLINE_KEYS)
            if "sigs" in rec:
                if has_inline or "reductions" in rec:
                    raise InputError(
                        "a literal block cannot be reduced", record=where, field="structure"
                    )
                offset += length
                continue
            repeat = int(rec["repeat"])
            layout[path] = (offset, repeat, length // repeat if repeat else 0)
            offset += length
            if len(path) == 1:
                if "reductions" in rec:
                    raise InputError(
                        "a top-level record states its reduction inline, not in reductions",
                        record=where,
                        field="structure",
                    )
                if has_inline:
                    found.append(_reduction_entry(rec, rec, path, 0, where))
                elif int(rec.get("execute", repeat)) != repeat:
                    raise InputError(
                        "execute differs from repeat but no executed_reps",
                        record=where,
                        field="structure",
                    )
            else:
                if has_inline:
                    raise InputError(
                        "a nested record lists its reduced instances in reductions",
                        record=where,
                        field="structure",
                    )
                if int(rec.get("execute", repeat)) != repeat:
                    raise InputError(
                        "a nested record keeps execute = repeat (reductions are per instance)",
                        record=where,
                        field="structure",
                    )
                entries = rec.get("reductions", [])
                if not isinstance(entries, list):
                    raise InputError("reductions must be a list", record=where, field="structure")
                last = -1
                for entry in entries:
                    inst = entry.get("instance") if isinstance(entry, dict) else None
                    if not is_count(inst, 0) or inst <= last or inst >= instances:
                        raise InputError(
                            f"reduction instance {inst!r} must increase and be < {instances}",
                            record=where,
                            field="structure",
                        )
                    last = inst
                    found.append(_reduction_entry(rec, entry, path, inst, where))
            if "body" in rec:
                visit(rec["body"], path, instances * repeat)

    visit(records, (), 1)
    reduced = {(r.path, r.instance) for r in found}
    placed = []
    for red in found:
        start, inst, path = 0, red.instance, red.path
        while len(path) > 1:
            parent = path[:-1]
            _, parent_repeat, parent_period = layout[parent]
            rep = inst % parent_repeat
            inst //= parent_repeat
            if (parent, inst) in reduced:
                raise InputError(
                    f"instance {red.instance} lies inside a reduced instance of record "
                    f"{'.'.join(map(str, parent))}: nothing inside a reduced repetition is reduced again",
                    record=".".join(map(str, red.path)),
                    field="structure",
                )
            start += layout[path][0] + rep * parent_period
            path = parent
        start += layout[path][0]
        _, _, period = layout[red.path]
        placed.append(
            Reduction(
                red.path,
                red.instance,
                start,
                period,
                red.repeat,
                red.executed_reps,
                red.whole_reps,
                red.steady_weight,
            )
        )
    placed.sort(key=lambda r: r.start)
    return placed


def executed_selection(canary: dict) -> tuple[np.ndarray, np.ndarray]:
    """(logical occurrence index, weight) of every executed occurrence, in order."""
    n = int(canary["structure"]["occurrences"])
    starts, lengths, weights = [], [], []
    pos = 0
    for red in read_reductions(canary["structure"]["records"]):
        if red.start < pos or red.stop > n:  # pragma: no cover - excluded by read_reductions
            raise InputError("reduced instances overlap", field="structure")
        if red.start > pos:
            starts.append(np.array([pos]))
            lengths.append(np.array([red.start - pos]))
            weights.append(np.array([1.0]))
        whole = np.isin(red.executed_reps, red.whole_reps)
        starts.append(red.start + red.executed_reps * red.period)
        lengths.append(np.full(len(red.executed_reps), red.period))
        weights.append(np.where(whole, 1.0, red.steady_weight))
        pos = red.stop
    if pos < n:
        starts.append(np.array([pos]))
        lengths.append(np.array([n - pos]))
        weights.append(np.array([1.0]))
    if not starts:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    seg_start = np.concatenate(starts).astype(np.int64)
    seg_len = np.concatenate(lengths).astype(np.int64)
    seg_w = np.concatenate(weights).astype(np.float64)
    return member_positions(seg_start, seg_len), np.repeat(seg_w, seg_len)
