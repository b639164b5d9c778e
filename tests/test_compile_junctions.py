"""Junctions of a reduced execution (tracecanary.compile.junctions): the first executed
occurrence after a skipped stretch is delayed so that the replay reaches each channel
the way the source did, checked against a per-event reference of the equation and on
the simulator itself; selections without a skip stay exactly the logical timing."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracecanary.compile import compile_program, expand_canary, reduce_execution
from tracecanary.compile.expand import (
    executed_program,
    expanded_trace_meta,
    select_occurrences,
)
from tracecanary.compile.junctions import junction_delays, segment_starts
from tracecanary.program import make_program
from tracecanary.sim.backends import load_backends
from tracecanary.sim.engine import prepare, simulate
from tracecanary.synth.examples import decode_like_program, random_program

MS = 1_000_000


def reference_junction_delays(logical, idx) -> list[int]:
    """The equation of compile/junctions.py, one event at a time (plain Python)."""
    occ = logical.occurrences
    gap = [int(g) for g in occ["gap_ns"]]
    channel = list(zip(occ["group"], occ["stream"], strict=True))
    skew = [0] * logical.n
    if logical.skew_known:
        for o, s in zip(logical.members["occ"], logical.members["skew_ns"], strict=True):
            skew[int(o)] = max(skew[int(o)], int(s))
    ready, slack, latest, t = [], [], {}, 0
    for y in range(logical.n):
        t += gap[y]
        ready.append(t + skew[y])
        c = channel[y]
        slack.append(ready[y] - latest[c] if c in latest else None)
        latest[c] = max(latest.get(c, ready[y]), ready[y])
    idx = [int(i) for i in idx]
    ex_ready, t = [], 0
    for i in idx:
        t += gap[i]
        ex_ready.append(t + skew[i])
    segments = []
    for j, i in enumerate(idx):
        if j == 0 or i != idx[j - 1] + 1:
            segments.append([])
        segments[-1].append(j)
    delays = [0] * len(idx)
    known, shift = {}, 0
    for s, positions in enumerate(segments):
        if s:
            needs, seen = [], set()
            for j in positions:
                c = channel[idx[j]]
                if c in seen:
                    continue
                seen.add(c)
                if slack[idx[j]] is not None and c in known:
                    needs.append(slack[idx[j]] - (ex_ready[j] + shift - known[c]))
            if needs:
                delta = max(max(needs), -gap[idx[positions[0]]])
                delays[positions[0]] = delta
                shift += delta
        for j in positions:
            c = channel[idx[j]]
            known[c] = max(known.get(c, ex_ready[j] + shift), ex_ready[j] + shift)
    return delays


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 120),
    keep=st.floats(0.05, 1.0),
    skew_known=st.booleans(),
)
def test_junction_delays_follow_the_equation_event_by_event(seed, n, keep, skew_known):
    program = random_program(seed, n, skew_known=skew_known, jitter_ns=5_000)
    rng = np.random.default_rng(seed)
    idx = np.flatnonzero(rng.random(n) < keep)
    if idx.size == 0:
        idx = np.array([n - 1])
    got = junction_delays(program, idx)
    assert got.tolist() == reference_junction_delays(program, idx)
    # only junctions move, and never before the occurrence preceding them
    starts = segment_starts(idx)
    assert (np.flatnonzero(got) >= 1).all() and np.isin(np.flatnonzero(got), starts).all()
    assert (program.occurrences["gap_ns"].to_numpy()[idx] + got >= 0).all()


def test_a_selection_without_a_skip_keeps_the_logical_timing_exactly():
    program = random_program(3, 200, jitter_ns=5_000)
    assert not junction_delays(program, np.arange(200)).any()
    assert not junction_delays(program, np.arange(40, 90)).any()  # one segment
    canary = compile_program(program)  # lossless, nothing reduced
    logical = expand_canary(canary)
    executed = expand_canary(canary, executed=True)
    for col in ("gap_ns", "overlap_ns", "latency_ns", "op", "bytes", "tail", "weight"):
        assert np.array_equal(executed.occurrences[col], logical.occurrences[col])


def _alternating_steps(steps: int):
    """One channel; every step is 3 all_reduces (4, 8, 16 KiB). An even step ends with a member
    arriving 20 ms late, and the step after it starts 25 ms later, so the source never
    queues; an odd step ends on time and the next step starts 2 ms later."""
    ops, sizes, gaps, skews = [], [], [], []
    for s in range(steps):
        first_gap = 0 if s == 0 else (25 * MS if (s - 1) % 2 == 0 else 2 * MS)
        late = 20 * MS if s % 2 == 0 else 0
        for j, gap in enumerate((first_gap, MS, MS)):
            ops.append("all_reduce")
            sizes.append(4096 << j)
            gaps.append(gap)
            skews += [0, late if j == 2 else 0]
    n = len(ops)
    return make_program(
        {
            "op": np.array(ops, dtype=object),
            "bytes": np.array(sizes, dtype=np.int64),
            "dtype": np.full(n, "float32", dtype=object),
            "group": np.full(n, "0", dtype=object),
            "group_size": np.full(n, 2, dtype=np.int64),
            "gap_ns": np.array(gaps, dtype=np.int64),
        },
        {
            "occ": np.repeat(np.arange(n), 2),
            "rank": np.tile([0, 1], n),
            "skew_ns": np.array(skews, dtype=np.int64),
        },
        world_size=2,
        skew_known=True,
    )


def test_replay_after_a_skipped_stretch_does_not_queue_where_the_source_did_not():
    program = _alternating_steps(40)
    reduced = reduce_execution(compile_program(program), {"max_executed_repeats": 1})
    assert reduced["stats"]["occurrences_executed"] < program.n
    logical = expand_canary(reduced)
    executed = executed_program(reduced, logical)
    idx = executed.occurrences["logical_occ"].to_numpy()
    assert len(segment_starts(idx)) > 1  # there is a junction
    back_to_back = select_occurrences(
        logical, idx, executed.occurrences["weight"].to_numpy(dtype=np.float64)
    )
    backends = load_backends(None)
    for config in backends.select():
        source = simulate(prepare(program), config).queue_wait_ns.max()
        plain = simulate(prepare(back_to_back), config).queue_wait_ns.max()
        joined = simulate(prepare(executed), config).queue_wait_ns.max()
        assert source == 0
        assert plain > 15 * MS  # resuming on the logical gap alone queues behind the skew
        assert joined == 0
    # the weights are untouched, and only junction gaps differ from the logical ones
    assert np.array_equal(
        executed.occurrences["weight"].to_numpy(), back_to_back.occurrences["weight"].to_numpy()
    )
    moved = np.flatnonzero(
        executed.occurrences["gap_ns"].to_numpy() != back_to_back.occurrences["gap_ns"].to_numpy()
    )
    assert moved.size and np.isin(moved, segment_starts(idx)).all()
    # an executed trace names its junctions; a canary without one names none
    meta = expanded_trace_meta(reduced, executed, executed=True, canary_name="c", canary_sha256="s")
    assert meta["execution"]["junctions"] == segment_starts(idx)[1:].tolist()
    lossless = compile_program(program)
    plain_meta = expanded_trace_meta(
        lossless,
        expand_canary(lossless, executed=True),
        executed=True,
        canary_name="c",
        canary_sha256="s",
    )
    assert "junctions" not in plain_meta["execution"]


def test_junction_delay_can_shorten_a_gap_but_never_below_zero():
    # a random third of a jittery decode loop: junctions both earlier and later than
    # their logical gap, none before the occurrence preceding it
    program = decode_like_program(30, layers=2, world_size=2, jitter_ns=200_000, seed=5)
    rng = np.random.default_rng(0)
    idx = np.sort(rng.choice(program.n, size=program.n // 3, replace=False))
    delays = junction_delays(program, idx)
    gaps = program.occurrences["gap_ns"].to_numpy()[idx]
    assert (gaps + delays >= 0).all()
    assert (delays < 0).any() and (delays > 0).any()
    assert delays.tolist() == reference_junction_delays(program, idx)
