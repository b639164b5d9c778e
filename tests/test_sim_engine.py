"""The vectorized engine against the plain per-event reference, plus hand-computed cases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracecanary.errors import InputError
from tracecanary.formats.vocab import COLLECTIVES
from tracecanary.program import make_program
from tracecanary.sim.backends import backends_from_content, load_backends
from tracecanary.sim.engine import ABLATIONS, prepare, simulate

try:
    from test_sim_support import reference_simulate
except ImportError:  # tests/ as a package
    from tests.test_sim_support import reference_simulate

REPO = Path(__file__).resolve().parents[1]
DEFAULT_BACKENDS = load_backends(REPO / "config" / "backends.yaml")

GROUPS = {"g4": [0, 1, 2, 3], "g2": [0, 1], "g3": [1, 2, 3], "solo": [2]}
P2P = {"p2p:0->1": [0, 1], "p2p:3->2": [2, 3]}
OPS = [*COLLECTIVES, "barrier", "custom:moe_dispatch"]  # every group op, one custom


def one_config(
    *,
    candidates,
    algorithms=("ring", "tree"),
    protocols=("LL", "LL128", "Simple"),
    channels=1,
    link=1000.0,
    efficiency=0.0,
    contention=0.0,
):
    content = {
        "format": "tracecanary.backends/v1",
        "configs": {
            "c": {
                "algorithms": list(algorithms),
                "protocols": list(protocols),
                "channels": channels,
                "link_busbw_gbps": link,
                "overlap_efficiency": efficiency,
                "contention": contention,
                "candidates": candidates,
            }
        },
    }
    return backends_from_content(content).configs["c"]


@st.composite
def programs(draw):
    n = draw(st.integers(0, 30))
    occ = {
        k: []
        for k in (
            "op",
            "bytes",
            "dtype",
            "group",
            "group_size",
            "root",
            "phase",
            "stream",
            "gap_ns",
            "overlap_ns",
            "has_overlap",
            "weight",
            "tail",
        )
    }
    members = {"occ": [], "rank": [], "skew_ns": []}
    for i in range(n):
        if draw(st.integers(0, 4)) == 0:
            group = draw(st.sampled_from(sorted(P2P)))
            ranks, op = P2P[group], "send"
        else:
            group = draw(st.sampled_from(sorted(GROUPS)))
            ranks, op = GROUPS[group], draw(st.sampled_from(OPS))
        has_overlap = draw(st.booleans())
        occ["op"].append(op)
        occ["bytes"].append(
            draw(st.one_of(st.just(0), st.integers(1, 1 << 12), st.integers(1 << 12, 1 << 28)))
        )
        occ["dtype"].append("bfloat16")
        occ["group"].append(group)
        occ["group_size"].append(len(ranks))
        occ["root"].append(ranks[0] if op in ("broadcast", "reduce") else -1)
        occ["phase"].append(draw(st.sampled_from(["", "decode", "prefill"])))
        occ["stream"].append(draw(st.sampled_from(["", "s1"])))
        # 0 and small gaps build queues; large gaps reset them
        occ["gap_ns"].append(
            draw(st.one_of(st.just(0), st.integers(0, 3_000), st.integers(0, 20_000_000)))
        )
        occ["overlap_ns"].append(draw(st.integers(0, 5_000_000)) if has_overlap else 0)
        occ["has_overlap"].append(has_overlap)
        occ["weight"].append(draw(st.sampled_from([1.0, 0.5, 2.0, 3.25, 1000.0 / 3.0])))
        occ["tail"].append(draw(st.booleans()))
        for r in ranks:
            members["occ"].append(i)
            members["rank"].append(r)
            members["skew_ns"].append(draw(st.one_of(st.just(0), st.integers(0, 50_000))))
    return make_program(
        occ, members, world_size=4, skew_known=draw(st.booleans()), skew_reason="no calibration"
    )


@st.composite
def configs(draw):
    if draw(st.booleans()):
        return draw(
            st.sampled_from([DEFAULT_BACKENDS.configs[k] for k in sorted(DEFAULT_BACKENDS.configs)])
        )
    protocols = draw(
        st.lists(st.sampled_from(["LL", "LL128", "Simple"]), min_size=1, max_size=3, unique=True)
    )
    algorithms = draw(st.sampled_from([["ring"], ["ring", "tree"]]))
    finite = {"allow_nan": False, "allow_infinity": False, "allow_subnormal": False}
    candidates = []
    for alg in ("ring", "tree"):
        for proto in ("LL", "LL128", "Simple"):
            if draw(st.booleans()) or (alg == "ring" and proto == protocols[0]):
                candidates.append(
                    {
                        "algorithm": alg,
                        "protocol": proto,
                        "latency_us": draw(st.floats(0, 20, **finite)),
                        "busbw_gbps_per_channel": draw(st.floats(0.05, 50, **finite)),
                    }
                )
    return one_config(
        candidates=candidates,
        algorithms=algorithms,
        protocols=protocols,
        channels=draw(st.integers(1, 32)),
        link=draw(st.floats(1, 400, **finite)),
        efficiency=draw(st.floats(0, 1, **finite)),
        contention=draw(st.floats(0, 3, **finite)),
    )


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=programs(), config=configs(), ablations=st.sets(st.sampled_from(ABLATIONS)))
def test_fast_engine_agrees_exactly_with_per_event_reference(program, config, ablations):
    prep = prepare(program, ablations)
    fast = simulate(prep, config)
    ref = reference_simulate(program, config, ablations)
    n = prep.n
    assert n == len(ref["occ"])
    np.testing.assert_array_equal(prep.occ, np.asarray(ref["occ"], dtype=np.int64).reshape(n))
    np.testing.assert_array_equal(
        prep.issue_ns, np.asarray(ref["issue_ns"], dtype=np.int64).reshape(n)
    )
    np.testing.assert_array_equal(
        prep.rendezvous_wait_ns, np.asarray(ref["rendezvous_wait_ns"], dtype=np.int64).reshape(n)
    )
    for name in (
        "candidate",
        "service_ns",
        "start_ns",
        "end_ns",
        "queue_wait_ns",
        "hidden_ns",
        "latency_ns",
    ):
        got = getattr(fast, name)
        assert got.dtype == np.int64, name
        np.testing.assert_array_equal(
            got, np.asarray(ref[name], dtype=np.int64).reshape(n), err_msg=name
        )


def _single(op="send", nbytes=1000, group="p2p:0->1", size=2, **kw):
    return {
        "op": [op],
        "bytes": [nbytes],
        "dtype": ["bf16"],
        "group": [group],
        "group_size": [size],
        "gap_ns": [0],
        **kw,
    }


SIMPLE_1GBPS = [
    {"algorithm": "ring", "protocol": "Simple", "latency_us": 0.0, "busbw_gbps_per_channel": 1.0}
]


def test_rendezvous_waits_for_the_last_member_and_early_ranks_wait():
    program = make_program(
        _single(op="all_reduce", nbytes=0, group="g4", size=4),
        {"occ": [0, 0, 0, 0], "rank": [0, 1, 2, 3], "skew_ns": [0, 100, 300, 50]},
        world_size=4,
        skew_known=True,
    )
    config = one_config(
        candidates=[
            {
                "algorithm": "ring",
                "protocol": "LL",
                "latency_us": 1.0,
                "busbw_gbps_per_channel": 1.0,
            }
        ]
    )
    prep = prepare(program)
    result = simulate(prep, config)
    assert prep.rendezvous_wait_ns.tolist() == [300]
    assert prep.member_wait_ns.tolist() == [300 + 200 + 0 + 250]
    # ring all_reduce of 4 ranks: 2 * (4 - 1) steps of 1 us, no bytes
    assert result.service_ns.tolist() == [6000]
    assert result.latency_ns.tolist() == [300 + 6000]


def test_fifo_channel_queues_back_to_back_ops_and_idle_gap_resets_the_queue():
    occ = {
        "op": ["send"] * 4,
        "bytes": [1000] * 4,
        "dtype": ["bf16"] * 4,
        "group": ["p2p:0->1"] * 3 + ["p2p:0->1"],
        "group_size": [2] * 4,
        "stream": ["", "", "", "other"],
        "gap_ns": [0, 0, 0, 0],
    }
    program = make_program(
        occ, {"occ": [], "rank": [], "skew_ns": []}, world_size=2, skew_known=True
    )
    result = simulate(prepare(program), one_config(candidates=SIMPLE_1GBPS))
    # 1000 bytes at 1 GB/s = 1 us; the 4th is on another stream: its own channel
    assert result.service_ns.tolist() == [1000] * 4
    assert result.queue_wait_ns.tolist() == [0, 1000, 2000, 0]
    assert result.latency_ns.tolist() == [1000, 2000, 3000, 1000]
    occ["gap_ns"] = [0, 0, 5000, 0]
    result = simulate(
        prepare(
            make_program(occ, {"occ": [], "rank": [], "skew_ns": []}, world_size=2, skew_known=True)
        ),
        one_config(candidates=SIMPLE_1GBPS),
    )
    assert result.queue_wait_ns.tolist() == [0, 1000, 0, 0]


def test_contention_stretches_service_and_overlap_hides_up_to_the_efficiency():
    program = make_program(
        _single(overlap_ns=[500], has_overlap=[True]),
        {"occ": [], "rank": [], "skew_ns": []},
        world_size=2,
        skew_known=True,
    )
    config = one_config(candidates=SIMPLE_1GBPS, efficiency=0.8, contention=0.5)
    result = simulate(prepare(program), config)
    # base 1000 ns; overlap covers half of it: service = 1000 * (1 + 0.5 * 0.5)
    assert result.service_ns.tolist() == [1250]
    assert result.hidden_ns.tolist() == [400]  # floor(0.8 * 500) < service
    assert result.latency_ns.tolist() == [850]
    unmeasured = make_program(
        _single(overlap_ns=[0], has_overlap=[False]),
        {"occ": [], "rank": [], "skew_ns": []},
        world_size=2,
        skew_known=True,
    )
    result = simulate(prepare(unmeasured), config)
    assert result.service_ns.tolist() == [1000] and result.hidden_ns.tolist() == [0]


def test_candidate_choice_is_the_cheapest_enabled_and_tree_never_serves_all_gather():
    cands = [
        {"algorithm": "ring", "protocol": "LL", "latency_us": 0.5, "busbw_gbps_per_channel": 1.0},
        {
            "algorithm": "ring",
            "protocol": "Simple",
            "latency_us": 5.0,
            "busbw_gbps_per_channel": 100.0,
        },
        {"algorithm": "tree", "protocol": "LL", "latency_us": 0.1, "busbw_gbps_per_channel": 1.0},
    ]
    occ = {
        "op": ["all_reduce", "all_reduce", "all_gather"],
        "bytes": [8, 1 << 26, 8],
        "dtype": ["bf16"] * 3,
        "group": ["g4"] * 3,
        "group_size": [4] * 3,
        "gap_ns": [0, 10**9, 10**9],
    }
    program = make_program(
        occ, {"occ": [], "rank": [], "skew_ns": []}, world_size=4, skew_known=True
    )
    result = simulate(prepare(program), one_config(candidates=cands, link=1000.0))
    assert result.candidate.tolist() == [
        2,
        1,
        0,
    ]  # tree/LL small, ring/Simple large, ring/LL (no tree) for all_gather
    ring_only = simulate(prepare(program), one_config(candidates=cands, algorithms=("ring",)))
    assert ring_only.candidate.tolist() == [0, 1, 0]


def test_unknown_skew_is_not_simulated_and_marked_unknown():
    program = make_program(
        _single(op="all_reduce", group="g4", size=4),
        {"occ": [0, 0, 0, 0], "rank": [0, 1, 2, 3], "skew_ns": [0, 0, 0, 0]},
        world_size=4,
        skew_known=False,
        skew_reason="two clocks, no calibration",
    )
    prep = prepare(program)
    assert prep.skew_status == "unknown" and prep.skew_reason == "two clocks, no calibration"
    assert prep.rendezvous_wait_ns.tolist() == [0]
    assert (
        prepare(program, ["skew"]).skew_status == "unknown"
    )  # an ablation cannot make unknown known


@pytest.mark.parametrize(
    ("column", "value", "field"),
    [
        ("gap_ns", [-1], "gap_ns"),
        ("weight", [0.0], "weight"),
        ("weight", [float("nan")], "weight"),
        ("op", ["allreduce"], "op"),
        ("group_size", [0], "group_size"),
    ],
)
def test_prepare_refuses_bad_programs_naming_the_field(column, value, field):
    occ = _single()
    occ[column] = value
    program = make_program(
        occ, {"occ": [], "rank": [], "skew_ns": []}, world_size=2, skew_known=True
    )
    with pytest.raises(InputError) as err:
        prepare(program)
    assert err.value.field == field and err.value.record == "occurrence 0"


def test_prepare_refuses_unknown_ablation():
    program = make_program(
        _single(), {"occ": [], "rank": [], "skew_ns": []}, world_size=2, skew_known=True
    )
    with pytest.raises(InputError, match="unknown ablation"):
        prepare(program, ["jitter"])
