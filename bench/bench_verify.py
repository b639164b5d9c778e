"""verify-behavior on a 1M-occurrence decode trace under the 5 default configurations,
against the five replays alone (prepare + simulate of the source, no metrics).

Input: ``tracecanary synth decode --ranks 4 --ranks-per-host 4 --events-per-rank 1000000``
(4M rank events, ~1M occurrences, one clock domain so skew is known), ingested and
matched once (cached). The canary verified is the bounded compile at 2 us on every
timing field (the campaign's tightest budget); compiling it is setup, not timed here
(bench_compile times compile). What is timed is ``verify_behavior`` as the CLI runs it:
expand the canary, recompute every commitment against the source, replay source and
canary under every configuration, compare every metric, tail recall and ranking."""

from __future__ import annotations

import json

from bench.common import row, run_child
from bench.inputs import LOAD_PROGRAM, decode_program

BUDGET = "gap=2us,overlap=2us,latency=2us,skew=2us"
TARGET_S = 30.0


def _child(path: str, repeats: int) -> str:
    return f"""
import json, time
{LOAD_PROGRAM.format(path=path)}
from bench.common import median_time
from tracecanary.compile.budget import parse_budget
from tracecanary.compile.canary import compile_program
from tracecanary.sim.backends import load_backends
from tracecanary.sim.report import run_configs
from tracecanary.verify.behavior import load_tolerances, verify_behavior

backends = load_backends("config/backends.yaml")
tolerances = load_tolerances(None)
t0 = time.perf_counter()
canary = compile_program(program, budget=parse_budget({BUDGET!r}))
compile_s = time.perf_counter() - t0
out = {{}}
def verify():
    out["doc"] = verify_behavior(program, canary, backends, tolerances,
                                 source_digest="bench", canary_digest="bench")
verify_s = median_time(verify, {repeats})
replay_s = median_time(lambda: run_configs(program, backends.select()), {repeats})
doc = out["doc"]
print(json.dumps({{"verify_s": verify_s, "replay_s": replay_s, "compile_s": compile_s,
                  "occurrences": program.n, "events": len(program.members),
                  "configs": len(backends.select()), "claim": doc["claim"],
                  "checks": doc["summary"]["checks"], "failed": doc["summary"]["failed"],
                  "executed": canary["stats"]["occurrences_executed"]}}))
"""


def run(quick: bool) -> list[dict]:
    occurrences = 100_000 if quick else 1_000_000
    repeats = 1 if quick else 3
    path = decode_program(occurrences)
    out, rss = run_child(_child(str(path), repeats))
    seconds = out["verify_s"]
    met = seconds <= TARGET_S
    return [
        row(
            f"verify-behavior {out['occurrences']:,} occurrences x {out['configs']} configs (decode, 4 ranks)",
            round(seconds, 2),
            "s",
            f"the {out['configs']} replays alone (prepare + simulate the source)",
            round(out["replay_s"], 2),
            round(seconds / out["replay_s"], 1),
            f"<= {TARGET_S:g} s (1M occurrences)",
            f"{met} (quick size)" if quick else met,
            round(rss, 1),
            f"median of {repeats}; canary: bounded 2 us on every field, "
            f"{out['executed']:,} executed occurrences, compiled in {out['compile_s']:.1f} s (setup); "
            f"claim {out['claim']}, {out['checks']} checks, {out['failed']} failed; "
            f"{out['events']:,} member events",
        )
    ]


if __name__ == "__main__":
    print(json.dumps(run(quick=True), indent=1))
