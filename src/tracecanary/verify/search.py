"""Behavior search: the smallest canary whose verification still fully passes.

1. Compile at every timing budget of the declared range (0 = lossless; otherwise the
   same bound on skew, overlap, gap and latency), verify each candidate fully, reject
   failures, keep the smallest passing one by serialized bytes.
2. Greedy per op-signature-group refinement: loosen one group's budget at a time
   (most frequent groups first), keeping a change only while commitments, behavior and
   ranking verification all still pass and the canary gets smaller.
3. Execution reduction: execute fewer repetitions of steady-state motifs at any depth
   of the structure (``reduce_execution`` with ``max_executed_repeats`` k from
   ``executed_repeats_ladder``: 1, 2, 4, ... below the largest repetition count, its
   default tail, context and edge rules: weights recorded, tail windows always kept
   whole), smallest k first, keeping the first reduction whose every verification still
   passes on the weighted replay. A longer capture needs a larger k to keep a sample's
   mean within tolerance, so the ladder grows with the structure instead of stopping at a
   fixed k. At each k the k evenly spaced steady repetitions (``steady_selection``
   ``time``) are tried first; when they are rejected, the skew-quantile ones
   (``skew_quantile``: the steady repetitions at evenly spaced quantiles of their
   arrival skew, which dominates exposed latency on real captures) at the same k, unless
   they are the same repetitions. Both execute the same number of occurrences at a k.
   It stops at the first k accepted, or that executes no fewer than the best so far (a
   larger k executes at least as many); after an accepted k the ks between it and the
   last rejected one are bisected (``BISECT_FRACTION``), each verified like any other. The verifier judges every candidate the same way: no
   check or tolerance depends on the selection.
   The ladder runs twice: first with the model-free tail rules (a latency, gap, overlap
   or skew >= 4x its signature's median makes a tail window), then with **named tails**
   (``tail_rules: "named"``): both rules off, and the tail windows are exactly the
   occurrences the tail-event check asks a canary to execute, the source replay's top
   max(10, 1%) exposed latencies under each configuration verified
   (``source_tail_ids``, recorded in the canary's policy as ``tail_ids``), with k
   steady repetitions per reduced instance, and then with each reduced instance
   executing a share of its steady repetitions (``steady_fraction`` from
   ``fraction_ladder``), so motifs of different lengths (steps that differ split the
   structure into several) are sampled in proportion (``EXECUTION_LADDERS``). On a noisy
   capture the rules flag a straggler in most steps, so those steps run whole; the
   named tails keep only the tails the claim is judged on. A named-tails canary is
   accepted only when it executes fewer occurrences than the best so far, verified
   like any other.

Every candidate is logged with its settings (an execution candidate's are its policy:
``max_executed_repeats``, and ``steady_selection`` when not ``time``), bytes, records,
executed occurrences, statuses and why it was accepted or rejected (a skew-quantile
selection that picks the same repetitions as the rejected time one is logged as not
evaluated): a rejected one with its failing checks
(``failed_checks``) and what blocks it (``blocking``, ``tracecanary.verify.blocking``:
each failed check worst first with its configuration, values, allowance and the source
op signature it is attributed to; its ``reason`` names the first), a bounded one not
smaller than the lossless one because its intervals shrank no timing field saying so,
an execution step that executes no fewer with its tail
occurrences and what keeps the signature order from repeating
(``tracecanary.compile.repetition``: the stream in the signature, or concurrent groups
interleaving differently from step to step). The search is greedy: no Pareto
optimality is claimed. The degenerate one-event answer is unreachable because every
accepted candidate passed behavioral verification against the whole source.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tracecanary.canonical import canonical_json_bytes, sha256_bytes
from tracecanary.compile.budget import FIELDS, Budget, parse_duration_ns
from tracecanary.compile.canary import canary_bytes
from tracecanary.compile.canary import compile_program as compile_with
from tracecanary.compile.execution import reduce_execution
from tracecanary.compile.repetition import repetition_profile
from tracecanary.compile.selection import DEFAULT_STEADY_SELECTION, STEADY_SELECTIONS
from tracecanary.compile.source import serialize_source
from tracecanary.errors import ClaimFailed, InputError
from tracecanary.formats.ids import SEARCH_LOG_FORMAT
from tracecanary.program import Program
from tracecanary.verify.behavior import replay_program, verify_behavior
from tracecanary.verify.blocking import BlockingExplainer, blocking_text
from tracecanary.verify.claims import DEFAULT_STANDARD

EXECUTED_REPEAT_FACTOR = 2
"""Execution reduction tries k = 1, 2, 4, ... (see ``executed_repeats_ladder``)."""
K_KEY, FRACTION_KEY = "max_executed_repeats", "steady_fraction"
EXECUTION_LADDERS = ((None, K_KEY), ("named", K_KEY), ("named", FRACTION_KEY))
"""Step 3's ladders, in order: (tail windows: the model-free rules, or the occurrences
the tail-event check names; what each reduced instance executes: k steady repetitions,
or a share of them)."""
BISECT_FRACTION = 8
"""After the ladder's first accepted k, the k between it and the last rejected one are
bisected while the gap is wider than k / BISECT_FRACTION."""
REFINE_FACTOR = 4
MAX_REFINED_GROUPS = 8


@dataclass
class SearchResult:
    canary: dict | None
    verification: dict | None
    log: list[dict] = field(default_factory=list)
    skew_obstacle: str | None = None  # why some candidates' behavior could not be judged


def parse_budgets(spec: str) -> list[int]:
    """``0,1,2us,500ns`` -> ns; a bare number is microseconds."""
    out = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        text = f"{part}us" if part.replace(".", "", 1).isdigit() else part
        out.append(parse_duration_ns(text, field_name="budgets"))
    if not out:
        raise InputError("no budgets given", field="budgets")
    return sorted(set(out))


def _budget(ns: int, overrides: dict | None = None):
    return Budget({f: ns for f in FIELDS}, overrides or {})


def search(
    program: Program,
    budgets_ns: list[int],
    backends,
    tolerances,
    *,
    source_digest: str,
    config_names: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
    steady_selections: tuple[str, ...] = STEADY_SELECTIONS,
    standard: str = DEFAULT_STANDARD,
    second_capture: tuple[Program, str] | None = None,
) -> SearchResult:
    """The search of the module doc. ``steady_selections``: the execution policy's
    ``steady_selection`` values step 3 tries at each k, in order (default: every one,
    the default ``time`` first; ``("time",)`` is the search without the skew-quantile
    rung). ``standard``: what each candidate's behaviour is held to
    (``verify.claims.STANDARDS``; default the fixed tolerances). ``second_capture``:
    (program, digest) of a second capture of the same program, whose statistics widen
    each check's source interval (``verify_behavior``)."""
    if (
        not steady_selections
        or steady_selections[0] != DEFAULT_STEADY_SELECTION
        or set(steady_selections) - set(STEADY_SELECTIONS)
    ):
        raise ValueError(
            f"steady_selections {steady_selections!r} must start with "
            f"{DEFAULT_STEADY_SELECTION!r} and hold only {', '.join(STEADY_SELECTIONS)}"
        )
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    log: list[dict] = []
    obstacles: list[str | None] = []
    # computed once, not per candidate: the source's serialization (what every
    # commitment hashes) and its replay under every configuration
    serialization = serialize_source(program)
    source_replay = replay_program(program, backends, config_names or None, reproducibility=True)
    second_replay = (
        None
        if second_capture is None
        else replay_program(second_capture[0], backends, config_names or None)
    )
    explainer = BlockingExplainer(program)
    named = source_tail_ids(source_replay)  # for step 3, before anything reads the replay

    def compile_program(source: Program, **kwargs) -> dict:
        return compile_with(source, serialization=serialization, **kwargs)

    def evaluate(
        stage: str, settings: dict, make: Callable[[], dict]
    ) -> tuple[dict | None, dict | None, dict]:
        entry = {"stage": stage, "settings": settings}
        try:
            canary = make()
        except ClaimFailed as err:
            entry.update(accepted=False, reason=f"compile failed closed: {err.one_line()}")
            log.append(entry)
            say(f"[search] {stage} {settings}: compile refused ({err.message[:80]})")
            return None, None, entry
        data = canary_bytes(canary)
        replays: dict = {}
        verification = verify_behavior(
            program,
            canary,
            backends,
            tolerances,
            source_digest=source_digest,
            canary_digest=sha256_bytes(data),
            config_names=config_names,
            source_replay=source_replay,
            serialization=serialization,
            replays_out=replays,
            standard=standard,
            second_capture=second_capture,
            second_replay=second_replay,
        )
        stats = canary["stats"]
        entry.update(
            bytes=len(data),
            records=stats["records_canary"],
            occurrences_executed=stats["occurrences_executed"],
            execution_reduction=stats["execution_reduction"],
            statuses=verification["statuses"],
            claim=verification["claim"],
            failed_checks=verification["summary"]["failed_metrics"][:10],
            standard_met=verification["standard"]["met"],
        )
        if verification["claim"] != "verified":
            entry["blocking"] = explainer.explain(verification, replays)
        say(
            f"[search] {stage} {settings}: {len(data):,} B, {stats['records_canary']:,} records, "
            f"executes {stats['occurrences_executed']:,}, claim {verification['claim']}"
        )
        log.append(entry)
        obstacles.append(verification["source"].get("skew_obstacle"))
        return canary, verification, entry

    best: tuple[dict, dict, dict] | None = None
    chosen_budget = None
    for ns in budgets_ns:
        make = (
            (lambda: compile_program(program))
            if ns == 0
            else (lambda ns=ns: compile_program(program, budget=_budget(ns)))
        )
        canary, verification, entry = evaluate(
            "budget", {"budget_ns": ns, "mode": "lossless" if ns == 0 else "bounded"}, make
        )
        if canary is None:
            continue
        if verification["claim"] != "verified":
            entry.update(accepted=False, reason=_rejected(verification, entry))
            continue
        if best is None or entry["bytes"] < best[2]["bytes"]:
            if best is not None:
                best[2].update(accepted=False, reason="superseded by a smaller verified canary")
            entry.update(accepted=True, reason="smallest verified so far")
            best, chosen_budget = (canary, verification, entry), ns
        else:
            entry.update(accepted=False, reason=_not_smaller(canary, lossless=chosen_budget == 0))
    if best is None:
        return SearchResult(None, None, log, next((o for o in obstacles if o), None))

    # 2. per signature-group refinement (bounded mode only)
    overrides: dict[int, dict[str, int]] = {}
    if chosen_budget:
        sig_ids, _ = program.signature_rows()
        counts = np.bincount(sig_ids)
        for sig in np.argsort(-counts, kind="stable")[:MAX_REFINED_GROUPS]:
            sig = int(sig)
            trial = {
                **overrides,
                sig: {
                    f: chosen_budget * REFINE_FACTOR for f in ("gap", "overlap", "latency", "skew")
                },
            }
            canary, verification, entry = evaluate(
                "refine",
                {
                    "budget_ns": chosen_budget,
                    "signature": sig,
                    "signature_budget_ns": chosen_budget * REFINE_FACTOR,
                },
                lambda trial=trial: compile_program(program, budget=_budget(chosen_budget, trial)),
            )
            if canary is None:
                continue
            if verification["claim"] == "verified" and entry["bytes"] < best[2]["bytes"]:
                best[2].update(accepted=False, reason="superseded by a refinement")
                entry.update(accepted=True, reason="verified and smaller")
                best, overrides = (canary, verification, entry), trial
            else:
                entry.update(
                    accepted=False,
                    reason="not smaller"
                    if verification["claim"] == "verified"
                    else _rejected(verification, entry),
                )

    # 3. execution reduction: the model-free tail rules, then the tails the check names
    base = best[0]
    profile = []  # computed once, when a step first executes no fewer

    def try_k(key: str, k: float, family: list[int] | None) -> str:
        """Every steady selection at ``key`` (``max_executed_repeats`` or
        ``steady_fraction``) k: "accepted" (a verified reduction executing fewer became
        the best), "no_fewer" (verified, but executes no fewer: a larger k will not
        either) or "rejected"."""
        nonlocal best
        time_records = None  # the time selection's structure at this k
        for selection in steady_selections:
            settings = execution_settings({key: k}, selection, family)
            policy = execution_policy(settings, family)
            if selection == DEFAULT_STEADY_SELECTION:
                make = lambda policy=policy: reduce_execution(base, policy)  # noqa: E731
            else:
                reduced = reduce_execution(base, policy)
                if canonical_json_bytes(reduced["structure"]) == time_records:
                    log.append(
                        {
                            "stage": "execution",
                            "settings": settings,
                            "accepted": False,
                            "reason": "not evaluated: the same repetitions as the rejected "
                            f"{DEFAULT_STEADY_SELECTION} selection at this k",
                        }
                    )
                    continue
                make = lambda reduced=reduced: reduced  # noqa: E731
            canary, verification, entry = evaluate("execution", settings, make)
            if canary is None:
                continue
            if (
                verification["claim"] == "verified"
                and entry["occurrences_executed"] < best[2]["occurrences_executed"]
            ):
                best[2].update(accepted=False, reason="superseded by a reduced execution")
                entry.update(
                    accepted=True,
                    reason="verified on the weighted replay; executes fewer occurrences",
                )
                best = (canary, verification, entry)
                return "accepted"
            if verification["claim"] != "verified":
                entry.update(accepted=False, reason=_rejected(verification, entry))
                if selection == DEFAULT_STEADY_SELECTION:
                    time_records = canonical_json_bytes(canary["structure"])
                continue
            if not profile:
                profile.append(repetition_profile(program).obstacle())
            entry.update(
                accepted=False,
                reason=f"executes no fewer: {canary['execution']['tail_occurrences']} tail "
                f"occurrences run whole; {profile[0]}",
            )
            # executed occurrences do not decrease as k grows, and do not depend on which
            # steady repetitions run
            return "no_fewer"
        return "rejected"

    for tails, key in EXECUTION_LADDERS:
        family = None if tails is None else named
        ladder = executed_repeats_ladder(base) if key == K_KEY else fraction_ladder(base)
        rejected_k = 0  # the largest k rejected below the first one accepted
        for k in ladder:
            verdict = try_k(key, k, family)
            if verdict == "rejected":
                rejected_k = k
                continue
            if verdict == "accepted":
                # between the last rejected k and this one: halve the gap while it is
                # wider than an eighth of k, keeping every verified smaller k
                low, high = rejected_k, k
                while rejected_k and high - low > max(ladder[0], high / BISECT_FRACTION):
                    middle = (low + high) // 2 if key == K_KEY else (low + high) / 2
                    if try_k(key, middle, family) == "accepted":
                        high = middle
                    else:
                        low = middle
            break
    canary, verification, entry = best
    entry["chosen"] = True
    return SearchResult(canary, verification, log)


