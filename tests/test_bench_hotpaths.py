"""Hot paths vectorized for the benchmarks keep their exact results: ingest's per-rank
issue-time and order checks, the simulator's correctly rounded sums, the verifier's tail
recall. Each is compared with a plain per-event reference written here."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracecanary import ingest
from tracecanary.errors import InputError
from tracecanary.sim.metrics import fsum_weighted, fsum_weights, tail_events, weighted_quantiles
from tracecanary.verify.behavior import tail_recall

# ---------------------------------------------------------------- ingest issue times

_event = st.fixed_dictionaries(
    {
        "rank": st.integers(0, 3),
        "seq_step": st.sampled_from([1, 1, 1, 2, 0]),  # 0: a repeated seq (refused)
        "step": st.integers(0, 40),
        "ts": st.sampled_from(["ts", "ts", "gap", "both", "both_wrong", "ts_back"]),
    }
)


def _trace(draws: list[dict]) -> tuple[list[dict], dict[int, int]]:
    events, seq, clock = [], {r: -1 for r in range(4)}, {r: 10_000 for r in range(4)}
    for d in draws:
        r = d["rank"]
        seq[r] += d["seq_step"] if seq[r] >= 0 else 1
        clock[r] += d["step"]
        e = {"rank": r, "seq": seq[r], "op": "all_reduce", "bytes": 8, "dtype": "f", "group": "w"}
        if d["ts"] in ("ts", "both", "both_wrong"):
            e["ts_ns"] = clock[r]
        if d["ts"] == "ts_back":
            e["ts_ns"] = clock[r] - 500
        if d["ts"] in ("gap", "both"):
            e["gap_ns"] = d["step"]
        if d["ts"] == "both_wrong":
            e["gap_ns"] = d["step"] + 1
        events.append(e)
    return events, clock


def _reference(events: list[dict]):
    """Per-event scan: ("ok", issue per event) or ("refuse", record, field), the fault
    of the lowest rank that has one, in check order seq, ts_ns, gap_ns (one batch)."""
    state: dict[int, tuple[int, int, bool]] = {}
    issue = []
    faults: dict[int, list[tuple[int, str]]] = {}
    for i, e in enumerate(events):
        r = e["rank"]
        last_seq, last_issue, seen = state.get(r, (-1, 0, False))
        if e["seq"] <= last_seq:
            faults.setdefault(r, []).append((i, "seq"))
        if "ts_ns" in e:
            now = e["ts_ns"]
            if seen and now < last_issue:
                faults.setdefault(r, []).append((i, "ts_ns"))
            if seen and "gap_ns" in e and e["gap_ns"] != now - last_issue:
                faults.setdefault(r, []).append((i, "gap_ns"))
        else:
            now = last_issue + e["gap_ns"]
        issue.append(now)
        state[r] = (e["seq"], now, True)
    if faults:
        r = min(faults)
        order = {"seq": 0, "ts_ns": 1, "gap_ns": 2}
        record, field = min(faults[r], key=lambda f: (order[f[1]], f[0]))
        return ("refuse", record, field)
    return ("ok", issue)


def _write(tmp_path, events: list[dict]):
    path = tmp_path / "t.jsonl"
    header = {
        "format": "tracecanary.trace/v1",
        "meta": {"world_size": 4, "source": "t", "clock_domains": [{"id": "c", "ranks": [0, 1, 2, 3]}]},
        "groups": [{"id": "w", "ranks": [0, 1, 2, 3]}],
    }  # fmt: skip
    path.write_text("\n".join(json.dumps(x) for x in [header, *events]) + "\n")
    return path


@settings(max_examples=200, deadline=None)
@given(
    draws=st.lists(_event, min_size=1, max_size=40),
    gaps_only=st.booleans(),
    batch_bytes=st.sampled_from([ingest.BATCH_BYTES, 300, 900]),
)
def test_ingest_issue_times_and_first_refusal_match_a_per_event_scan(
    tmp_path_factory, draws, gaps_only, batch_bytes
):
    """One batch: the same verdict, record and field as the scan. Several batches (small
    batch size, so ranks carry state across batch boundaries): refused exactly when the
    scan finds a fault (the record named when it is the only one), else the same
    issue times."""
    tmp_path = tmp_path_factory.mktemp("ingest")
    if gaps_only:  # one timing semantics: gaps
        draws = [{**d, "ts": "gap"} for d in draws]
    elif any(d["ts"] == "gap" for d in draws):  # mixed: every event needs its own gap
        draws = [{**d, "ts": "both" if d["ts"] in ("ts", "gap") else d["ts"]} for d in draws]
    events, _ = _trace(draws)
    expected = _reference(events)
    path = _write(tmp_path, events)
    out = tmp_path / "t.parquet"
    single = batch_bytes >= path.stat().st_size
    original = ingest.BATCH_BYTES
    ingest.BATCH_BYTES = batch_bytes
    try:
        ingest.ingest_files([str(path)], out)
    except InputError as err:
        assert expected[0] == "refuse", err.one_line()
        if single or _fault_count(events) == 1:
            assert (err.record, err.field) == expected[1:], err.one_line()
        assert not out.exists()
        return
    finally:
        ingest.BATCH_BYTES = original
    assert expected[0] == "ok", expected
    assert pq.read_table(out)["issue_ns"].to_pylist() == expected[1]


def _fault_count(events: list[dict]) -> int:
    """How many events the scan would refuse if each were checked on its own."""
    count, state = 0, {}
    for e in events:
        last_seq, last_issue, seen = state.get(e["rank"], (-1, 0, False))
        now = e.get("ts_ns", last_issue + e.get("gap_ns", 0))
        bad = e["seq"] <= last_seq
        if "ts_ns" in e and seen:
            bad |= now < last_issue or ("gap_ns" in e and e["gap_ns"] != now - last_issue)
        count += bad
        state[e["rank"]] = (e["seq"], now, True)
    return count


def test_ingest_carries_rank_state_across_batches(tmp_path, monkeypatch):
    """Small batches: each rank's last seq and issue time cross batch boundaries."""
    monkeypatch.setattr(ingest, "BATCH_BYTES", 400)
    rng = np.random.default_rng(3)
    events, clock = [], {r: 0 for r in range(4)}
    for i in range(300):
        r = int(rng.integers(0, 4))
        gap = int(rng.integers(0, 100))
        clock[r] += gap
        e = {"rank": r, "seq": i, "op": "all_reduce", "bytes": 8, "dtype": "f", "group": "w"}
        e["gap_ns"] = gap
        events.append(e)
    path = _write(tmp_path, events)
    ingest.ingest_files([str(path)], tmp_path / "t.parquet")
    assert pq.read_table(tmp_path / "t.parquet")["issue_ns"].to_pylist() == _reference(events)[1]
    # a backwards seq far from the start, in a later batch, is still found and located
    events[250]["seq"] = 1
    path = _write(tmp_path, events)
    with pytest.raises(InputError) as err:
        ingest.ingest_files([str(path)], tmp_path / "u.parquet")
    assert (err.value.record, err.value.field) == (250, "seq")


