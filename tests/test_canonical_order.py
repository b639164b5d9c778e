"""The canonical occurrence order (``matching.canonical_order``, ``--order canonical``):
a linear extension of every rank's issue order that timing jitter between concurrent
groups does not change; a single group keeps the time order; compile --lossless, expand
and verify-commitments round trip in it; the simulator gives every occurrence the same
behaviour in either order; a live TP x FSDP2 capture repeats in it."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO, write_doc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracecanary.compile import compile_program, expand_canary, source_digest
from tracecanary.compile.document import declared_order, validate_canary
from tracecanary.compile.repetition import repetition_profile
from tracecanary.load import load_program
from tracecanary.sim.backends import load_backends
from tracecanary.sim.engine import prepare, simulate
from tracecanary.verify.commitments import verify_commitments

CLI = [sys.executable, "-m", "tracecanary"]


def schedule_trace(world: int, groups: list, body: list, steps: int, seed: int) -> dict:
    """A native trace of ``steps`` repetitions of ``body`` (one shared clock): each op is
    ``("c", group index, bytes)`` (a collective of ``groups[i]``) or ``("p", src, dst,
    bytes)`` (a send and its receive). Every rank issues its ops in the body's order;
    its timestamps advance by a random 1..2,000 ns per event (``seed``), so groups on
    disjoint ranks interleave in time differently for every seed."""
    rng = np.random.default_rng(seed)
    clock = rng.integers(0, 5_000, size=world)
    seq = [0] * world
    events = []

    def issue(rank: int, **fields) -> None:
        clock[rank] += int(rng.integers(1, 2_000))
        events.append(
            {"rank": rank, "seq": seq[rank], "ts_ns": int(clock[rank]), "dtype": "float32",
             **fields}
        )  # fmt: skip
        seq[rank] += 1

    for _ in range(steps):
        for op in body:
            if op[0] == "c":
                for r in groups[op[1]]:
                    issue(r, op="all_reduce", bytes=op[2], group=f"g{op[1]}")
            else:
                _, src, dst, size = op
                issue(src, op="send", bytes=size, group="world", peer=dst)
                issue(dst, op="recv", bytes=size, group="world", peer=src)
    # the file lists the ranks' events interleaved by time (each rank's in its order)
    events.sort(key=lambda e: (e["ts_ns"], e["rank"]))
    return {
        "format": "tracecanary.trace/v1",
        "meta": {
            "world_size": world,
            "source": "tests/test_canonical_order.py schedule_trace",
            "clock_domains": [{"id": "host0", "ranks": list(range(world)), "host": "host0"}],
            "notes": [],
        },
        "groups": [{"id": "world", "ranks": list(range(world))}]
        + [{"id": f"g{i}", "ranks": sorted(g)} for i, g in enumerate(groups)],
        "events": events,
    }


@st.composite
def schedules(draw):
    world = draw(st.integers(2, 5))
    ranks = st.lists(st.integers(0, world - 1), min_size=2, max_size=world, unique=True)
    groups = draw(st.lists(ranks, min_size=1, max_size=4))
    coll = st.tuples(st.just("c"), st.integers(0, len(groups) - 1), st.sampled_from([64, 4096]))
    pair = st.lists(st.integers(0, world - 1), min_size=2, max_size=2, unique=True)
    p2p = pair.map(lambda p: ("p", p[0], p[1], 256))
    body = draw(st.lists(st.one_of(coll, p2p), min_size=1, max_size=6))
    return world, groups, body, draw(st.integers(1, 4))


def _load(tmp_path, doc: dict, name: str, order: str):
    return load_program(write_doc(doc, tmp_path / f"{name}.json"), order=order)


def _chains(doc: dict) -> dict[int, list[tuple[str, int]]]:
    """Per rank, its events' (occurrence key, per-key instance) in its issue order."""
    chains: dict[int, list] = {}
    counts: dict[tuple, int] = {}
    for e in sorted(doc["events"], key=lambda e: (e["rank"], e["seq"])):
        if e["op"] in ("send", "recv"):
            src, dst = (e["rank"], e["peer"]) if e["op"] == "send" else (e["peer"], e["rank"])
            key = f"p2p:{src}->{dst}"
        else:
            key = e["group"]
        k = counts[(e["rank"], key)] = counts.get((e["rank"], key), -1) + 1
        chains.setdefault(e["rank"], []).append((key, k))
    return chains


