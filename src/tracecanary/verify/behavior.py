"""Behavior verification: does the canary behave like its source, not only rank alike?

``verify_behavior`` replays the normalized source and the canary's executed program
(weighted) under every configuration and reports separate statuses, never one blended
verdict:

- ``timing_mode``: ``lossless`` | ``bounded_approximate`` (as the compiler attested)
- ``commitments``: ``verified`` | ``mismatch`` (recomputed from the source)
- ``coverage``: ``full`` | ``partial``
- ``behavior``: ``pass`` | ``fail`` | ``unverified`` (unverified when the source's skew
  is unknown or less certain than the canary's skew budget: nothing is assumed;
  ``source.skew_obstacle`` says which, with the ways out)
- ``ranking``: ``preserved`` | ``changed`` (pairwise, per latency metric, tie tolerance)

``claim`` (``tracecanary.verify.claims.verification_claim``) is ``verified`` only when
commitments are verified, coverage is full, behavior passes and ranking is preserved;
otherwise ``partial`` (a prefix canary), ``behaviorally_unverified`` (behavior could not
be judged) or ``rejected``.

Each check is ``{config, metric, source, canary, tolerance, pass, reproducibility}``; a
check passes when ``|canary - source| <= max(relative * |source|, absolute)``;
``reproducibility`` is the source's own 95% interval of that statistic
(``verify.reproducibility``), whether the canary lies in it and whether it is wider
than the tolerance. ``standard`` says which standard behaviour met (the fixed
tolerances, or the source's reproducibility) and which one was chosen (default: the
fixed tolerances; the claim is ``verified`` only when the chosen one is met).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tracecanary.factorize import sorted_distinct
from tracecanary.formats.ids import VERIFICATION_FORMAT as FORMAT
from tracecanary.formats.schemas import validate
from tracecanary.limits import load_yaml
from tracecanary.memory import release_freed_memory
from tracecanary.program import Program
from tracecanary.verify.claims import (
    BEHAVIOR_UNJUDGED,
    DEFAULT_STANDARD,
    MET_WORDS,
    STANDARDS,
    behavior_passes,
    skew_budget_ns,
    skew_obstacle,
    standard_met,
    verification_claim,
)

if TYPE_CHECKING:
    from tracecanary.compile.source import SourceSerialization
    from tracecanary.sim.engine import Prepared

DIST_METRICS = ("p50", "p95", "p99", "max", "mean")
RANKING_METRICS = ("p50", "p95", "p99", "mean")


@dataclass(frozen=True)
class Tolerances:
    content: dict

    @property
    def tie_tolerance(self) -> float:
        return float(self.content["tie_tolerance"])


def load_tolerances(path: str | None) -> Tolerances:
    """Tolerances from a YAML file (validated), or the shipped defaults."""
    from tracecanary.defaults import default_file

    source = path or default_file("tolerances.yaml")
    content = load_yaml(source)  # under the resource policy (tracecanary.limits)
    validate(content, "tolerances", file=source)
    return Tolerances(content)


def _check(config: str, metric: str, source: float | None, canary: float | None, tol: dict) -> dict:
    relative = float(tol.get("relative", 0.0))
    absolute = float(tol.get("absolute_ns", tol.get("absolute", 0.0)))
    if source is None or canary is None:
        ok = source is None and canary is None
        allowed = None
    else:
        allowed = max(relative * abs(source), absolute)
        ok = abs(canary - source) <= allowed
    return {
        "config": config,
        "metric": metric,
        "source": source,
        "canary": canary,
        "tolerance": {"relative": relative, "absolute": absolute, "allowed": allowed},
        "pass": bool(ok),
    }


@dataclass(frozen=True)
class Replay:
    """One program replayed under the selected configurations: the report-style metric
    blocks and, per configuration, (logical occurrence id, exposed latency, weight) of
    every executed occurrence. Computed once per program: a search verifies many canaries
    against one source, and its replay does not change between them."""

    metrics: dict[str, dict]
    latencies: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]
    # a source's own reproducibility (verify.reproducibility): {"method": ..., "intervals":
    # {config: {check metric: [low, high] or None}}}; None for a canary's replay
    reproducibility: dict | None = None


def replay_program(program: Program, backends, names=None, *, reproducibility=False) -> Replay:
    """Prepare once, simulate every configuration once, summarize (see ``Replay``);
    ``reproducibility``: also the source's own intervals (``verify.reproducibility``)."""
    blocks = _blocks(program) if reproducibility else None
    return replay_prepared(*prepare_replay(program), backends, names, blocks=blocks)


