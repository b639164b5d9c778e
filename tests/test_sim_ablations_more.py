"""The model ablations (no_queue_reset, compute_pressure, observed_latency): each changes
what docs/simulator.md says it changes on a hand-built program, and nothing else."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tracecanary.canonical import canonical_json_bytes
from tracecanary.errors import InputError
from tracecanary.formats.schemas import validate
from tracecanary.program import make_program
from tracecanary.sim.backends import backends_from_content
from tracecanary.sim.engine import MODEL_ABLATIONS, normalize_ablations, prepare, simulate
from tracecanary.sim.report import build_report

NO_MEMBERS = {"occ": [], "rank": [], "skew_ns": []}
FIELDS = ("candidate", "service_ns", "start_ns", "end_ns", "queue_wait_ns", "hidden_ns")


def _config(efficiency=0.0, contention=0.0):
    content = {
        "format": "tracecanary.backends/v1",
        "configs": {
            "c": {
                "algorithms": ["ring"],
                "protocols": ["Simple"],
                "channels": 1,
                "link_busbw_gbps": 1000.0,
                "overlap_efficiency": efficiency,
                "contention": contention,
                "candidates": [
                    {
                        "algorithm": "ring",
                        "protocol": "Simple",
                        "latency_us": 0.0,
                        "busbw_gbps_per_channel": 1.0,
                    }
                ],
            }
        },
    }
    return backends_from_content(content)


def _sends(gaps, **extra):
    n = len(gaps)
    occ = {
        "op": ["send"] * n,
        "bytes": [1000] * n,
        "dtype": ["bf16"] * n,
        "group": ["p2p:0->1"] * n,
        "group_size": [2] * n,
        "gap_ns": list(gaps),
        **extra,
    }
    return make_program(occ, NO_MEMBERS, world_size=2, skew_known=True)


def _both(program, ablation, config):
    return simulate(prepare(program), config), simulate(prepare(program, [ablation]), config)


def _unchanged(plain, ablated, fields):
    for name in fields:
        np.testing.assert_array_equal(getattr(plain, name), getattr(ablated, name), err_msg=name)


def test_no_queue_reset_keeps_the_worst_wait_after_an_idle_gap_and_changes_nothing_else():
    # three back to back (waits 0, 1000, 2000), an idle gap of 5000, one more
    program = _sends([0, 0, 0, 5000])
    config = _config().configs["c"]
    plain, ablated = _both(program, "no_queue_reset", config)
    assert plain.queue_wait_ns.tolist() == [0, 1000, 2000, 0]
    assert ablated.queue_wait_ns.tolist() == [0, 1000, 2000, 2000]
    assert ablated.latency_ns.tolist() == [1000, 2000, 3000, 3000]
    _unchanged(plain, ablated, ("candidate", "service_ns", "hidden_ns"))
    np.testing.assert_array_equal(ablated.end_ns - ablated.start_ns, plain.service_ns)


def test_no_queue_reset_is_the_standard_model_when_waits_never_decrease():
    program = _sends([0, 0, 0, 0])
    plain, ablated = _both(program, "no_queue_reset", _config().configs["c"])
    _unchanged(plain, ablated, (*FIELDS, "latency_ns"))


def test_compute_pressure_halves_what_overlap_hides_and_changes_nothing_else():
    program = _sends([0, 100_000], overlap_ns=[500, 0], has_overlap=[True, False])
    config = _config(efficiency=0.8, contention=0.5).configs["c"]
    plain, ablated = _both(program, "compute_pressure", config)
    assert plain.hidden_ns.tolist() == [400, 0]  # floor(0.8 * 500)
    assert ablated.hidden_ns.tolist() == [200, 0]  # floor(0.5 * 0.8 * 500)
    assert (ablated.latency_ns - plain.latency_ns).tolist() == [200, 0]
    _unchanged(plain, ablated, ("candidate", "service_ns", "start_ns", "end_ns", "queue_wait_ns"))


def test_observed_latency_replaces_only_measured_latencies_and_nothing_else():
    program = _sends([0, 0, 0], latency_ns=[7777, 0, 123], has_latency=[True, False, True])
    plain, ablated = _both(program, "observed_latency", _config().configs["c"])
    assert plain.latency_ns.tolist() == [1000, 2000, 3000]
    assert ablated.latency_ns.tolist() == [7777, 2000, 123]
    _unchanged(plain, ablated, FIELDS)


def test_model_ablations_are_recorded_in_a_schema_valid_report():
    program = _sends([0, 0, 5000], latency_ns=[1, 2, 3], has_latency=[True, True, True])
    report = build_report(
        program, _config(), input_sha256="0" * 64, ablations=list(MODEL_ABLATIONS)
    )
    assert report["protocol"]["ablations"]["applied"] == sorted(MODEL_ABLATIONS)
    validate(json.loads(canonical_json_bytes(report)), "report", file="model-ablation report")


def test_unknown_ablation_is_refused_naming_the_known_ones():
    with pytest.raises(InputError, match="observed_latency"):
        normalize_ablations(["queue_reset"])
