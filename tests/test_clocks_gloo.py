"""Derived calibration of a real multi-process capture: 3 torch.distributed (gloo)
processes run blocking collectives and send/recv, each recording every op's issue time
and duration on CLOCK_MONOTONIC (one clock on this host, so every true offset is 0).
Each rank declares its own clock domain and ranks 1 and 2 are shifted by known amounts:
the derived bounds must contain the shifts."""

from __future__ import annotations

import json
import multiprocessing as mp
import time
from pathlib import Path

import pytest

from tracecanary.cli import main
from tracecanary.formats.schemas import validate

pytestmark = pytest.mark.slow

WORLD = 3
ITERATIONS = 40
SHIFT_NS = {0: 0, 1: 7_300_000_123, 2: 2_100_000_777}  # added to each rank's timestamps


def _rank_main(rank: int, init_method: str, out_dir: str) -> None:
    import datetime
    import random

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=init_method,
        rank=rank,
        world_size=WORLD,
        timeout=datetime.timedelta(seconds=120),
    )
    jitter = random.Random(rank)
    events: list[dict] = []

    def timed(op: str, call, nbytes: int, **fields) -> None:
        start = time.monotonic_ns()
        call()
        end = time.monotonic_ns()
        events.append(
            {
                "rank": rank,
                "seq": len(events),
                "op": op,
                "bytes": nbytes,
                "dtype": "float32",
                "group": "world",
                "ts_ns": start + SHIFT_NS[rank],
                "latency_ns": end - start,
                **fields,
            }
        )

    x = torch.ones(256)
    dist.barrier()
    for _ in range(ITERATIONS):
        time.sleep(jitter.random() * 0.002)  # vary who arrives last
        timed("all_reduce", lambda: dist.all_reduce(x), x.numel() * 4)
        time.sleep(jitter.random() * 0.002)
        timed("broadcast", lambda: dist.broadcast(x, src=0), x.numel() * 4, root=0)
        out = [torch.empty(256) for _ in range(WORLD)]
        timed("all_gather", lambda out=out: dist.all_gather(out, x), x.numel() * 4 * WORLD)
        time.sleep(jitter.random() * 0.002)
        if rank < WORLD - 1:
            timed("send", lambda: dist.send(x, dst=rank + 1), x.numel() * 4, peer=rank + 1)
        if rank > 0:
            timed("recv", lambda: dist.recv(x, src=rank - 1), x.numel() * 4, peer=rank - 1)
    dist.barrier()
    dist.destroy_process_group()
    doc = {
        "format": "tracecanary.trace/v1",
        "meta": {
            "world_size": WORLD,
            "source": f"test_clocks_gloo rank {rank}",
            "clock_domains": [{"id": f"clock{rank}", "ranks": [rank]}],
        },
        "groups": [{"id": "world", "ranks": list(range(WORLD))}],
        "events": events,
    }
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(doc))


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> list[str]:
    out = tmp_path_factory.mktemp("gloo_clocks")
    init = f"file://{out / 'rendezvous'}"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_rank_main, args=(r, init, str(out))) for r in range(WORLD)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=180)
        assert p.exitcode == 0
    return [str(out / f"rank{r}.json") for r in range(WORLD)]


def test_real_gloo_capture_recovers_known_clock_shifts_within_their_bounds(captures, tmp_path):
    out = tmp_path / "clocks.json"
    assert main(["calibrate-clocks", *captures, "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    validate(doc, "calibration", file=str(out))
    assert doc["reference"] == "clock0" and "unknown_clocks" not in doc
    for clock in doc["clocks"]:
        rank = int(clock["clock"].removeprefix("clock"))
        lo, hi = clock["offset_interval_ns"]
        assert lo <= -SHIFT_NS[rank] <= hi
        assert abs(clock["offset_ns"] + SHIFT_NS[rank]) <= clock["uncertainty_ns"]
        assert clock["uncertainty_ns"] < 20_000_000  # bounded by real collectives
        if rank:
            assert clock["constraints"] > 0 and clock["binding"]
    merged = tmp_path / "merged.json"
    assert main(["merge", *captures, "--calibration", str(out), "-o", str(merged)]) == 0
    skew = json.loads(merged.read_text())["meta"]["skew"]
    top_two = sorted((c["uncertainty_ns"] for c in doc["clocks"]), reverse=True)[:2]
    assert skew["status"] == "known" and skew["method"] == "derived-causality"
    assert skew["uncertainty_ns"] == sum(top_two)
