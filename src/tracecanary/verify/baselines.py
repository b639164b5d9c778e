"""Sampling baselines: does the canary beat simple samples of its source at equal size?

Each baseline draws k occurrences of the source program, where k is the number of
occurrences the canary itself executes, and gives each a weight (how many source
occurrences it stands for), exactly like a reduced-execution canary: the weighted
program (``compile.expand.replayed_selection``: each executed occurrence keeps its own
gap, overlap, latency and skew, a junction's gap plus its junction delay, as in a
canary's executed program) is replayed under every configuration and judged by the
same behaviour checks and ranking decisions as a canary
(``verify.behavior.behavior_checks`` / ``ranking_changes``).

Methods (``BASELINE_METHODS``; each draws from its own generator seeded by
``[seed, method index]``, so a method's sample depends only on the program, k and seed):

- ``random``: k occurrences uniformly without replacement, each of weight N / k.
- ``frequency``: k slots shared among the op signatures in proportion to how often each
  occurs (largest remainder); rare signatures may get none and are then absent. Within a
  signature, occurrences uniformly at random, each of weight n_s / q_s.
- ``cluster``: k-means (scipy ``kmeans2``, k-means++ init) of the standardized
  occurrence features (log size, log gap, log overlap and latency where measured, group
  size, op and phase indicators) into min(k, ``MAX_CLUSTERS``) clusters; slots shared in
  proportion to cluster size, at least one per cluster; in each cluster the occurrences
  nearest its centroid, each of weight n_c / q_c.
- ``stratified``: strata = (phase, op, power-of-two size bucket); at least one slot per
  stratum while k allows, the rest in proportion; uniformly at random inside a stratum,
  each of weight n_s / q_s.

Guarantees: deterministic for (program, k, seed); every selection is k distinct
occurrences in issue order (fewer only when a method's quotas cannot reach k, which the
document states); the weights of ``random``, ``cluster`` and ``stratified`` (when every
stratum gets a slot) sum to N. ``selection_sha256`` in the document is the SHA-256 of the
little-endian int64 occurrence indices followed by the float64 weights, so a reviewer can
confirm a redraw selected the same occurrences.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracecanary.formats.ids import BASELINES_FORMAT
from tracecanary.program import Program
from tracecanary.verify.behavior import (
    Replay,
    Tolerances,
    behavior_checks,
    ranking_changes,
    replay_program,
)
from tracecanary.verify.claims import BEHAVIOR_UNJUDGED, skew_obstacle

BASELINE_METHODS = ("random", "frequency", "cluster", "stratified")
MAX_CLUSTERS = 32
KMEANS_ITERATIONS = 20
CANARY_ENTRY = "canary"

METHOD_DESCRIPTIONS = {
    "random": "uniform random occurrences, each weighted N/k",
    "frequency": "slots per op signature in proportion to its frequency; random within a signature",
    "cluster": "k-means of occurrence features; occurrences nearest each centroid",
    "stratified": "strata by phase, op and power-of-two size; at least one per stratum",
}


@dataclass(frozen=True)
class Sample:
    """A baseline's selection: source occurrence indices (increasing) and weights."""

    method: str
    idx: np.ndarray
    weights: np.ndarray

    def selection_sha256(self) -> str:
        data = np.ascontiguousarray(self.idx, dtype="<i8").tobytes()
        data += np.ascontiguousarray(self.weights, dtype="<f8").tobytes()
        return hashlib.sha256(data).hexdigest()


def allocate(counts: np.ndarray, k: int, *, at_least_one: bool) -> np.ndarray:
    """Slots per group (each <= its count, summing to min(k, total)): in proportion to
    ``counts`` by largest remainder (ties to the lower index); with ``at_least_one`` every
    non-empty group first gets one slot while k allows (the largest groups first)."""
    counts = np.asarray(counts, dtype=np.int64)
    k = min(int(k), int(counts.sum()))
    quota = np.zeros(len(counts), dtype=np.int64)
    if at_least_one:
        order = np.argsort(-counts, kind="stable")
        order = order[counts[order] > 0][:k]
        quota[order] = 1
    while quota.sum() < k:
        room = counts - quota
        left = k - int(quota.sum())
        share = left * room / room.sum()
        add = np.minimum(np.floor(share).astype(np.int64), room)
        remainder = left - int(add.sum())
        if remainder > 0:
            frac = np.where(room - add > 0, share - np.floor(share), -1.0)
            top = np.argsort(-frac, kind="stable")[:remainder]
            add[top[frac[top] >= 0]] += 1
        quota += add
    return quota