def _blocks(program: Program) -> tuple[np.ndarray, dict]:
    from tracecanary.verify.reproducibility import source_blocks

    return source_blocks(program)


def prepare_replay(
    program: Program, skews: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[Prepared, np.ndarray, np.ndarray]:
    """What a replay of ``program`` needs of it: the simulator's prepared arrays, and
    the logical occurrence id and weight of each simulated position. Nothing of
    ``program`` is referenced by the result, so a caller that owns ``program`` can free
    it before the replay (``replay_prepared``). ``skews``: ``sim.engine.member_skews``
    of ``program``, when its members table was dropped after taking them."""
    from tracecanary.sim.engine import prepare

    prep = prepare(program, skews=skews)
    ids = "logical_occ" if "logical_occ" in program.column_names else "occ"
    logical = program.column(ids, np.int64)
    weight = program.column("weight", np.float64)
    if prep.n == len(logical) and np.array_equal(prep.occ, np.arange(prep.n)):
        return prep, logical, weight  # every occurrence in place: the columns themselves
    return prep, logical[prep.occ], weight[prep.occ]


def replay_prepared(
    prep: Prepared,
    ids: np.ndarray,
    weights: np.ndarray,
    backends,
    names=None,
    *,
    tail_events: bool = True,
    blocks: tuple[np.ndarray, dict] | None = None,
) -> Replay:
    """The ``Replay`` of prepared arrays (``prepare_replay``) under the selected
    configurations; ``tail_events=False``: its metric blocks without ``tail_events``
    (one Python dict per tail event: what a caller that reads only the other metrics
    need not hold).

    Peak memory: one configuration's simulation is held at a time; of each only its
    summary and its latency array are kept (``ids`` and ``weights`` are shared)."""
    from tracecanary.sim.metrics import summarize
    from tracecanary.sim.report import simulate_each

    metrics: dict[str, dict] = {}
    latencies: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    intervals: dict[str, dict] = {}
    for config, result in simulate_each(prep, backends.select(names)):
        metrics[config.name] = summarize(prep, result, config)
        if not tail_events:
            del metrics[config.name]["tail_events"]
        latencies[config.name] = (ids, result.latency_ns, weights)
        if blocks is not None:
            intervals[config.name] = _config_intervals(prep, result, blocks[0])
        del result  # the other per-occurrence arrays of this configuration
    return Replay(metrics=metrics, latencies=latencies, reproducibility=_repro(blocks, intervals))


def _config_intervals(prep, result, block_of: np.ndarray) -> dict:
    from tracecanary.verify.reproducibility import config_intervals

    return config_intervals(prep, result, block_of)


def _repro(blocks, intervals: dict) -> dict | None:
    if blocks is None:
        return None
    from tracecanary.verify.reproducibility import method

    return {"method": method(blocks[1]), "intervals": intervals}


def _last_latency(
    ids: np.ndarray, lat: np.ndarray, wanted: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(whether each wanted id occurs in ``ids``, the latency of its last occurrence, as a
    dict built in order would keep), by binary search instead of a per-occurrence dict."""
    if not ids.size:
        return np.zeros(wanted.size, bool), np.zeros(wanted.size, np.int64)
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    pos = np.searchsorted(sorted_ids, wanted, side="right") - 1
    safe = np.maximum(pos, 0)
    return (pos >= 0) & (sorted_ids[safe] == wanted), lat[order][safe]


def tail_recall(
    source_lat: tuple[np.ndarray, ...],
    canary_lat: tuple[np.ndarray, ...],
    tail_ids: list[int],
) -> float:
    """Share of the source's tail places the canary fills: a tail event is kept when the
    canary executes it at or above the canary's tail threshold. The canary's tail is
    counted in the logical occurrences it stands for, like the source's (top max(10,
    ceil(1%)) of the occurrences): the threshold is the latency at which the canary's
    executed occurrences, taken from the slowest down, first stand for max(10, ceil(1% of
    the total weight)) occurrences. With unit weights that is the k-th largest latency.

    Tie-aware on both sides. When more source occurrences share the tail's lowest latency
    than the tail has places for at that latency, the tail list names some of them only by
    the occurrence-index tie-break; those places are filled by any canary-kept occurrences
    of that source latency (each fills at most one), so the figure does not depend on which
    tied occurrence the list happened to name. Without such a tie it is the share of named
    events kept; strictly slower events are always matched by identity."""
    if not tail_ids:
        return 1.0
    ids, lat = canary_lat[0], canary_lat[1]
    weights = canary_lat[2] if len(canary_lat) > 2 else np.ones(lat.size)
    threshold = 0
    if lat.size:
        total = math.fsum(weights.tolist())
        k = min(max(10, math.ceil(round(0.01 * total, 9))), total)
        by_latency = np.argsort(-lat, kind="stable")
        covered = np.cumsum(weights[by_latency])
        at = min(int(np.searchsorted(covered, k - 1e-9 * total)), lat.size - 1)
        threshold = lat[by_latency][at]
    wanted = np.asarray(tail_ids, dtype=np.int64)
    found, latency = _last_latency(ids, lat, wanted)
    kept = found & (latency >= threshold)
    source_ids, source_latency = source_lat[0], source_lat[1]
    in_source, tail_latency = _last_latency(source_ids, source_latency, wanted)
    if in_source.all():
        boundary = tail_latency == tail_latency.min()
        tied = sorted_distinct(source_ids[source_latency == tail_latency.min()])
        if tied.size > np.count_nonzero(boundary):  # the list named some by index only
            found_tied, tied_latency = _last_latency(ids, lat, tied)
            filled = min(
                int(np.count_nonzero(boundary)),
                int(np.count_nonzero(found_tied & (tied_latency >= threshold))),
            )
            return (int(np.count_nonzero(kept & ~boundary)) + filled) / len(tail_ids)
    return int(np.count_nonzero(kept)) / len(tail_ids)


def _tail_ids(metrics: dict) -> list[int]:
    """The logical occurrence ids of a configuration's tail events (its metrics block)."""
    return [int(e["occ"]) for e in metrics["tail_events"]]