def _program_chains(program) -> dict[int, list[tuple[str, int]]]:
    """Per rank, (group, index among the group's occurrences) of the occurrences it is a
    member of, in program order."""
    groups = program.column("group", object)
    index = np.zeros(program.n, dtype=np.int64)
    seen: dict[str, int] = {}
    for i, g in enumerate(groups.tolist()):
        index[i] = seen[g] = seen.get(g, -1) + 1
    occ, rank = program.member_column("occ", np.int64), program.member_column("rank", np.int64)
    chains: dict[int, list] = {}
    for o, r in zip(occ.tolist(), rank.tolist(), strict=True):
        chains.setdefault(r, []).append((str(groups[o]), int(index[o])))
    return chains


def _signature_order(program) -> list[tuple]:
    return list(
        zip(
            program.column("op", object).tolist(),
            program.column("group", object).tolist(),
            program.column("bytes", np.int64).tolist(),
            strict=True,
        )
    )


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedules(), st.integers(0, 1000))
def test_canonical_order_is_a_linear_extension_of_every_ranks_issue_order(
    tmp_path_factory, schedule, seed
):
    doc = schedule_trace(*schedule, seed=seed)
    program = _load(tmp_path_factory.mktemp("t"), doc, "trace", "canonical")
    assert _program_chains(program) == _chains(doc)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedules(), st.integers(0, 1000), st.integers(0, 1000))
def test_canonical_order_does_not_depend_on_timing_between_groups(
    tmp_path_factory, schedule, seed_a, seed_b
):
    tmp = tmp_path_factory.mktemp("t")
    a = _load(tmp, schedule_trace(*schedule, seed=seed_a), "a", "canonical")
    b = _load(tmp, schedule_trace(*schedule, seed=seed_b), "b", "canonical")
    assert _signature_order(a) == _signature_order(b)
    assert np.array_equal(a.member_column("rank"), b.member_column("rank"))
    # the issue times are the trace's own (on the program's origin): only the order moved
    for p, doc_seed in ((a, seed_a), (b, seed_b)):
        t = _load(tmp, schedule_trace(*schedule, seed=doc_seed), "t", "time")
        issue = p.issue_ns() - p.issue_ns().min()
        assert sorted(issue.tolist()) == t.issue_ns().tolist()


def test_concurrent_groups_that_interleave_differently_per_step_repeat_in_canonical_order(
    tmp_path,
):
    # two disjoint TP groups and their DP partners, as on a 2x2 mesh; time order follows
    # the jitter, the canonical order the structure
    doc = schedule_trace(
        4, [[0, 1], [2, 3], [0, 2], [1, 3]], [("c", 0, 64), ("c", 1, 64), ("c", 2, 4096),
                                              ("c", 3, 4096)], 40, seed=7
    )  # fmt: skip
    time_order = repetition_profile(_load(tmp_path, doc, "x", "time"))
    canonical = repetition_profile(_load(tmp_path, doc, "x", "canonical"))
    assert canonical.records == 1 and canonical.repeated == canonical.occurrences == 160
    assert time_order.records > 10
    # the search log's obstacle names the fix where the time order hides the motif
    assert "--order canonical orders them by structure" in time_order.obstacle()
    assert "--order canonical" not in canonical.obstacle()


def test_crossing_asynchronous_sends_give_one_order_whatever_the_timing(tmp_path):
    # each rank sends before it receives: rank 0's order and rank 1's cross (a cycle),
    # which Kahn's algorithm breaks at the smallest chain head, the same every time
    body = [("p", 0, 1, 256), ("p", 1, 0, 256), ("c", 0, 64)]
    orders = set()
    for seed in range(6):
        doc = schedule_trace(2, [[0, 1]], body, 5, seed=seed)
        rank1 = [e for e in doc["events"] if e["rank"] == 1]
        recv, send = rank1[0], rank1[1]  # per step: recv(0->1), send(1->0), reduce
        assert (recv["op"], send["op"]) == ("recv", "send")
        for k in range(0, len(rank1), 3):  # swap: send before recv on rank 1
            rank1[k]["seq"], rank1[k + 1]["seq"] = rank1[k + 1]["seq"], rank1[k]["seq"]
            rank1[k]["ts_ns"], rank1[k + 1]["ts_ns"] = rank1[k + 1]["ts_ns"], rank1[k]["ts_ns"]
        doc["events"].sort(key=lambda e: (e["rank"], e["seq"]))
        program = _load(tmp_path, doc, f"s{seed}", "canonical")
        orders.add(tuple(_signature_order(program)))
        by_group = _program_chains(program)
        for chain in by_group.values():  # every group's instances stay in order
            for key in {k for k, _ in chain}:
                idx = [i for k, i in chain if k == key]
                assert idx == sorted(idx)
    assert len(orders) == 1


