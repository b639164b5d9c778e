"""Scale: ~10M rank events over 1024 ranks, ingest -> compile -> verify, against the
same pipeline on ~1M rank events of the same job (cost should grow linearly).

Input: ``tracecanary synth training --tp 8 --pp 4 --dp 32`` (1024 ranks; tensor-parallel
all_gather/reduce_scatter in 128 groups of 8, pipeline send/recv over 4 stages,
data-parallel gradient buckets over groups of 32, one world all_reduce per step) with
60 steps (9,768,960 rank events, 1,731,900 occurrences) and 6 steps (976,896 events,
173,190 occurrences) for the 1M case: exactly 10x the events, so the time ratio reads
directly against the goal (<= 12 for 10x). Each case runs in its own child process, so its peak RSS is that of
the whole pipeline held in one process (the conservative figure: the CLI runs the
stages as separate processes):

1. ``ingest_files`` JSON Lines -> normalized Parquet (streamed in batches);
2. ``load_program`` of the Parquet (matching into occurrences) and ``compile_program``
   bounded at 2 us on every field (setup of the canary is part of this stage);
3. ``verify_behavior`` of that canary against the source under the 5 default
   configurations.

Quick mode runs a 1-step 1024-rank trace (~163k events) instead of the 1M case and
skips the 10M case with a row saying so.
"""

from __future__ import annotations

import json

from bench.common import row, run_child
from bench.inputs import training_trace

SHAPE = {"tp": 8, "pp": 4, "dp": 32}
STEPS_10M = 60
STEPS_1M = 6
STEPS_QUICK = 1
TARGET_RSS_MB = 8 * 1024
TARGET_RATIO = 12.0


def _child(path: str) -> str:
    return f"""
import json, os, resource, tempfile, time
def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
from tracecanary.compile.budget import parse_budget
from tracecanary.compile.canary import compile_program
from tracecanary.ingest import ingest_files
from tracecanary.load import load_program
from tracecanary.sim.backends import load_backends
from tracecanary.verify.behavior import load_tolerances, verify_behavior
out = {{}}
with tempfile.TemporaryDirectory(prefix="tracecanary-bench-scale-") as tmp:
    table = os.path.join(tmp, "trace.parquet")
    t0 = time.perf_counter()
    result = ingest_files([{path!r}], table)
    out["ingest_s"] = time.perf_counter() - t0
    out["ingest_rss_mb"] = rss()
    t0 = time.perf_counter()
    program = load_program(table)
    out["load_s"] = time.perf_counter() - t0
    out["load_rss_mb"] = rss()
    t0 = time.perf_counter()
    canary = compile_program(program, budget=parse_budget("gap=2us,overlap=2us,latency=2us,skew=2us"))
    out["compile_s"] = time.perf_counter() - t0
    out["compile_rss_mb"] = rss()
    backends = load_backends("config/backends.yaml")
    t0 = time.perf_counter()
    doc = verify_behavior(program, canary, backends, load_tolerances(None),
                          source_digest="bench", canary_digest="bench")
    out["verify_s"] = time.perf_counter() - t0
    out["verify_rss_mb"] = rss()
out.update(events=result.events, occurrences=program.n, ranks=program.world_size,
           claim=doc["claim"], failed=doc["summary"]["failed"],
           canary_bytes=canary["stats"]["bytes_canary"],
           records=canary["stats"]["records_canary"])
print(json.dumps(out))
"""


def _total(out: dict) -> float:
    return out["ingest_s"] + out["load_s"] + out["compile_s"] + out["verify_s"]


def _stages(out: dict) -> str:
    return (
        f"ingest {out['ingest_s']:.1f} s (peak {out['ingest_rss_mb']:.0f} MiB), "
        f"load+match {out['load_s']:.1f} s (peak {out['load_rss_mb']:.0f} MiB), "
        f"compile {out['compile_s']:.1f} s (peak {out['compile_rss_mb']:.0f} MiB), "
        f"verify {out['verify_s']:.1f} s (peak {out['verify_rss_mb']:.0f} MiB); "
        f"{out['occurrences']:,} occurrences, canary {out['records']:,} records / "
        f"{out['canary_bytes']:,} B, claim {out['claim']} ({out['failed']} checks failed)"
    )


def run(quick: bool) -> list[dict]:
    small_steps = STEPS_QUICK if quick else STEPS_1M
    small, small_rss = run_child(_child(str(training_trace(**SHAPE, steps=small_steps))))
    small_s = _total(small)
    rows = [
        row(
            f"pipeline {small['events']:,} rank events, {small['ranks']} ranks (training)",
            round(small_s, 1),
            "s",
            "",
            None,
            None,
            "(comparator of the 10M case)",
            "",
            round(small_rss, 1),
            f"{small['events'] / small_s:,.0f} events/s end to end; " + _stages(small),
        )
    ]
    if quick:
        rows.append(
            row(
                "pipeline ~10M rank events, 1024 ranks (training)",
                "skipped",
                "s",
                "",
                None,
                None,
                f"completes, <= {TARGET_RSS_MB} MiB, time ratio <= {TARGET_RATIO:g}",
                "",
                None,
                "skipped in quick mode (run `python -m bench --only bench_scale`)",
            )
        )
        return rows
    big, big_rss = run_child(_child(str(training_trace(**SHAPE, steps=STEPS_10M))))
    big_s = _total(big)
    ratio = big_s / small_s
    events_ratio = big["events"] / small["events"]
    rows.append(
        row(
            f"pipeline {big['events']:,} rank events, {big['ranks']} ranks (training)",
            round(big_s, 1),
            "s",
            f"the same pipeline on {small['events']:,} events (ratio = time ratio; "
            f"events ratio {events_ratio:.2f})",
            round(small_s, 1),
            round(ratio, 2),
            f"completes, <= {TARGET_RSS_MB} MiB peak, time ratio <= {TARGET_RATIO:g}",
            bool(big_rss <= TARGET_RSS_MB and ratio <= TARGET_RATIO),
            round(big_rss, 1),
            f"{big['events'] / big_s:,.0f} events/s end to end; "
            f"time ratio per event {ratio / events_ratio:.2f}; " + _stages(big),
        )
    )
    return rows


if __name__ == "__main__":
    print(json.dumps(run(quick=True), indent=1))