def replay_source_recalls(
    program: Program, can: Replay, backends, names=None
) -> tuple[Replay, dict[str, float]]:
    """The source's ``Replay`` without latencies (metrics only, without ``tail_events``:
    their ids are read here), and per configuration the tail-event recall of ``can``
    against it (``tail_recall``, the figure ``behavior_checks`` computes from both
    replays' latencies).

    Peak memory: each configuration's source latencies are used for its recall and
    dropped with the rest of its simulation, and ``can``'s latencies of a configuration
    are dropped from ``can`` once its recall is computed (``can`` is the caller's own,
    and nothing else reads them), so at most one configuration's latencies of each
    program are held beside the source's prepared arrays."""
    from tracecanary.sim.metrics import summarize
    from tracecanary.sim.report import simulate_each

    configs = list(backends.select(names))
    last_use = {config.name: i for i, config in enumerate(configs)}
    blocks = _blocks(program)
    prep, ids, weights = prepare_replay(program)
    metrics: dict[str, dict] = {}
    recalls: dict[str, float] = {}
    intervals: dict[str, dict] = {}
    for i, (config, result) in enumerate(simulate_each(prep, configs)):
        block = summarize(prep, result, config)
        metrics[config.name] = block
        recalls[config.name] = tail_recall(
            (ids, result.latency_ns, weights), can.latencies[config.name], _tail_ids(block)
        )
        intervals[config.name] = _config_intervals(prep, result, blocks[0])
        del block["tail_events"], result
        if last_use[config.name] == i:
            del can.latencies[config.name]
    return Replay(metrics=metrics, latencies={}, reproducibility=_repro(blocks, intervals)), recalls


