"""expand_canary builds the same Program make_program would (string columns straight
from Arrow, not one Python object per row), and verify_behavior's single decoding
gives the executed program expand_canary(executed=True) gives."""

from __future__ import annotations

import pandas as pd
import pytest

from tracecanary.compile import compile_program, expand_canary, parse_budget
from tracecanary.compile.expand import executed_program
from tracecanary.program import OCCURRENCE_COLUMNS, make_program
from tracecanary.synth.examples import decode_like_program, random_program


def _via_make_program(program):
    occ = program.occurrences
    cols = {
        c: (occ[c].to_numpy(dtype=object) if t == "str" else occ[c].to_numpy())
        for c, t in OCCURRENCE_COLUMNS.items()
    }
    return make_program(
        cols,
        {c: program.members[c].to_numpy() for c in program.members.columns},
        world_size=program.world_size,
        skew_known=program.skew_known,
        skew_reason=program.skew_reason,
        notes=program.notes,
    )


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("spec", [None, "gap=300,overlap=300,latency=300,skew=30"])
def test_expansion_is_the_program_make_program_builds(seed, spec):
    source = random_program(seed, 300, world_size=4, skew_known=seed % 2 == 0)
    canary = compile_program(source, budget=None if spec is None else parse_budget(spec))
    expanded = expand_canary(canary)
    reference = _via_make_program(expanded)
    pd.testing.assert_frame_equal(expanded.occurrences, reference.occurrences, check_exact=True)
    pd.testing.assert_frame_equal(expanded.members, reference.members, check_exact=True)
    if spec is None:  # lossless: the source itself, column for column (unmeasured: 0)
        want = source.occurrences.copy()
        for col, mask in (("overlap_ns", "has_overlap"), ("latency_ns", "has_latency")):
            want[col] = want[col].where(want[mask], 0)
        pd.testing.assert_frame_equal(expanded.occurrences, want, check_exact=True)
        pd.testing.assert_frame_equal(expanded.members, source.members, check_exact=True)


def test_executed_program_from_the_logical_one_equals_expanding_executed():
    from tracecanary.compile.execution import reduce_execution

    source = decode_like_program(60, layers=4, world_size=4, jitter_ns=500, tail_every=13)
    canary = reduce_execution(compile_program(source), {"max_executed_repeats": 2})
    direct = expand_canary(canary, executed=True)
    shared = executed_program(canary, expand_canary(canary))
    assert direct.n < source.n  # something is really reduced
    pd.testing.assert_frame_equal(direct.occurrences, shared.occurrences, check_exact=True)
    pd.testing.assert_frame_equal(direct.members, shared.members, check_exact=True)
    assert direct.notes == shared.notes and direct.notes[-1].startswith("expanded (executed)")
