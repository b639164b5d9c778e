"""Clock calibration derived from the trace (``tracecanary calibrate-clocks``), tested
against the ``synth decode`` generator's truth: its calibration states the exact host
offsets (and drifts) that placed every timestamp and end time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracecanary.cli import main
from tracecanary.clocks.derive import calibrate_captures
from tracecanary.formats.schemas import validate
from tracecanary.synth.decode import DecodeSpec, build_decode
from tracecanary.trace_io import write_trace

SMALL = dict(layers=2, hidden=256, requests=2, prompt_tokens=64, tail_windows=1)


def write_captures(directory: Path, spec: DecodeSpec) -> tuple[list[str], dict]:
    docs, truth = build_decode(spec)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank, doc in enumerate(docs):
        path = directory / f"rank{rank}.json"
        write_trace(doc, path)
        paths.append(str(path))
    return paths, truth


def true_offset_at(entry: dict, anchor_ns: int) -> float:
    """The true mapping's offset at local time ``anchor_ns`` (ref = local + offset)."""
    return entry["offset_ns"] + entry["drift_ppb"] * (anchor_ns - entry["anchor_ns"]) / 1e9


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    hosts=st.integers(2, 4),
    ranks_per_host=st.integers(1, 2),
    offsets=st.lists(st.integers(-(10**10), 10**10), min_size=4, max_size=4),
    seed=st.integers(0, 2**32 - 1),
    events=st.integers(120, 400),
)
def test_true_offset_lies_inside_every_derived_interval(
    tmp_path_factory, hosts, ranks_per_host, offsets, seed, events
):
    spec = DecodeSpec(
        ranks=hosts * ranks_per_host,
        ranks_per_host=ranks_per_host,
        events_per_rank=events,
        seed=seed,
        host_offsets_ns=tuple([0] + offsets[1:hosts]),
        **SMALL,
    )
    paths, truth = write_captures(tmp_path_factory.mktemp("offsets"), spec)
    derived = calibrate_captures(paths, drift="none")
    validate(derived, "calibration", file="derived")
    assert derived["reference"] == truth["reference"]
    true_by_clock = {c["clock"]: c["offset_ns"] for c in truth["clocks"]}
    assert {c["clock"] for c in derived["clocks"]} == set(true_by_clock)
    for clock in derived["clocks"]:
        lo, hi = clock["offset_interval_ns"]
        true = true_by_clock[clock["clock"]]
        assert lo <= true <= hi
        assert abs(clock["offset_ns"] - true) <= clock["uncertainty_ns"]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    offset=st.integers(-(10**9), 10**9),
    drift_ppb=st.floats(-50_000, 50_000).filter(lambda d: abs(d) > 1),
    seed=st.integers(0, 2**32 - 1),
)
def test_true_offset_and_drift_lie_inside_derived_intervals(
    tmp_path_factory, offset, drift_ppb, seed
):
    spec = DecodeSpec(
        ranks=4,
        ranks_per_host=2,
        events_per_rank=600,
        seed=seed,
        host_offsets_ns=(0, offset),
        host_drift_ppb=(0.0, drift_ppb),
        **SMALL,
    )
    paths, truth = write_captures(tmp_path_factory.mktemp("drift"), spec)
    derived = calibrate_captures(paths, drift="fit")
    validate(derived, "calibration", file="derived")
    hostb = next(c for c in derived["clocks"] if c["clock"] == "hostb")
    true_b = next(c for c in truth["clocks"] if c["clock"] == "hostb")
    lo, hi = hostb["offset_interval_ns"]
    assert lo <= true_offset_at(true_b, hostb["anchor_ns"]) <= hi
    klo, khi = hostb["drift_interval_ppb"]
    assert klo <= true_b["drift_ppb"] <= khi
    assert any("linear drift fitted" in n for n in derived["notes"])