def behavior_checks(
    src: Replay,
    can: Replay,
    tolerances: Tolerances,
    recalls: dict[str, float] | None = None,
    second: Replay | None = None,
) -> list[dict]:
    """Every behavior check of ``can`` against ``src`` (see the module doc), per
    configuration of ``src``: latency and queue-wait distributions, hidden share,
    per-phase and per-op breakdowns, tail-event recall. The canary's replay may be any
    weighted program's (a canary's executed program, a sampling baseline).
    ``recalls``: the tail-event recall per configuration when already computed
    (``replay_source_recalls``; then neither replay's latencies are read). ``second``: the
    replay of a second capture of the same program, whose statistics widen each check's
    source interval (``verify.reproducibility.annotate``)."""
    src_metrics, src_lat = src.metrics, src.latencies
    can_metrics, can_lat = can.metrics, can.latencies
    tol = tolerances.content
    checks: list[dict] = []
    for config in src_metrics:
        s, c = src_metrics[config], can_metrics[config]
        for family in ("latency", "queue_wait"):
            for m in DIST_METRICS:
                checks.append(
                    _check(
                        config,
                        f"{family}.{m}",
                        s[family][f"{m}_ns"],
                        c[family][f"{m}_ns"],
                        tol[family][m],
                    )
                )
        checks.append(
            _check(
                config,
                "hidden.share",
                s["hidden"]["share"],
                c["hidden"]["share"],
                tol["hidden_share"],
            )
        )
        for kind in ("by_phase", "by_op"):
            for key, block in s[kind].items():
                other = c[kind].get(key)
                for m in ("count", "mean", "p99"):
                    field = "count" if m == "count" else f"{m}_ns"
                    checks.append(
                        _check(
                            config,
                            f"{kind}.{key or '(none)'}.{m}",
                            block[field],
                            None if other is None else other[field],
                            tol["breakdown"][m],
                        )
                    )
            for key in c[kind]:
                if key not in s[kind]:
                    checks.append(
                        _check(
                            config,
                            f"{kind}.{key or '(none)'}.count",
                            None,
                            c[kind][key]["count"],
                            tol["breakdown"]["count"],
                        )
                    )
        if recalls is not None:
            recall = recalls[config]
        else:
            recall = tail_recall(src_lat[config], can_lat[config], _tail_ids(s))
        checks.append(
            {
                "config": config,
                "metric": "tail_event_recall",
                "source": 1.0,
                "canary": recall,
                "tolerance": {"minimum": tol["tail_recall_min"]},
                "pass": recall >= tol["tail_recall_min"],
            }
        )
    if src.reproducibility is not None:
        from tracecanary.verify.reproducibility import annotate

        intervals = src.reproducibility["intervals"]
        seconds = {}
        if second is not None:  # the same checks, the second capture in the canary's place
            ones = dict.fromkeys(src_metrics, 1.0)
            for c in behavior_checks(src, second, tolerances, ones):
                seconds[(c["config"], c["metric"])] = c["canary"]
        for check in checks:
            key = (check["config"], check["metric"])
            annotate(check, intervals.get(key[0], {}).get(key[1]), seconds.get(key))
    return checks


def ranking_changes(
    src_metrics: dict, can_metrics: dict, tolerances: Tolerances
) -> tuple[dict, dict, list]:
    """(source decisions, canary decisions, the decisions that differ): pairwise per
    ranking metric, with the tolerances' tie tolerance."""
    from tracecanary.sim.ranking import decision_mismatches, decisions

    src_decisions = decisions(src_metrics, tolerances.tie_tolerance, RANKING_METRICS)
    can_decisions = decisions(can_metrics, tolerances.tie_tolerance, RANKING_METRICS)
    return src_decisions, can_decisions, decision_mismatches(src_decisions, can_decisions)