def test_a_single_group_program_is_the_same_in_both_orders(tmp_path):
    doc = schedule_trace(3, [[0, 1, 2]], [("c", 0, 64), ("c", 0, 4096)], 10, seed=3)
    t, c = _load(tmp_path, doc, "x", "time"), _load(tmp_path, doc, "x", "canonical")
    assert t.occurrences.equals(c.occurrences) and t.members.equals(c.members)
    assert c.occurrence_order == "time"  # the same order: nothing to declare
    assert compile_program(t) == compile_program(c)


def test_the_shipped_decode_set_compiles_byte_identically_in_both_orders(tmp_path):
    from tracecanary.canonical import canonical_json_bytes
    from tracecanary.merge import merge_captures

    shipped = REPO / "resources" / "decode-small"
    merged = tmp_path / "merged.jsonl.gz"
    merge_captures(
        [str(p) for p in sorted(shipped.glob("rank*.jsonl.gz"))],
        merged,
        str(shipped / "calibration.json"),
    )
    t, c = load_program(merged, order="time"), load_program(merged, order="canonical")
    assert t.n > 1000 and source_digest(t) == source_digest(c)
    assert c.occurrence_order == "time"
    assert canonical_json_bytes(compile_program(t)) == canonical_json_bytes(compile_program(c))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedules(), st.integers(0, 1000))
def test_lossless_compile_and_expand_round_trip_in_canonical_order(
    tmp_path_factory, schedule, seed
):
    tmp = tmp_path_factory.mktemp("t")
    program = _load(tmp, schedule_trace(*schedule, seed=seed), "x", "canonical")
    canary = compile_program(program)
    validate_canary(canary)
    # declared where the canonical order is not the time order
    assert declared_order(canary) == program.occurrence_order
    expanded = expand_canary(canary)
    assert expanded.occurrence_order == program.occurrence_order
    assert source_digest(expanded) == source_digest(program) == canary["source"]["digest"]
    assert verify_commitments(program, canary) == []
    # the source loaded in the other order is named as the mismatch
    other = _load(tmp, schedule_trace(*schedule, seed=seed), "x", "time")
    if source_digest(other) != source_digest(program):
        assert verify_commitments(other, canary)[0]["segment"] == "source occurrence_order"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedules(), st.integers(0, 1000))
def test_every_occurrence_simulates_the_same_in_both_orders(tmp_path_factory, schedule, seed):
    tmp = tmp_path_factory.mktemp("t")
    doc = schedule_trace(*schedule, seed=seed)
    t, c = _load(tmp, doc, "x", "time"), _load(tmp, doc, "x", "canonical")

    def keyed(program, values):  # occurrence -> (group, index within the group)
        groups = program.column("group", object).tolist()
        seen: dict[str, int] = {}
        out = {}
        for i, g in enumerate(groups):
            seen[g] = seen.get(g, -1) + 1
            out[(g, seen[g])] = int(values[i])
        return out

    backends = load_backends(REPO / "config" / "backends.yaml")
    pt, pc = prepare(t), prepare(c)
    for config in backends.select():
        rt, rc = simulate(pt, config), simulate(pc, config)
        for name in ("latency_ns", "queue_wait_ns", "service_ns", "hidden_ns"):
            assert keyed(t, getattr(rt, name)) == keyed(c, getattr(rc, name)), name
        # ready times on each program's own origin (its first occurrence's issue time)
        origin_t, origin_c = int(rt.ready_ns.min()), int(rc.ready_ns.min())
        assert keyed(t, rt.ready_ns - origin_t) == keyed(c, rc.ready_ns - origin_c)


def test_compile_order_canonical_round_trips_through_expand_and_verify_commitments(tmp_path):
    doc = schedule_trace(
        4, [[0, 1], [2, 3], [0, 2], [1, 3]], [("c", 0, 64), ("c", 1, 64), ("c", 2, 4096),
                                              ("c", 3, 4096)], 12, seed=5
    )  # fmt: skip
    source = write_doc(doc, tmp_path / "source.json")
    canary, expanded = tmp_path / "canary.json", tmp_path / "expanded.json"
    for argv in (
        ["compile", str(source), "--lossless", "--order", "canonical", "-o", str(canary)],
        ["verify-commitments", str(source), str(canary)],
        ["expand", str(canary), "-o", str(expanded)],
        ["verify-commitments", str(expanded), str(canary)],  # expand gives back the source
    ):
        run = subprocess.run([*CLI, *argv], capture_output=True, text=True, cwd=REPO)
        assert run.returncode == 0, (argv, run.stderr[-2000:])
    assert json.loads(canary.read_text())["source"]["occurrence_order"] == "canonical"
    notes = " ".join(json.loads(expanded.read_text())["meta"]["notes"])
    assert "with --order canonical to get the canary's source back" in notes


