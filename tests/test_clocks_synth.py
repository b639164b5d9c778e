"""The synthetic generators record each event's duration (``latency_ns``) from the model
that places the arrivals and the host clocks: on the reference timeline every member of a
collective (and both sides of a send/recv) completes at one instant, no earlier than the
last member's arrival. That is what lets a derived calibration be checked against them."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from tracecanary.synth.decode import DecodeSpec, build_decode
from tracecanary.synth.training import write_training

SMALL = dict(layers=2, hidden=256, requests=2, prompt_tokens=64, tail_windows=1)


@pytest.mark.parametrize("drift_ppb", [0.0, 30_000.0])
def test_decode_members_complete_together_on_the_reference_clock(drift_ppb):
    spec = DecodeSpec(
        ranks=4,
        ranks_per_host=2,
        events_per_rank=200,
        host_offsets_ns=(0, 123_456_789),
        host_drift_ppb=(0.0, drift_ppb),
        **SMALL,
    )
    docs, truth = build_decode(spec)
    mapping = {c["clock"]: c for c in truth["clocks"]}

    def to_reference(clock: str, local: int) -> float:
        c = mapping[clock]
        return local + c["offset_ns"] + c["drift_ppb"] * (local - c["anchor_ns"]) / 1e9

    for seq in range(len(docs[0]["events"])):
        starts, ends = [], []
        for doc in docs:
            clock = doc["meta"]["clock_domains"][0]["id"]
            event = doc["events"][seq]
            starts.append(to_reference(clock, event["ts_ns"]))
            ends.append(to_reference(clock, event["ts_ns"] + event["latency_ns"]))
        assert max(ends) - min(ends) <= 2  # one instant, up to the clocks' rounding
        assert min(ends) >= max(starts)


def test_training_members_and_send_recv_pairs_complete_together(tmp_path):
    path = tmp_path / "t.jsonl"
    write_training(path, tp=2, pp=3, dp=2, steps=2)
    lines = path.read_text().splitlines()
    occurrences: dict[tuple, list[dict]] = defaultdict(list)
    counter: dict[tuple, int] = defaultdict(int)
    for line in lines[1:]:
        event = json.loads(line)
        assert event["latency_ns"] > 0
        if event["op"] in ("send", "recv"):
            src, dst = (
                (event["rank"], event["peer"])
                if event["op"] == "send"
                else (event["peer"], event["rank"])
            )
            key = ("p2p", src, dst, event["op"])
        else:
            key = (event["group"], event["rank"])
        k = counter[key]
        counter[key] += 1
        occurrences[(key[0], key[1], key[2], k) if key[0] == "p2p" else (key[0], k)].append(event)
    assert occurrences
    for members in occurrences.values():
        ends = {e["ts_ns"] + e["latency_ns"] for e in members}
        assert len(ends) == 1
        assert min(ends) >= max(e["ts_ns"] for e in members)