def execution_settings(amount: dict, selection: str, named: list[int] | None = None) -> dict:
    """An execution candidate's settings as logged: its ``amount``
    (``{"max_executed_repeats": k}`` or ``{"steady_fraction": f}``), and
    ``steady_selection`` when it is not the default (as in the canary's recorded policy:
    absent means ``time``); with ``named`` tail occurrences, ``tail_rules: "named"`` and
    how many (``named_tails``) instead of the list the policy holds."""
    settings: dict = dict(amount)
    if selection != DEFAULT_STEADY_SELECTION:
        settings["steady_selection"] = selection
    if named is not None:
        settings.update(tail_rules="named", named_tails=len(named))
    return dict(sorted(settings.items()))  # as the log's canonical JSON orders them


def execution_policy(settings: dict, named: list[int] | None = None) -> dict:
    """The execution policy of a candidate with these ``settings``: the model-free tail
    rules at their defaults, or (``named``) both rules off and the named occurrences as
    the tail occurrences (``compile.execution``, ``tail_ids``)."""
    policy = {k: v for k, v in settings.items() if k not in ("tail_rules", "named_tails")}
    if named is not None:
        policy.update(tail_latency_factor=None, timing_outlier_factor=None, tail_ids=named)
    return policy


def fraction_ladder(canary: dict) -> list[float]:
    """``steady_fraction`` values for execution reduction with named tails: k / P for
    each k of ``executed_repeats_ladder``, P the smallest power of two at or above the
    largest ``repeat``: the same steps, as shares (exact binary fractions)."""
    ladder = executed_repeats_ladder(canary)
    top = 1
    while top < ladder[-1] * EXECUTED_REPEAT_FACTOR:
        top *= 2
    return [k / top for k in ladder]


