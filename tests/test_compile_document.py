"""Canary documents validate against schemas/canary.schema.json, in full and through
the fast skeleton used for large canaries; malformed canaries are refused (exit 2)."""

from __future__ import annotations

import pytest

from tracecanary.compile import compile_program, parse_budget, reduce_execution
from tracecanary.compile.document import validate_canary
from tracecanary.compile.expand import expand_canary
from tracecanary.errors import InputError, SchemaError
from tracecanary.formats.schemas import validate
from tracecanary.formats.skeleton import SKELETON_MIN, skeleton
from tracecanary.synth.examples import decode_like_program, random_program


@pytest.mark.parametrize("budget", [None, "skew=2us,overlap=5us,gap=5us,latency=5us", "gap=3us"])
@pytest.mark.parametrize("skew_known", [True, False])
def test_real_canaries_validate_in_full_against_the_schema(budget, skew_known):
    program = decode_like_program(
        60, layers=5, world_size=4, jitter_ns=4_000, skew_known=skew_known, tail_every=20
    )
    canary = compile_program(program, budget=parse_budget(budget) if budget else None)
    validate(canary, "canary", file="canary")
    validate(reduce_execution(canary, {"max_executed_repeats": 3}), "canary", file="canary")
    validate(compile_program(program, prefix=30), "canary", file="canary")


def _long_block(canary):
    for stream in canary["timing"].values():
        if stream and stream["encoding"] == "exact":
            for rec in stream["values"]:
                if "values" in rec and len(rec["values"]) > SKELETON_MIN:
                    return rec["values"]
    raise AssertionError("no long literal block")


@pytest.mark.parametrize("bad", [-5, 1.5, "7", None, True])
def test_skeleton_validation_catches_a_bad_value_in_the_middle_of_a_long_list(bad):
    canary = compile_program(decode_like_program(200, layers=4, world_size=2, jitter_ns=5_000))
    validate_canary(canary)
    block = _long_block(canary)
    block[len(block) // 2] = bad
    with pytest.raises(SchemaError):
        validate_canary(canary)


def test_skeleton_keeps_extremes_types_and_shapes():
    items = list(range(100)) + [None]
    kept = skeleton(items)
    assert {0, 99, None} <= set(kept) and SKELETON_MIN < len(kept) < len(items)
    vectors = [[1, 2]] * 70 + [[3]] + [[0, 9, 9]]
    kept = skeleton(vectors)
    assert [3] in kept and [0, 9, 9] in kept


def test_expand_refuses_structure_that_does_not_add_up():
    canary = compile_program(random_program(5, 50))
    canary["structure"]["occurrences"] = 51
    with pytest.raises(InputError, match="structure"):
        expand_canary(canary)


def test_expand_refuses_inconsistent_reduction_weights():
    canary = reduce_execution(
        compile_program(decode_like_program(100, layers=3, world_size=2)),
        {"max_executed_repeats": 4},
    )
    motif = canary["structure"]["records"][1]
    motif["steady_weight"] += 1.0
    with pytest.raises(InputError, match="steady_weight"):
        expand_canary(canary, executed=True)


def test_expand_refuses_intervals_that_do_not_partition_the_program():
    canary = compile_program(
        decode_like_program(100, layers=3, world_size=2, jitter_ns=3_000),
        budget=parse_budget("gap=5us,overlap=5us,latency=5us,skew=5us"),
    )
    name, stream = next(
        (n, s) for n, s in canary["timing"].items() if s and s["encoding"] == "bounded_intervals"
    )
    stream["intervals"][-1]["stop"] += 1
    with pytest.raises(InputError, match="partition|cover"):
        expand_canary(canary)


def test_a_non_canary_is_refused():
    with pytest.raises(InputError, match="canary"):
        validate_canary({"format": "tracecanary.trace/v1"})