def test_derived_interval_narrows_as_the_capture_grows(tmp_path):
    # rare stragglers (one in 1500 collectives) are what tighten the host-a side
    spec = DecodeSpec(ranks=4, ranks_per_host=2, events_per_rank=20_000, seed=7, **SMALL)
    docs, truth = build_decode(spec)
    true_b = next(c["offset_ns"] for c in truth["clocks"] if c["clock"] == "hostb")
    widths = []
    for keep in (50, 1000, 5000, 20_000):
        paths = []
        for rank, doc in enumerate(docs):
            path = tmp_path / f"k{keep}" / f"rank{rank}.json"
            path.parent.mkdir(exist_ok=True)
            write_trace({**doc, "events": doc["events"][:keep]}, path)
            paths.append(str(path))
        clock = next(
            c for c in calibrate_captures(paths, drift="none")["clocks"] if c["clock"] == "hostb"
        )
        lo, hi = clock["offset_interval_ns"]
        assert lo <= true_b <= hi
        widths.append(hi - lo)
    assert widths == sorted(widths, reverse=True)  # a longer prefix only adds constraints
    assert widths[-1] < widths[0]


def _p2p_trace(path: Path, rank: int, clock: str, events: list[dict]) -> str:
    doc = {
        "format": "tracecanary.trace/v1",
        "meta": {
            "world_size": 2,
            "source": "hand-made",
            "clock_domains": [{"id": clock, "ranks": [rank]}],
        },
        "groups": [{"id": "world", "ranks": [0, 1]}],
        "events": events,
    }
    path.write_text(json.dumps(doc))
    return str(path)