def _pick_within(groups: np.ndarray, key: np.ndarray, quota: np.ndarray) -> np.ndarray:
    """In each group g, the ``quota[g]`` members with the smallest ``key`` (ties by index),
    as increasing occurrence indices."""
    order = np.lexsort((np.arange(len(groups)), key, groups))
    sorted_groups = groups[order]
    starts = np.searchsorted(sorted_groups, sorted_groups, side="left")
    rank_in_group = np.arange(len(groups)) - starts
    return np.sort(order[rank_in_group < quota[sorted_groups]])


def _stratum_sample(
    method: str, strata: np.ndarray, k: int, key: np.ndarray, *, at_least_one: bool
) -> Sample:
    counts = np.bincount(strata)
    quota = allocate(counts, k, at_least_one=at_least_one)
    idx = _pick_within(strata, key, quota)
    weights = counts[strata[idx]] / quota[strata[idx]]
    return Sample(method, idx, weights.astype(np.float64))


def sample_random(program: Program, k: int, rng: np.random.Generator) -> Sample:
    n = program.n
    idx = np.sort(rng.choice(n, size=min(k, n), replace=False)).astype(np.int64)
    return Sample("random", idx, np.full(len(idx), n / len(idx), dtype=np.float64))


def sample_frequency(program: Program, k: int, rng: np.random.Generator) -> Sample:
    sig, _ = program.signature_rows()
    return _stratum_sample("frequency", sig, k, rng.random(program.n), at_least_one=False)


def size_bucket(nbytes: np.ndarray) -> np.ndarray:
    """floor(log2(bytes)) + 1, and 0 for an empty message."""
    nbytes = np.asarray(nbytes, dtype=np.int64)
    out = np.zeros(len(nbytes), dtype=np.int64)
    pos = nbytes > 0
    out[pos] = np.floor(np.log2(nbytes[pos])).astype(np.int64) + 1
    return out


def sample_stratified(program: Program, k: int, rng: np.random.Generator) -> Sample:
    occ = program.occurrences
    keys = pd.DataFrame(
        {"phase": occ["phase"], "op": occ["op"], "size": size_bucket(occ["bytes"].to_numpy())}
    )
    strata = keys.groupby(["phase", "op", "size"], sort=True).ngroup().to_numpy(np.int64)
    return _stratum_sample("stratified", strata, k, rng.random(program.n), at_least_one=True)


def occurrence_features(program: Program) -> np.ndarray:
    """Standardized features per occurrence (see the module doc); constant columns are 0."""
    occ = program.occurrences
    measured_overlap = occ["has_overlap"].to_numpy(bool)
    measured_latency = occ["has_latency"].to_numpy(bool)
    columns = [
        np.log1p(occ["bytes"].to_numpy(np.float64)),
        np.log1p(occ["gap_ns"].to_numpy(np.float64).clip(min=0)),
        np.where(measured_overlap, np.log1p(occ["overlap_ns"].to_numpy(np.float64)), 0.0),
        np.where(measured_latency, np.log1p(occ["latency_ns"].to_numpy(np.float64)), 0.0),
        np.log1p(occ["group_size"].to_numpy(np.float64)),
    ]
    for name in ("op", "phase"):
        codes, uniques = pd.factorize(occ[name], sort=True)
        columns += [(codes == i).astype(np.float64) for i in range(len(uniques))]
    x = np.column_stack(columns)
    std = x.std(axis=0)
    return np.where(std > 0, (x - x.mean(axis=0)) / np.where(std > 0, std, 1.0), 0.0)


def sample_cluster(program: Program, k: int, rng: np.random.Generator) -> Sample:
    from scipy.cluster.vq import kmeans2

    x = occurrence_features(program)
    clusters = max(1, min(k, MAX_CLUSTERS, program.n))
    with warnings.catch_warnings():  # an empty cluster is dropped below, not an error
        warnings.simplefilter("ignore")
        _, labels = kmeans2(x, clusters, iter=KMEANS_ITERATIONS, minit="++", seed=rng)
    _, labels = np.unique(labels, return_inverse=True)  # renumber the non-empty clusters
    labels = labels.astype(np.int64)
    centers = np.vstack([x[labels == c].mean(axis=0) for c in range(int(labels.max()) + 1)])
    distance = np.linalg.norm(x - centers[labels], axis=1)
    return _stratum_sample("cluster", labels, k, distance, at_least_one=True)