def verify_behavior(
    source: Program,
    canary: dict,
    backends,
    tolerances: Tolerances,
    *,
    source_digest: str,
    canary_digest: str,
    config_names: list[str] | None = None,
    source_replay: Replay | None = None,
    serialization: SourceSerialization | None = None,
    replays_out: dict | None = None,
    standard: str = DEFAULT_STANDARD,
    second_capture: tuple[Program, str] | None = None,
    second_replay: Replay | None = None,
) -> dict:
    """The verification document (see module doc).

    ``second_capture``: (program, digest) of a second capture of the same program: each
    check's source interval is widened to hold its statistic (``second_replay``: its
    replay, when the caller already has it).

    ``standard``: what behaviour is held to (``verify.claims.STANDARDS``): the fixed
    tolerances (default), or, with ``reproducibility``, a check failing them passes when
    the canary's value lies inside the source's own interval. Both figures are reported
    either way (``checks[].reproducibility``, ``standard``).

    ``source_replay``: the source's ``replay_program`` under the same backends and
    configuration names, when the caller already has it (the behavior search); it is
    recomputed otherwise. It must come from this ``source``: the caller vouches.
    ``serialization``: ``serialize_source(source)`` when the caller already has it
    (passed to ``verify_commitments``, which uses it only if made from this ``source``).
    ``replays_out``: when given, receives the replays the checks compared (``source`` and
    ``canary``, ``Replay`` each), so a caller can say what a failed check stems from."""
    from tracecanary.compile.expand import (
        check_member_ranks,
        decode_canary,
        executed_program,
        logical_occurrences,
    )
    from tracecanary.sim.engine import check_occurrences, grouped_skews, selected_skews
    from tracecanary.verify.commitments import verify_commitments

    names = config_names or None
    release_freed_memory()  # what earlier stages freed is not counted in this one's peak
    # peak memory: the canary's logical expansion is never built whole. Its decoded
    # arrays serve the commitments (text columns and ranks made a chunk at a time);
    # the replay reads of its members only two skew figures per occurrence, taken from
    # the decoded skews (then dropped); its executed program has no member table and is
    # freed once its replay is prepared; the source is replayed last, when only the
    # canary's latencies are held (a source replay the caller holds is used as given).
    # Refusals come in expand_canary's order, then the commitments', then the replay's.
    decoded = decode_canary(canary, ranks=False)
    check_member_ranks(decoded)
    mismatches = verify_commitments(source, canary, serialization=serialization, decoded=decoded)
    release_freed_memory()  # the commitments' chunks and lines
    skews = None
    largest_skew = None
    if bool(canary["source"]["skew_known"]):
        skews = grouped_skews(decoded.member_offsets, decoded.values.pop("skew"))
        largest_skew = np.maximum(skews.max_skew, 0)  # what the junctions read
    logical = logical_occurrences(canary, decoded)
    del decoded
    executed = executed_program(canary, logical, largest_skew)
    del logical, largest_skew
    # what the document needs of the executed program
    executed_skew = (executed.skew_known, executed.skew_reason)
    executed_n = executed.n
    logical_total = float(np.sum(executed.column("weight")))
    if executed.skew_known:  # member_skews(executed), in its order of refusals
        check_occurrences(executed)
        skews = selected_skews(skews, executed.column("logical_occ", np.int64))
    prepared = prepare_replay(executed, skews)
    del skews
    del executed
    release_freed_memory()  # the executed program's text columns and the decoded arrays
    # the canary's tail events are read by no check (only the source's name the tail)
    can = replay_prepared(*prepared, backends, names, tail_events=replays_out is not None)
    del prepared
    release_freed_memory()  # the canary's prepared arrays
    recalls = None
    if source_replay is not None:
        src = source_replay
    elif replays_out is not None:  # the caller reads both replays' latencies
        src = replay_program(source, backends, names, reproducibility=True)
    else:  # each configuration's latencies dropped once its recall is taken
        src, recalls = replay_source_recalls(source, can, backends, names)
    if replays_out is not None:
        replays_out.update(source=src, canary=can)
    if standard not in STANDARDS:
        raise ValueError(f"standard {standard!r} is not one of {', '.join(STANDARDS)}")
    src_metrics = src.metrics
    tol = tolerances.content
    if second_capture is not None and second_replay is None:
        second_replay = replay_program(second_capture[0], backends, names)
    checks = behavior_checks(src, can, tolerances, recalls, second_replay)
    met = standard_met(checks)
    src_decisions, can_decisions, changed = ranking_changes(src.metrics, can.metrics, tolerances)

    obstacle = skew_obstacle(
        source.skew_known and executed_skew[0],
        source.skew_reason if not source.skew_known else executed_skew[1],
        source.skew_uncertainty_ns,
        skew_budget_ns(canary["budget"]),
    )
    behavior = (
        BEHAVIOR_UNJUDGED
        if obstacle is not None
        else ("pass" if behavior_passes(met, standard) else "fail")
    )
    statuses = {
        "timing_mode": canary["timing_mode"],
        "commitments": "verified" if not mismatches else "mismatch",
        "coverage": canary["coverage"],
        "behavior": behavior,
        "ranking": "preserved" if not changed else "changed",
    }
    claim = verification_claim(statuses)
    failed = [c for c in checks if not c["pass"]]
    return {
        "format": FORMAT,
        "claim": claim,
        "statuses": statuses,
        "source": {
            "sha256": source_digest,
            "occurrences": source.n,
            "skew_known": source.skew_known,
            "skew_reason": source.skew_reason,
            **({"skew_uncertainty_ns": source.skew_uncertainty_ns} if source.skew_known else {}),
            **({"skew_obstacle": obstacle} if obstacle is not None else {}),
        },
        "canary": {
            "sha256": canary_digest,
            "occurrences_logical": logical_total,
            "occurrences_executed": executed_n,
        },
        "backends": {"sha256": backends.sha256, "configs": list(src_metrics)},
        "tolerances": tol,
        "commitment_mismatches": mismatches[:50],
        "ranking": {
            "metrics": list(RANKING_METRICS),
            "decisions_checked": len(src_decisions),
            "changed": [
                {
                    "metric": m,
                    "a": a,
                    "b": b,
                    "source": src_decisions.get((m, a, b)),
                    "canary": can_decisions.get((m, a, b)),
                }
                for m, a, b in changed
            ],
        },
        "checks": checks,
        "summary": {
            "checks": len(checks),
            "failed": len(failed),
            "failed_metrics": sorted({f"{c['config']}:{c['metric']}" for c in failed})[:50],
        },
        "model": "deterministic scheduler simulator (a model, not hardware)",
        "standard": _standard_block(
            standard, met if obstacle is None else None, checks, src, second_capture
        ),
    }


