"""Ingest throughput on a 1M-event JSON Lines trace vs plain json.loads + pandas.DataFrame.

Besides the wall-clock median, the note gives the CPU seconds of one ingest (all threads:
pyarrow's parser pool, the Parquet writer thread) and the load average while it ran: on
a shared 2-core machine the wall figure moves with the load, the CPU figure much less."""

from __future__ import annotations

import json
import os

from bench.common import WORK, row, run_child


def make_input(events: int) -> str:
    from tracecanary.synth.decode import DecodeSpec, build_decode
    from tracecanary.trace_io import write_trace

    path = WORK / f"ingest_{events}.jsonl"
    if path.exists():
        return str(path)
    docs, _ = build_decode(DecodeSpec(ranks=4, events_per_rank=events // 4))
    doc = docs[0]
    doc["meta"]["clock_domains"] = [
        {"id": "hosta", "ranks": [0, 1]},
        {"id": "hostb", "ranks": [2, 3]},
    ]
    doc["meta"]["source"] = "bench: synth decode, 4 ranks in one file"
    doc["events"] = [e for d in docs for e in d["events"]]
    WORK.mkdir(parents=True, exist_ok=True)
    write_trace(doc, path)
    return str(path)


def run(quick: bool) -> list[dict]:
    events = 200_000 if quick else 1_000_000
    path = make_input(events)
    repeats = 1 if quick else 5
    ours, rss_ours = run_child(
        f"""
import json, tempfile, os, statistics, time
from bench.common import median_time
from tracecanary.ingest import ingest_files
d = tempfile.mkdtemp()
cpu = []
def once():
    start = time.process_time()
    ingest_files([{path!r}], os.path.join(d, 'x.parquet'))
    cpu.append(time.process_time() - start)
t = median_time(once, {repeats})
print(json.dumps({{'seconds': t, 'cpu_seconds': statistics.median(cpu), 'load': os.getloadavg()[0]}}))
"""
    )
    plain, rss_plain = run_child(
        f"""
import json
import pandas as pd
from bench.common import median_time
def load():
    with open({path!r}) as f:
        f.readline()
        return pd.DataFrame([json.loads(line) for line in f])
print(json.dumps({{'seconds': median_time(load, {repeats})}}))
"""
    )
    rate = events / ours["seconds"]
    return [
        row(
            f"ingest {events:,}-event JSONL (validate+normalize+Parquet)",
            round(rate),
            "events/s",
            "json.loads + pandas.DataFrame (no validation)",
            round(events / plain["seconds"]),
            round(plain["seconds"] / ours["seconds"], 2),
            ">= 1,000,000 events/s",
            rate >= 1_000_000,
            round(rss_ours, 1),
            f"comparator peak RSS {rss_plain:.0f} MiB; ingest CPU {ours['cpu_seconds']:.2f} s "
            f"per run (all threads), wall {ours['seconds']:.2f} s, load average "
            f"{ours['load']:.1f} on {os.cpu_count()} cores",
        )
    ]


if __name__ == "__main__":
    print(json.dumps(run(quick=True), indent=1))