# ---------------------------------------------------------------- correctly rounded sums

_ints = st.lists(st.integers(-(2**62), 2**62), max_size=60)


@settings(max_examples=300, deadline=None)
@given(values=_ints, data=st.data())
def test_fsum_fast_path_equals_math_fsum(values, data):
    n = len(values)
    weights = data.draw(
        st.one_of(
            st.just([1.0] * n),
            st.lists(st.integers(1, 2**40).map(float), min_size=n, max_size=n),
            st.lists(st.floats(0.01, 1e6), min_size=n, max_size=n),
        )
    )
    v = np.asarray(values, dtype=np.int64)
    w = np.asarray(weights, dtype=np.float64)
    expected = math.fsum((w * v.astype(np.float64)).tolist())
    assert fsum_weighted(v, w) == expected
    assert fsum_weights(w) == math.fsum(w.tolist())


# ---------------------------------------------------------------- tail recall


@settings(max_examples=200, deadline=None)
@given(
    # occurrence ids are unique, as in every program (a repeated id has no one latency)
    pairs=st.lists(
        st.tuples(st.integers(0, 30), st.integers(0, 50)), max_size=40, unique_by=lambda p: p[0]
    ),
    tails=st.lists(st.integers(0, 35), max_size=12),
)
def test_tail_recall_equals_a_dict_lookup(pairs, tails):
    ids = np.asarray([p[0] for p in pairs], dtype=np.int64)
    lat = np.asarray([p[1] for p in pairs], dtype=np.int64)
    got = tail_recall((ids, lat), (ids, lat), tails)
    if not tails:
        assert got == 1.0
        return
    k = max(10, math.ceil(0.01 * lat.size))
    threshold = np.sort(lat)[-min(k, lat.size)] if lat.size else 0
    by_id = dict(zip(ids.tolist(), lat.tolist(), strict=True))
    assert got == sum(1 for t in tails if t in by_id and by_id[t] >= threshold) / len(tails)


# ---------------------------------------------------------------- quantiles and tail events


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(st.integers(0, 2**40), min_size=1, max_size=80)
    | st.lists(st.integers(0, 3), min_size=1, max_size=80),
    qs=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=5),
)
def test_unit_weight_quantiles_equal_the_weighted_inverted_cdf(values, qs):
    """Selection (unit weights) and the cumulative-weight search give the same sample."""
    v = np.asarray(values, dtype=np.int64)
    order = np.argsort(v, kind="stable")
    cumulative = np.cumsum(np.ones(v.size)[order])
    expected = [
        int(v[order][min(int(np.searchsorted(cumulative, q * cumulative[-1])), v.size - 1)])
        for q in qs
    ]
    assert weighted_quantiles(v, np.ones(v.size), qs) == expected


@settings(max_examples=200, deadline=None)
@given(latency=st.lists(st.integers(0, 6), min_size=1, max_size=300), seed=st.integers(0, 9))
def test_tail_events_are_the_top_k_by_latency_then_occurrence(latency, seed):
    n = len(latency)
    lat = np.asarray(latency, dtype=np.int64)
    occ = np.random.default_rng(seed).permutation(n).astype(np.int64)
    zeros = np.zeros(n, dtype=np.int64)
    prep = SimpleNamespace(n=n, occ=occ, op_names=["x"], op_code=zeros, bytes=zeros,
                           group_names=["g"], group_code=zeros, phase_names=["p"],
                           phase_code=zeros)  # fmt: skip
    result = SimpleNamespace(latency_ns=lat, queue_wait_ns=zeros, hidden_ns=zeros)
    k = min(n, max(10, -(-n // 100)))
    expected = sorted(range(n), key=lambda i: (-lat[i], occ[i]))[:k]
    assert [e["occ"] for e in tail_events(prep, result)] == [int(occ[i]) for i in expected]