@pytest.mark.slow
def test_a_live_tp_x_fsdp2_capture_repeats_in_canonical_order_and_search_reduces_it(tmp_path):
    """A real 4-rank DTensor TP x FSDP2 program (gloo, 2x2 mesh), recorded unmodified:
    its DP and TP groups interleave by timing, so its time order barely repeats; in the
    canonical order every occurrence lies in a repeated record and the search finds a
    canary smaller than the time order's."""
    out = tmp_path / "capture"
    program = REPO / "examples" / "user_programs" / "tp_fsdp2_train.py"
    run = subprocess.run(
        [*CLI, "capture", "-o", str(out), "--timeout", "240", "--", sys.executable,
         str(program), "24"],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    merged = out / "merged.jsonl.gz"
    with gzip.open(merged, "rt") as lines:
        assert len(json.loads(lines.readline())["groups"]) >= 5  # world, 2 x dp, 2 x tp
    time_order = repetition_profile(load_program(merged, order="time"))
    canonical = repetition_profile(load_program(merged, order="canonical"))
    assert canonical.repeated_within_groups == time_order.repeated_within_groups
    assert canonical.records <= 3 < time_order.records
    assert canonical.repeated >= 0.95 * canonical.occurrences > time_order.repeated
    sizes = {}
    for order in ("time", "canonical"):
        canary, log = tmp_path / f"{order}.json", tmp_path / f"{order}-log.json"
        run = subprocess.run(
            [*CLI, "search", str(merged), "--order", order, "--budgets", "0,4,64",
             "--backends", str(REPO / "config" / "backends.yaml"), "-o", str(canary),
             "--log", str(log), "--quiet"],
            capture_output=True, text=True, timeout=600, cwd=REPO,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr[-3000:]
        doc = json.loads(canary.read_text())
        assert doc["claim"] == "verified"
        sizes[order] = (canary.stat().st_size, len(doc["structure"]["records"]))
    assert sizes["canonical"][1] < sizes["time"][1]
    assert sizes["canonical"][0] < sizes["time"][0]


@pytest.mark.parametrize("order", ["time", "canonical"])
def test_compile_declares_the_order_it_was_given(tmp_path, order):
    doc = schedule_trace(4, [[0, 1], [2, 3]], [("c", 0, 64), ("c", 1, 64)], 6, seed=1)
    source = write_doc(doc, tmp_path / "s.json")
    run = subprocess.run(
        [*CLI, "compile", str(source), "--lossless", "--order", order, "-o",
         str(tmp_path / "c.json")],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert declared_order(json.loads((tmp_path / "c.json").read_text())) == order


def test_an_unknown_order_is_refused_with_one_line_and_exit_2(tmp_path):
    source = write_doc(schedule_trace(2, [[0, 1]], [("c", 0, 64)], 2, seed=1), tmp_path / "s.json")
    run = subprocess.run(
        [*CLI, "compile", str(source), "--lossless", "--order", "random", "-o",
         str(tmp_path / "c.json")],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    assert run.returncode == 2
    assert "--order" in run.stderr and not (tmp_path / "c.json").exists()


def test_the_canary_and_config_schemas_name_the_orders_of_the_vocabulary():
    from tracecanary.formats.schemas import load_schema
    from tracecanary.formats.vocab import OCCURRENCE_ORDERS

    source = load_schema("canary")["properties"]["source"]["properties"]
    assert tuple(source["occurrence_order"]["enum"]) == OCCURRENCE_ORDERS
    search = load_schema("config")["properties"]["search"]["properties"]
    assert tuple(search["order"]["enum"]) == OCCURRENCE_ORDERS
    assert search["order"]["default"] == "time"


def test_a_time_order_canary_with_a_negative_gap_is_refused_by_the_schema(tmp_path):
    from tracecanary.errors import SchemaError

    doc = schedule_trace(2, [[0, 1]], [("c", 0, 64)], 3, seed=2)
    canary = compile_program(_load(tmp_path, doc, "x", "time"))
    canary["timing"]["gap"]["values"] = [{"values": [0, -1, 5]}]
    with pytest.raises(SchemaError):
        validate_canary(canary)
    canary["source"]["occurrence_order"] = "canonical"  # declared: signed gaps are allowed
    validate_canary(canary)