def _standard_block(
    standard: str, met: str | None, checks: list[dict], src: Replay, second_capture=None
) -> dict:
    """The standard chosen, the one behaviour met (with its words), the source's
    reproducibility method and the checks whose source interval is wider than the fixed
    tolerance (the source is noisier than that tolerance demands)."""
    wider = sorted(
        f"{c['config']}:{c['metric']}"
        for c in checks
        if (c.get("reproducibility") or {}).get("wider_than_tolerance")
    )
    return {
        "chosen": standard,
        "met": met,
        "words": MET_WORDS.get(met),
        "reproducibility": None
        if src.reproducibility is None
        else {
            **src.reproducibility["method"],
            "second_capture": None if second_capture is None else {"sha256": second_capture[1]},
        },
        "wider_than_tolerance": wider,
    }


def describe_failures(doc: dict, limit: int = 10) -> list[str]:
    """Short lines naming what failed, for a refusal message or a log."""
    lines = [f"claim {doc['claim']}: " + ", ".join(f"{k}={v}" for k, v in doc["statuses"].items())]
    if doc["source"].get("skew_obstacle"):
        lines.append(f"  behavior not judged: {doc['source']['skew_obstacle']}")
    standard = doc.get("standard") or {}
    if standard.get("met"):
        lines.append(f"  standard {standard['chosen']}: {standard['words']}")
    if standard.get("wider_than_tolerance"):
        lines.append(
            "  source interval wider than the fixed tolerance: "
            + ", ".join(standard["wider_than_tolerance"][:limit])
        )
    for c in [c for c in doc["checks"] if not c["pass"]][:limit]:
        repro = c.get("reproducibility")
        interval = "" if not repro else f", source interval {repro['interval']}"
        lines.append(
            f"  {c['config']} {c['metric']}: source {c['source']}, canary {c['canary']}, tolerance {c['tolerance']}{interval}"
        )
    for d in doc["ranking"]["changed"][:limit]:
        lines.append(
            f"  ranking {d['metric']} {d['a']} vs {d['b']}: source {d['source']}, canary {d['canary']}"
        )
    return lines
