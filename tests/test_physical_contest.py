"""Contested configurations (physical/contest.py): close calls on the full program and
inversions between the isolated (ladders-only) ranking and the machine's."""

from __future__ import annotations

from tracecanary.formats.schemas import validate
from tracecanary.physical.contest import CONTEST_MARGIN_PCT, contest, knob_grid


def _m(mean: float, low: float | None = None, high: float | None = None) -> dict:
    return {"mean": mean, "interval": None if low is None else [low, high]}


def test_knob_grid_is_a_valid_physical_configurations_document_covering_every_knob():
    grid = knob_grid()
    validate(grid, "physical", file="<grid>")
    modes = {c["mode"] for c in grid["configs"].values()}
    assert modes == {"native", "decomposed", "fused", "chunked"}
    assert grid["configs"]["fused16k"]["bucket_bytes"] == 16384
    assert grid["configs"]["chunked2"]["chunks"] == 2
    assert grid["configs"]["native_barrier"]["op_barrier"] is True
    assert all(c["env"] == {} for c in grid["configs"].values())  # threads are fixed at 1


def test_an_inversion_needs_a_machine_decision_against_a_strict_isolated_order():
    measured = {
        "a": _m(100.0, 95.0, 104.0),
        "b": _m(108.0, 105.0, 111.0),  # 8% above a, intervals separate: machine says a < b
        "c": _m(300.0, 100.0, 500.0),  # overlaps everything: undetermined
    }
    isolated = {"a": 50.0, "b": 40.0, "c": 10.0}  # ladders say b < a and c first
    result = contest(measured, isolated)
    pairs = {(p["a"], p["b"]): p for p in result["pairs"]}
    assert pairs[("a", "b")]["machine"] == -1 and pairs[("a", "b")]["isolated"] == 1
    assert pairs[("a", "b")]["inversion"] and pairs[("a", "b")]["contested"]
    assert abs(pairs[("a", "b")]["gap_pct"] - 8.0) < 1e-9
    # undetermined by the machine: never claimed as an inversion, however far apart
    assert pairs[("a", "c")]["machine"] is None and not pairs[("a", "c")]["inversion"]
    assert not pairs[("a", "c")]["contested"]
    assert [(p["a"], p["b"]) for p in result["inversions"]] == [("a", "b")]
    assert (result["closest"]["a"], result["closest"]["b"]) == ("a", "b")
    assert result["margin_pct"] == CONTEST_MARGIN_PCT


def test_a_configuration_without_an_isolated_figure_is_compared_by_the_machine_only():
    result = contest({"a": _m(10.0, 9.0, 11.0), "d": _m(20.0, 19.0, 21.0)}, {"a": 5.0, "d": None})
    (pair,) = result["pairs"]
    assert pair["machine"] == -1 and pair["isolated"] is None and not pair["inversion"]
    assert result["contested"] == [] and result["closest"] is pair
