"""Lossless means lossless per member: ``expand(compile --lossless)`` of a multi-rank
trace whose ranks measured different latencies and overlaps gives back the normalized
source field for field (the absolute time origin and the clock's name aside, as
docs/formats-canary.md says), and a canary whose members all agree costs nothing more.

The traces are generated here: per-rank native events on one clock (skew known), each
occurrence's members arriving after the previous occurrence's, so that every rank's
issue order is the global one."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracecanary.canonical import canonical_json_bytes
from tracecanary.compile import compile_program, expand_canary, source_digest
from tracecanary.compile.budget import parse_budget
from tracecanary.compile.document import validate_canary
from tracecanary.compile.source import serialize_source
from tracecanary.compile.tracefile import trace_meta, write_program_trace
from tracecanary.errors import SchemaError
from tracecanary.ingest import ingest_files, read_normalized
from tracecanary.load import load_program
from tracecanary.verify.commitments import verify_commitments


def _trace(seed: int, n: int, world: int, *, agree: bool, p_measured: float) -> dict:
    """A merged native trace: ``n`` collectives over the world and two subgroups, every
    member with its own arrival, latency and overlap (``agree``: equal on all members)."""
    rng = np.random.default_rng(seed)
    groups = {"world": list(range(world)), "pair": [0, world - 1], "odd": list(range(1, world, 2))}
    names = [g for g in groups if len(set(groups[g])) == len(groups[g])]
    ops = ["all_reduce", "all_gather", "broadcast", "reduce_scatter"]
    events, seq, instance = [], dict.fromkeys(range(world), 0), dict.fromkeys(names, 0)
    t = 1_000_000_000 + int(rng.integers(0, 1 << 30))
    has_lat, has_ovl = rng.random() < p_measured, rng.random() < p_measured
    for k in range(n):  # the first over the world: every rank captured (skew known)
        g = "world" if k == 0 else names[int(rng.integers(0, len(names)))]
        op = ops[int(rng.integers(0, len(ops)))]
        nbytes = int(rng.choice([4, 4096, 1 << 20]))
        phase = str(rng.choice(["", "prefill", "decode"]))
        latency = int(rng.integers(1000, 50_000))
        overlap = int(rng.integers(0, 20_000))
        for r in groups[g]:
            ev = {
                "rank": r,
                "seq": seq[r],
                "op": op,
                "bytes": nbytes,
                "dtype": "float32",
                "group": g,
                "instance": instance[g],
                "ts_ns": t + int(rng.integers(0, 5000)),
            }
            if op == "broadcast":
                ev["root"] = groups[g][0]
            if phase:
                ev["phase"] = phase
            if has_lat:
                ev["latency_ns"] = latency if agree else int(rng.integers(1000, 50_000))
            if has_ovl:
                ev["overlap_ns"] = overlap if agree else int(rng.integers(0, 20_000))
            events.append(ev)
            seq[r] += 1
        instance[g] += 1
        t += 5000 + int(rng.integers(0, 100_000))
    return {
        "format": "tracecanary.trace/v1",
        "meta": {
            "world_size": world,
            "source": "test_lossless_members",
            "clock_domains": [{"id": "host", "ranks": list(range(world))}],
        },
        "groups": [{"id": g, "ranks": groups[g]} for g in names],
        "events": events,
    }


def _normalized(path, out) -> dict:
    """The normalized table of a trace file as columns, rows in (rank, seq) order."""
    ingest_files([str(path)], out)
    table, _ = read_normalized(out)
    frame = table.to_pandas().sort_values(["rank", "seq"], kind="stable").reset_index(drop=True)
    return {c: frame[c] for c in frame.columns}


def _round_trip(tmp_path, doc) -> tuple[dict, dict, dict]:
    src = tmp_path / "source.json"
    src.write_bytes(canonical_json_bytes(doc))
    source = _normalized(src, tmp_path / "source.parquet")
    program = load_program(str(tmp_path / "source.parquet"))
    canary = compile_program(program)
    validate_canary(canary)
    assert verify_commitments(program, canary) == []
    expanded = expand_canary(canary)
    assert source_digest(expanded) == source_digest(program)
    out = tmp_path / "expanded.json"
    write_program_trace(expanded, trace_meta(expanded, source="expand", notes=[]), out)
    return source, _normalized(out, tmp_path / "expanded.parquet"), canary


def _assert_equal_field_for_field(source: dict, expanded: dict) -> None:
    assert set(source) == set(expanded)
    for column in source:
        a, b = source[column], expanded[column]
        if column in ("ts_ns", "issue_ns"):  # the absolute time origin aside
            a, b = a - a.min(), b - b.min()
        if column == "clock":  # the clock's name (the expansion's is synthetic)
            assert a.nunique() == b.nunique() == 1
            continue
        assert a.isna().equals(b.isna()), column
        assert (a[a.notna()] == b[b.notna()]).all(), column


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 60),
    world=st.integers(2, 5),
    p_measured=st.sampled_from([0.0, 0.5, 1.0]),
)
def test_lossless_expansion_gives_back_every_members_own_values(
    tmp_path_factory, seed, n, world, p_measured
):
    tmp_path = tmp_path_factory.mktemp("trip")
    doc = _trace(seed, n, world, agree=False, p_measured=p_measured)
    source, expanded, _ = _round_trip(tmp_path, doc)
    _assert_equal_field_for_field(source, expanded)


def test_members_with_different_latencies_keep_their_mean_through_a_lossless_canary(tmp_path):
    doc = _trace(7, 80, 4, agree=False, p_measured=1.0)
    source, expanded, canary = _round_trip(tmp_path, doc)
    assert expanded["latency_ns"].mean() == source["latency_ns"].mean()
    assert expanded["overlap_ns"].mean() == source["overlap_ns"].mean()
    assert {"latency_members", "overlap_members"} <= set(canary["timing"])


def test_a_source_whose_members_agree_needs_no_member_stream_and_keeps_its_bytes(tmp_path):
    doc = _trace(8, 80, 4, agree=True, p_measured=1.0)
    source, expanded, canary = _round_trip(tmp_path, doc)
    _assert_equal_field_for_field(source, expanded)
    assert set(canary["timing"]) == {"gap", "overlap", "latency", "skew"}
    program = load_program(str(tmp_path / "source.parquet"))
    assert program.held_member_values() == ()
    line = json.loads(serialize_source(program).line(0))
    assert "latency_ns_members" not in line and "overlap_ns_members" not in line


def test_verify_commitments_names_an_edited_member_value(tmp_path):
    doc = _trace(9, 30, 3, agree=False, p_measured=1.0)
    _, _, canary = _round_trip(tmp_path, doc)
    program = load_program(str(tmp_path / "source.parquet"))
    record = canary["timing"]["latency_members"]["values"][0]
    vector = record["v"] if "v" in record else record["values"][0]
    vector[-1] += 1
    found = verify_commitments(program, canary)
    assert [m["segment"] for m in found] == ["timing.latency_members occurrence 0"]


def test_a_bounded_canary_keeps_no_member_stream(tmp_path):
    doc = _trace(10, 40, 4, agree=False, p_measured=1.0)
    _round_trip(tmp_path, doc)
    program = load_program(str(tmp_path / "source.parquet"))
    canary = compile_program(program, budget=parse_budget("latency=5us"))
    validate_canary(canary)
    assert "latency_members" not in canary["timing"]
    assert verify_commitments(program, canary) == []
    canary["timing"]["latency_members"] = {"encoding": "exact", "values": []}
    with pytest.raises(SchemaError, match="field timing"):
        validate_canary(canary)