SAMPLERS = {
    "random": sample_random,
    "frequency": sample_frequency,
    "cluster": sample_cluster,
    "stratified": sample_stratified,
}


def draw_baselines(program: Program, k: int, seed: int) -> list[Sample]:
    """Every method's sample of ``program`` at size k (see the module doc)."""
    if program.n == 0 or k < 1:
        return []
    return [
        SAMPLERS[method](program, min(k, program.n), np.random.default_rng([seed, i]))
        for i, method in enumerate(BASELINE_METHODS)
    ]


def baseline_program(program: Program, sample: Sample) -> Program:
    """The weighted program a baseline executes (like a canary's executed program)."""
    from tracecanary.compile.expand import replayed_selection

    return replayed_selection(program, sample.idx, sample.weights)


def check_severity(check: dict) -> float:
    """How far a check is from its bound: 0 exact, <= 1 within it, > 1 failed (inf where
    the difference has no bound, e.g. a breakdown key one side lacks)."""
    tolerance = check["tolerance"]
    if "minimum" in tolerance:  # tail-event recall: 1 - recall against 1 - minimum
        shortfall, allowed = 1.0 - float(check["canary"]), 1.0 - float(tolerance["minimum"])
    elif check["source"] is None or check["canary"] is None:
        return 0.0 if check["pass"] else math.inf
    else:
        shortfall = abs(float(check["canary"]) - float(check["source"]))
        allowed = float(tolerance["allowed"])
    if shortfall <= 0:
        return 0.0
    return shortfall / allowed if allowed > 0 else math.inf


def summarize_checks(checks: list[dict], decisions_checked: int, decisions_changed: int) -> dict:
    """Passed/failed counts, the worst check (the failed check furthest outside its
    tolerance, else the one nearest its bound; None when every value is exact), tail
    recall and ranking agreement."""
    failed = sum(1 for c in checks if not c["pass"])
    severities = [check_severity(c) for c in checks]
    ranked = sorted(range(len(checks)), key=lambda i: (checks[i]["pass"], -severities[i], i))
    worst = None
    if ranked and (severities[ranked[0]] > 0 or not checks[ranked[0]]["pass"]):
        c, severity = checks[ranked[0]], severities[ranked[0]]
        worst = {
            "config": c["config"],
            "metric": c["metric"],
            "source": c["source"],
            "canary": c["canary"],
            "pass": c["pass"],
            "severity": None if math.isinf(severity) else round(severity, 6),
        }
    recalls = [c["canary"] for c in checks if c["metric"] == "tail_event_recall"]
    decided = decisions_checked
    return {
        "checks": {"total": len(checks), "passed": len(checks) - failed, "failed": failed},
        "worst_check": worst,
        "tail_event_recall_min": min(recalls) if recalls else None,
        "ranking": {
            "decisions_checked": decided,
            "changed": decisions_changed,
            "agreement": round(1.0 - decisions_changed / decided, 6) if decided else 1.0,
        },
    }


def judge_sample(
    source: Program,
    sample: Sample,
    src: Replay,
    backends,
    tolerances: Tolerances,
    config_names: list[str] | None,
    obstacle: str | None,
) -> dict:
    """One baseline's entry: replayed and checked like a canary."""
    can = replay_program(baseline_program(source, sample), backends, config_names)
    checks = behavior_checks(src, can, tolerances)
    src_decisions, _, changed = ranking_changes(src.metrics, can.metrics, tolerances)
    summary = summarize_checks(checks, len(src_decisions), len(changed))
    passed = summary["checks"]["failed"] == 0
    return {
        "name": sample.method,
        "method": METHOD_DESCRIPTIONS[sample.method],
        "occurrences_executed": int(len(sample.idx)),
        "weight_sum": float(math.fsum(sample.weights.tolist())),
        "selection_sha256": sample.selection_sha256(),
        "behavior": BEHAVIOR_UNJUDGED if obstacle else ("pass" if passed else "fail"),
        **summary,
    }


