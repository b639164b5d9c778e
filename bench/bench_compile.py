"""Compile throughput and memory: bounded vs lossless on a ~1M-occurrence program.

The input is ``tracecanary.synth.examples.decode_like_program`` (8 ranks, 32 layers +
1 all_gather per decode step, seeded jitter, rare slow steps), built in the child
and pickled by a first child; each case's child loads it before the clock starts, so
peak RSS includes the loaded program (its footprint is in the notes). Wall and CPU
seconds are both reported (the machine may be shared). Target (issue 4 / brief): bounded compile of 1M
occurrences in <= 20 s with <= 2 GiB peak RSS. The reference implementation compiles
at about 3 ms per event (DESIGN.md; not measured here)."""

from __future__ import annotations

import json

from bench.common import WORK, row, run_child

BUDGET = "skew=2us,overlap=5us,gap=5us,latency=5us"


def make_input(steps: int, jitter_ns: int) -> str:
    """Build the program once (its generation has its own memory peak) and pickle it."""
    path = WORK / f"compile_decode_{steps}_{jitter_ns}.pickle"
    if not path.exists():
        run_child(
            f"""
import json, pickle
from tracecanary.synth.examples import decode_like_program
program = decode_like_program({steps}, layers=32, world_size=8, jitter_ns={jitter_ns}, tail_every=997)
open({str(path)!r}, "wb").write(pickle.dumps(program, protocol=5))
print(json.dumps({{}}))
"""
        )
    return str(path)


def _child(path: str, mode: str) -> str:
    return f"""
import json, pickle, resource, time
from tracecanary.canonical import canonical_json_bytes
from tracecanary.compile import compile_program, parse_budget
program = pickle.loads(open({path!r}, "rb").read())
base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
budget = None if {mode!r} == "lossless" else parse_budget({BUDGET!r})
t0, c0 = time.perf_counter(), time.process_time()
canary = compile_program(program, budget=budget)
size = len(canonical_json_bytes(canary))
seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({{"seconds": seconds, "cpu_seconds": cpu, "occurrences": program.n,
                  "events": len(program.members), "program_rss_mb": base_rss,
                  "stats": canary["stats"], "size": size}}))
"""


def run(quick: bool) -> list[dict]:
    steps = 3_000 if quick else 30_303  # 33 occurrences per step: ~100k / ~1M occurrences
    rows = []
    results = {}
    for mode, jitter in (("bounded", 2_000), ("lossless", 2_000), ("bounded-harsh", 20_000)):
        WORK.mkdir(parents=True, exist_ok=True)
        out, rss = run_child(
            _child(make_input(steps, jitter), "lossless" if mode == "lossless" else "bounded")
        )
        results[mode] = (out, rss)
    lossless_s = results["lossless"][0]["seconds"]
    for mode, (out, rss) in results.items():
        st = out["stats"]
        n = out["occurrences"]
        rate = n / out["seconds"]
        target = (
            "<= 20 s and <= 2048 MiB (1M occurrences)"
            if mode.startswith("bounded")
            else "(comparator)"
        )
        met = (out["seconds"] <= 20 and rss <= 2048) if mode.startswith("bounded") else ""
        if quick and mode.startswith("bounded"):
            met = f"{met} (quick size)"
        rows.append(
            row(
                f"compile {mode} ({n:,} occurrences, {out['events']:,} member events, jitter {2000 if mode != 'bounded-harsh' else 20000} ns)",
                round(out["seconds"], 2),
                "s",
                "lossless compile of the same program" if mode != "lossless" else "",
                round(lossless_s, 2) if mode != "lossless" else "",
                round(lossless_s / out["seconds"], 2) if mode != "lossless" else "",
                target,
                met,
                round(rss, 1),
                f"{rate:,.0f} occurrences/s wall; CPU {out['cpu_seconds']:.1f} s; "
                f"program loaded: {out['program_rss_mb']:.0f} MiB RSS; "
                f"records {st['records_canary']:,} (event compression {st['event_compression']}x); "
                f"bytes {st['bytes_canary']:,} vs source {st['bytes_source']:,} "
                f"(byte compression {st['byte_compression']}x, compressed={st['compressed']}); "
                f"issue drift max {st['gap_issue_drift_max_ns']} ns",
            )
        )
    return rows


if __name__ == "__main__":
    print(json.dumps(run(quick=True), indent=1))
