"""verify_behavior replays the source one configuration at a time, taking each tail
recall as it goes (``replay_source_recalls``): the document is the one computed from both
replays held whole."""

from __future__ import annotations

import pytest

from tracecanary.compile.budget import parse_budget
from tracecanary.compile.canary import compile_program
from tracecanary.sim.backends import load_backends
from tracecanary.synth.examples import decode_like_program
from tracecanary.verify.behavior import load_tolerances, replay_program, verify_behavior


@pytest.mark.parametrize("policy", [None, {"max_executed_repeats": 1}])
def test_streamed_source_replay_gives_the_document_of_both_replays_held(policy):
    source = decode_like_program(40)
    canary = compile_program(source, budget=parse_budget("gap=2us"), execution_policy=policy)
    backends, tolerances = load_backends(None), load_tolerances(None)
    kwargs = {"source_digest": "s", "canary_digest": "c"}
    streamed = verify_behavior(source, canary, backends, tolerances, **kwargs)
    held: dict = {}
    whole = verify_behavior(source, canary, backends, tolerances, replays_out=held, **kwargs)
    given = verify_behavior(
        source,
        canary,
        backends,
        tolerances,
        source_replay=replay_program(source, backends, reproducibility=True),
        **kwargs,
    )
    assert streamed == whole == given
    assert set(held["source"].latencies) == set(streamed["backends"]["configs"])
    # the recalls compared are not all trivial: some tail events are missed
    recalls = [c["canary"] for c in streamed["checks"] if c["metric"] == "tail_event_recall"]
    assert len(recalls) == len(streamed["backends"]["configs"]) and min(recalls) < 1.0