def canary_entry(verification: dict) -> dict:
    """The canary's entry, from its own verification document (verify_behavior)."""
    ranking = verification["ranking"]
    summary = summarize_checks(
        verification["checks"], ranking["decisions_checked"], len(ranking["changed"])
    )
    return {
        "name": CANARY_ENTRY,
        "method": "the canary (behavior search / compile), verified by verify-behavior",
        "occurrences_executed": int(verification["canary"]["occurrences_executed"]),
        "weight_sum": float(verification["canary"]["occurrences_logical"]),
        "claim": verification["claim"],
        "behavior": verification["statuses"]["behavior"],
        **summary,
    }


def fares_at_least_as_well(canary: dict, baseline: dict) -> bool:
    """The canary fails no more behaviour checks and changes no more ranking decisions."""
    return (
        canary["checks"]["failed"] <= baseline["checks"]["failed"]
        and canary["ranking"]["changed"] <= baseline["ranking"]["changed"]
    )


def compare_baselines(
    source: Program,
    canary: dict,
    backends,
    tolerances: Tolerances,
    *,
    source_digest: str,
    canary_digest: str,
    seed: int,
    config_names: list[str] | None = None,
) -> dict:
    """The ``tracecanary.baselines/v1`` document: the canary and every sampling baseline
    at the canary's executed size, each with its behaviour checks and ranking agreement
    against the source (see the module doc)."""
    from tracecanary.verify.behavior import verify_behavior

    names = config_names or None
    src = replay_program(source, backends, names)
    verification = verify_behavior(
        source,
        canary,
        backends,
        tolerances,
        source_digest=source_digest,
        canary_digest=canary_digest,
        config_names=names,
        source_replay=src,
    )
    mine = canary_entry(verification)
    k = mine["occurrences_executed"]
    obstacle = skew_obstacle(source.skew_known, source.skew_reason, 0, 0)
    entries = [
        judge_sample(source, sample, src, backends, tolerances, names, obstacle)
        for sample in draw_baselines(source, k, seed)
    ]
    return {
        "format": BASELINES_FORMAT,
        "source": {"sha256": source_digest, "occurrences": source.n},
        "canary": {
            "sha256": canary_digest,
            "claim": verification["claim"],
            "occurrences_executed": k,
        },
        "seed": int(seed),
        "size": k,
        "backends": {"sha256": backends.sha256, "configs": list(src.metrics)},
        "tolerances": tolerances.content,
        "entries": [mine, *entries],
        "canary_fares_best": all(fares_at_least_as_well(mine, e) for e in entries),
        **({"skew_obstacle": obstacle} if obstacle else {}),
        "model": "deterministic scheduler simulator (a model, not hardware)",
    }


def _worst_text(worst: dict | None) -> str:
    if worst is None:
        return "-"
    severity = "unbounded" if worst["severity"] is None else f"{worst['severity']:.2f}x"
    return f"{worst['config']} {worst['metric']} ({severity} of tolerance)"


def baselines_table(doc: dict) -> str:
    """A markdown table of a baselines document: one row per entry (the canary first):
    executed occurrences, behaviour, checks passed, the worst check, tail-event recall,
    ranking decisions kept; a note when the canary executes every occurrence (then no
    baseline sampled anything)."""
    lines = [
        "| sample | executed | behavior | checks passed | worst check | tail recall | ranking kept |",
        "|---|---:|---|---:|---|---:|---:|",
    ]
    for e in doc["entries"]:
        recall = e["tail_event_recall_min"]
        ranking = e["ranking"]
        lines.append(
            f"| {e['name']} | {e['occurrences_executed']:,} | {e['behavior']} "
            f"| {e['checks']['passed']}/{e['checks']['total']} | {_worst_text(e['worst_check'])} "
            f"| {'-' if recall is None else f'{recall:.2f}'} "
            f"| {ranking['decisions_checked'] - ranking['changed']}/{ranking['decisions_checked']} |"
        )
    if doc["size"] >= doc["source"]["occurrences"]:
        lines += [
            "",
            "The canary executes every source occurrence, so each baseline is the whole "
            "source: nothing was sampled.",
        ]
    return "\n".join(lines) + "\n"
