"""bench_small's input: the reference's collective-per-event trace, converted to ours,
is a valid native trace with one occurrence per reference collective."""

from __future__ import annotations

import json

from bench.bench_small import builtin_reference_doc, to_native


def test_converted_reference_trace_compiles_to_one_occurrence_per_collective(tmp_path, run_cli):
    reference = builtin_reference_doc()
    src = tmp_path / "trace.json"
    src.write_text(json.dumps(to_native(reference)))
    code, out, err = run_cli("compile", src, "--lossless", "-o", tmp_path / "c.json")
    assert code == 0, err
    assert f"occurrences_source: {len(reference['events'])}" in out
    assert "events_source: 80" in out  # 10 collectives x 8 ranks
