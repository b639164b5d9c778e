"""The replay paths that hold less memory give what the all-at-once paths gave.

``replay_prepared`` simulates one configuration at a time and keeps only each one's
summary and latencies; ``build_report`` encodes each configuration's samples and frees
its arrays before the next; ``verify_behavior`` frees the canary's executed program once
its replay is prepared and replays the source last; ``make_program(take_columns=True)``
uses the caller's arrays instead of copying them. Each is compared with the general
path (every result held at once, copies made)."""

from __future__ import annotations

import dataclasses
import gc
import weakref

import numpy as np
import pandas as pd
import pytest

from tracecanary.canonical import canonical_json_bytes
from tracecanary.compile.budget import parse_budget
from tracecanary.compile.canary import compile_program
from tracecanary.compile.expand import executed_program, expand_canary
from tracecanary.defaults import default_file
from tracecanary.program import make_program
from tracecanary.sim.backends import load_backends
from tracecanary.sim.metrics import summarize
from tracecanary.sim.report import build_report, run_configs
from tracecanary.synth.examples import random_program
from tracecanary.verify.behavior import (
    Replay,
    behavior_checks,
    load_tolerances,
    prepare_replay,
    replay_prepared,
    replay_program,
    verify_behavior,
)


@pytest.fixture(scope="module")
def backends():
    return load_backends(default_file("backends.yaml"))


def _all_at_once(program, backends) -> Replay:
    """The replay as it was made before: every configuration's result held at once."""
    prep, runs = run_configs(program, backends.select())
    occ = program.occurrences
    key = "logical_occ" if "logical_occ" in occ else "occ"
    ids = occ[key].to_numpy(np.int64)[prep.occ]
    weights = occ["weight"].to_numpy(np.float64)[prep.occ]
    return Replay(
        metrics={name: summarize(prep, result, config) for name, (config, result) in runs.items()},
        latencies={name: (ids, result.latency_ns, weights) for name, (_, result) in runs.items()},
    )


def _same_replay(a: Replay, b: Replay) -> None:
    assert canonical_json_bytes(a.metrics) == canonical_json_bytes(b.metrics)
    assert list(a.latencies) == list(b.latencies)
    for name in a.latencies:
        for x, y in zip(a.latencies[name], b.latencies[name], strict=True):
            assert x.dtype == y.dtype
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_replay_one_configuration_at_a_time_equals_one_holding_every_result(seed, backends):
    program = random_program(seed, 300)
    _same_replay(replay_program(program, backends), _all_at_once(program, backends))


def test_a_reduced_canary_replay_equals_one_holding_every_result(backends):
    program = random_program(5, 400)
    canary = compile_program(
        program, budget=parse_budget("gap=2us"), execution_policy={"max_executed_repeats": 1}
    )
    executed = executed_program(canary, expand_canary(canary, executed=False))
    assert executed.n < program.n  # weighted: the canary runs a part of its source
    _same_replay(replay_program(executed, backends), _all_at_once(executed, backends))


def test_prepared_replay_keeps_no_reference_to_its_program(backends):
    program = random_program(4, 200)
    reference = replay_program(program, backends)
    prepared = prepare_replay(program)
    alive = weakref.ref(program)
    del program
    gc.collect()
    assert alive() is None
    _same_replay(replay_prepared(*prepared, backends), reference)


def test_verification_is_the_checks_of_the_two_replays_made_all_at_once(backends):
    program = random_program(6, 300)
    canary = compile_program(program, budget=parse_budget("gap=1us,latency=1us"))
    tolerances = load_tolerances(None)
    replays: dict = {}
    doc = verify_behavior(
        program, canary, backends, tolerances, source_digest="s", canary_digest="c",
        replays_out=replays,
    )  # fmt: skip
    executed = executed_program(canary, expand_canary(canary, executed=False))
    src, can = _all_at_once(program, backends), _all_at_once(executed, backends)
    _same_replay(replays["source"], src)
    _same_replay(replays["canary"], can)
    # the source's own intervals come with its replay (verify.reproducibility)
    src = dataclasses.replace(src, reproducibility=replays["source"].reproducibility)
    assert canonical_json_bytes(doc["checks"]) == canonical_json_bytes(
        behavior_checks(src, can, tolerances)
    )
    assert doc["canary"]["occurrences_executed"] == executed.n
    assert doc["canary"]["occurrences_logical"] == float(executed.occurrences["weight"].sum())


def test_a_report_encoding_each_configuration_in_turn_has_the_bytes_of_the_held_results(
    backends,
):
    from tracecanary.sim import samples as sample_codec

    program = random_program(8, 250)
    report = build_report(program, backends, input_sha256="x")
    prep, runs = run_configs(program, backends.select())
    for name, (config, result) in runs.items():
        block = report["configs"][name]
        expected = summarize(prep, result, config)
        assert canonical_json_bytes({k: block[k] for k in expected}) == canonical_json_bytes(
            expected
        )
        assert block["samples"]["latency_ns"] == sample_codec.encode(result.latency_ns)
        assert block["samples"]["service_ns"] == sample_codec.encode(result.service_ns)


def test_a_program_taking_its_columns_uses_them_and_equals_one_built_from_copies():
    program = random_program(9, 60)
    occ = {c: program.occurrences[c].to_numpy() for c in program.occurrences.columns}
    members = {c: program.members[c].to_numpy().copy() for c in program.members.columns}
    kwargs = dict(world_size=program.world_size, skew_known=program.skew_known)
    copied = make_program(occ, members, **kwargs)
    taken = make_program(occ, dict(members), **kwargs, take_columns=True)
    pd.testing.assert_frame_equal(copied.occurrences, taken.occurrences)
    pd.testing.assert_frame_equal(copied.members, taken.members)
    assert np.shares_memory(taken.members["rank"].to_numpy(), members["rank"])
    assert not np.shares_memory(copied.members["rank"].to_numpy(), members["rank"])