def test_impossible_ordering_on_one_clock_is_refused_naming_both_events(tmp_path, capsys):
    # rank 1 receives (and completes) before rank 0 started sending, on one shared clock
    common = {"seq": 0, "bytes": 8, "dtype": "float32", "group": "world"}
    send = {**common, "rank": 0, "op": "send", "peer": 1}
    recv = {**common, "rank": 1, "op": "recv", "peer": 0}
    a = _p2p_trace(tmp_path / "r0.json", 0, "node", [{**send, "ts_ns": 5_000, "latency_ns": 10}])
    b = _p2p_trace(tmp_path / "r1.json", 1, "node", [{**recv, "ts_ns": 1_000, "latency_ns": 10}])
    out = tmp_path / "clocks.json"
    assert main(["calibrate-clocks", a, b, "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "impossible ordering" in err[0]
    assert "rank 1 seq 0 (recv" in err[0] and "rank 0 seq 0 (send" in err[0]
    assert "ranks 1,0" in err[0]
    assert not out.exists()


def test_contradicting_clocks_are_refused_naming_the_events_of_the_cycle(tmp_path, capsys):
    # 0 -> 1 says clock b is at least 1 ms ahead of a; 1 -> 0 says it is at least 1 ms behind
    def ev(rank, seq, op, peer, ts):
        return {
            "rank": rank,
            "seq": seq,
            "op": op,
            "peer": peer,
            "bytes": 8,
            "dtype": "float32",
            "group": "world",
            "ts_ns": ts,
            "latency_ns": 100,
        }

    a = _p2p_trace(
        tmp_path / "r0.json",
        0,
        "a",
        [ev(0, 0, "send", 1, 1_000_000), ev(0, 1, "recv", 1, 3_000_000)],
    )
    b = _p2p_trace(
        tmp_path / "r1.json",
        1,
        "b",
        [ev(1, 0, "recv", 0, 2_000_000), ev(1, 1, "send", 0, 5_000_000)],
    )
    out = tmp_path / "clocks.json"
    assert main(["calibrate-clocks", a, b, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no clock offsets satisfy" in err
    assert "rank 1 seq 0 (recv" in err and "rank 0 seq 0 (send" in err
    assert "rank 0 seq 1 (recv" in err and "rank 1 seq 1 (send" in err
    assert not out.exists()


def test_captures_without_end_times_are_refused_saying_so(tmp_path, capsys):
    spec = DecodeSpec(ranks=4, ranks_per_host=2, events_per_rank=150, seed=3, **SMALL)
    docs, _ = build_decode(spec)
    paths = []
    for rank, doc in enumerate(docs):
        events = [{k: v for k, v in e.items() if k != "latency_ns"} for e in doc["events"]]
        path = tmp_path / f"rank{rank}.json"
        write_trace({**doc, "events": events}, path)
        paths.append(str(path))
    out = tmp_path / "clocks.json"
    assert main(["calibrate-clocks", *paths, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no event carries an end time (latency_ns)" in err
    assert not out.exists()


def test_unconnected_clocks_are_named_left_unknown_and_refused_by_merge(tmp_path, capsys):
    # ranks 0,1 (hosts a, b) talk to each other; ranks 2,3 (hosts c, d) only to each other
    def trace(rank, clock, events):
        doc = {
            "format": "tracecanary.trace/v1",
            "meta": {
                "world_size": 4,
                "source": "hand-made",
                "clock_domains": [{"id": clock, "ranks": [rank]}],
            },
            "groups": [{"id": "ab", "ranks": [0, 1]}, {"id": "cd", "ranks": [2, 3]}],
            "events": events,
        }
        path = tmp_path / f"rank{rank}.json"
        path.write_text(json.dumps(doc))
        return str(path)

    def ar(rank, group, ts):
        return {
            "rank": rank,
            "seq": 0,
            "op": "all_reduce",
            "bytes": 64,
            "dtype": "float32",
            "group": group,
            "ts_ns": ts,
            "latency_ns": 5_000,
        }

    paths = [
        trace(0, "a", [ar(0, "ab", 10_000)]),
        trace(1, "b", [ar(1, "ab", 11_000)]),
        trace(2, "c", [ar(2, "cd", 10_000)]),
        trace(3, "d", [ar(3, "cd", 10_500)]),
    ]
    out = tmp_path / "clocks.json"
    assert main(["calibrate-clocks", *paths, "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    validate(doc, "calibration", file=str(out))
    assert [c["clock"] for c in doc["clocks"]] == ["a", "b"]
    assert [u["clock"] for u in doc["unknown_clocks"]] == ["c", "d"]
    assert "not connected to reference 'a'" in doc["unknown_clocks"][0]["reason"]
    assert "clock c: UNKNOWN" in capsys.readouterr().err
    merged = tmp_path / "merged.json"
    assert main(["merge", *paths, "--calibration", str(out), "-o", str(merged)]) == 2
    err = capsys.readouterr().err
    assert "leaves clock 'c' unknown" in err and "calibrate-clocks" in err
    assert not merged.exists()


def test_merge_consumes_a_derived_calibration_and_declares_its_uncertainty(tmp_path):
    spec = DecodeSpec(ranks=4, ranks_per_host=2, events_per_rank=300, seed=11, **SMALL)
    paths, _ = write_captures(tmp_path / "caps", spec)
    clocks = tmp_path / "clocks.json"
    assert main(["calibrate-clocks", *paths, "-o", str(clocks)]) == 0
    derived = json.loads(clocks.read_text())
    merged = tmp_path / "merged.json"
    assert main(["merge", *paths, "--calibration", str(clocks), "-o", str(merged)]) == 0
    skew = json.loads(merged.read_text())["meta"]["skew"]
    assert skew["status"] == "known" and skew["method"] == "derived-causality"
    top_two = sorted((c["uncertainty_ns"] for c in derived["clocks"]), reverse=True)[:2]
    assert skew["uncertainty_ns"] == sum(top_two) > 0
    validate(json.loads(merged.read_text()), "trace", file=str(merged))


@pytest.mark.parametrize("mode", ["none", "fit"])
def test_derived_calibration_is_the_same_bytes_twice(tmp_path, mode):
    spec = DecodeSpec(ranks=4, ranks_per_host=2, events_per_rank=200, seed=5, **SMALL)
    paths, _ = write_captures(tmp_path / "caps", spec)
    outs = []
    for k in range(2):
        out = tmp_path / f"c{k}.json"
        assert main(["calibrate-clocks", *paths, "--drift", mode, "-o", str(out)]) == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


def test_auto_drift_reads_the_capture_length_on_one_clock_not_the_offsets(tmp_path):
    # hosts 30 s apart, a capture of well under a second: offsets only
    spec = DecodeSpec(ranks=4, ranks_per_host=2, events_per_rank=200, seed=9, **SMALL)
    spec = DecodeSpec(**{**spec.__dict__, "host_offsets_ns": (0, 30_000_000_000)})
    paths, truth = write_captures(tmp_path, spec)
    derived = calibrate_captures(paths)
    assert any(n.startswith("drift assumed zero: the capture spans 0.") for n in derived["notes"])
    hostb = next(c for c in derived["clocks"] if c["clock"] == "hostb")
    lo, hi = hostb["offset_interval_ns"]
    assert lo <= -30_000_000_000 <= hi and hostb["drift_ppb"] == 0