def source_tail_ids(source_replay) -> list[int]:
    """The logical occurrence ids the tail-event check asks a canary to execute: the
    source replay's tail events (top max(10, 1%) by exposed latency) under every
    configuration replayed, sorted and distinct."""
    return sorted(
        {int(e["occ"]) for block in source_replay.metrics.values() for e in block["tail_events"]}
    )


def executed_repeats_ladder(canary: dict) -> list[int]:
    """k values for execution reduction: 1, then x ``EXECUTED_REPEAT_FACTOR`` while below
    the largest ``repeat`` of any record of ``canary``'s structure (at any depth): a k at
    or above it reduces nothing."""
    largest = 1
    stack = list(canary["structure"]["records"])
    while stack:
        rec = stack.pop()
        largest = max(largest, int(rec["repeat"]))
        stack.extend(rec.get("body", ()))
    ladder = [1]
    while ladder[-1] * EXECUTED_REPEAT_FACTOR < largest:
        ladder.append(ladder[-1] * EXECUTED_REPEAT_FACTOR)
    return ladder


def _rejected(verification: dict, entry: dict) -> str:
    """A rejected candidate's reason: its claim and the check that blocks it most, with
    the configuration and source signature (``entry["blocking"]``, worst first)."""
    return f"verification {verification['claim']}: blocked by " + blocking_text(
        entry.get("blocking", [])
    )


def _not_smaller(canary: dict, *, lossless: bool) -> str:
    """Why a verified bounded candidate did not beat the lossless one (``lossless``:
    the best so far is lossless): when its intervals shrank no timing field at all
    (jittery timing: every stream kept its exact encoding), the reason says so."""
    streams = [stream for stream in canary["timing"].values() if stream is not None]
    if lossless and streams and all(stream["encoding"] == "exact" for stream in streams):
        return (
            "verified but not smaller than lossless: every timing field kept exact "
            "(intervals within the budget were not smaller)"
        )
    return "verified but not smaller"


def search_log_document(result: SearchResult, *, source_digest: str, budgets_ns: list[int]) -> dict:
    chosen = next((e for e in result.log if e.get("chosen")), None)
    return {
        "format": SEARCH_LOG_FORMAT,
        "source_sha256": source_digest,
        "budgets_ns": budgets_ns,
        "candidates": result.log,
        "chosen": chosen,
        "note": "greedy search: no per-window Pareto optimality is claimed",
        "canary_sha256": sha256_bytes(canonical_json_bytes(result.canary))
        if result.canary
        else None,
    }
