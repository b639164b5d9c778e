"""Search step 3 with named tails: where the model-free tail rules flag a straggler in
most steps (every such step then runs whole), the search also tries the tail windows the
tail-event check asks for, the source replay's top-latency events, with both rules off,
and keeps that canary only when it verifies and executes fewer occurrences."""

from __future__ import annotations

from tracecanary.canonical import canonical_json_bytes, sha256_bytes
from tracecanary.compile.execution import check_execution
from tracecanary.sim.backends import load_backends
from tracecanary.synth.examples import requests_program
from tracecanary.verify.behavior import load_tolerances, replay_program, verify_behavior
from tracecanary.verify.search import search, source_tail_ids

DIGEST = "0" * 64


def _straggling_program():
    # a straggler every third decode step: the timing-outlier rule flags each of them
    return requests_program(
        1, 200, world_size=2, straggler_steps=tuple((0, s) for s in range(0, 200, 3))
    )


def test_search_names_the_checked_tails_when_the_rules_flag_most_steps():
    program = _straggling_program()
    backends, tolerances = load_backends(None), load_tolerances(None)
    result = search(
        program, [0], backends, tolerances, source_digest=DIGEST, progress=lambda _: None
    )
    chosen = next(e for e in result.log if e.get("chosen"))
    by_rules = [
        e for e in result.log
        if e["stage"] == "execution" and "tail_rules" not in e["settings"] and e.get("claim") == "verified"
    ]  # fmt: skip
    assert chosen["settings"]["tail_rules"] == "named"
    assert by_rules and chosen["occurrences_executed"] < min(
        e["occurrences_executed"] for e in by_rules
    )
    assert chosen["occurrences_executed"] < program.n // 4
    policy = result.canary["execution"]["policy"]
    replay = replay_program(program, backends, reproducibility=True)
    assert policy["tail_ids"] == source_tail_ids(replay)
    assert chosen["settings"]["named_tails"] == len(policy["tail_ids"])
    assert policy["tail_latency_factor"] is None and policy["timing_outlier_factor"] is None
    assert check_execution(result.canary) == []
    # judged again from scratch, as `verify` would: the same claim
    again = verify_behavior(
        program, result.canary, backends, tolerances, source_digest=DIGEST,
        canary_digest=sha256_bytes(canonical_json_bytes(result.canary)),
    )  # fmt: skip
    assert again["claim"] == "verified"


def test_named_tails_are_every_configurations_tail_events():
    program = _straggling_program()
    replay = replay_program(program, load_backends(None), reproducibility=True)
    named = source_tail_ids(replay)
    events = {int(e["occ"]) for block in replay.metrics.values() for e in block["tail_events"]}
    assert named == sorted(events) and len(named) >= 10
