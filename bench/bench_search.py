"""Behavior search (8 budgets x 5 configurations) on a 1M-occurrence decode trace,
against one compile + verify of the same trace.

Input: the same cached decode program as bench_verify (``tracecanary synth decode``,
4 ranks on one host, ~1M occurrences). Timed: ``tracecanary.verify.search.search``
with the CLI's default budgets ``0,1,2,4,8,16,32,64`` (us) and every default
configuration: a compile and a full verification per budget, then the per-signature
refinement and the execution reduction, every candidate verified against the whole
source. Comparator: one bounded compile (2 us) + one ``verify_behavior``, so the ratio
reads as "the search costs this many compile+verify rounds"."""

from __future__ import annotations

import json

from bench.common import row, run_child
from bench.inputs import LOAD_PROGRAM, decode_program

BUDGETS = "0,1,2,4,8,16,32,64"
TARGET_S = 300.0


def _child(path: str, repeats: int) -> str:
    return f"""
import json, time
from collections import Counter
{LOAD_PROGRAM.format(path=path)}
from bench.common import median_time
from tracecanary.compile.budget import parse_budget
from tracecanary.compile.canary import compile_program
from tracecanary.sim.backends import load_backends
from tracecanary.verify.behavior import load_tolerances, verify_behavior
from tracecanary.verify.search import parse_budgets, search

backends = load_backends("config/backends.yaml")
tolerances = load_tolerances(None)
def one_round():
    canary = compile_program(program, budget=parse_budget("gap=2us,overlap=2us,latency=2us,skew=2us"))
    verify_behavior(program, canary, backends, tolerances, source_digest="bench", canary_digest="bench")
round_s = median_time(one_round, {repeats})
t0 = time.perf_counter()
result = search(program, parse_budgets({BUDGETS!r}), backends, tolerances,
                source_digest="bench", progress=lambda line: None)
search_s = time.perf_counter() - t0
chosen = next((e for e in result.log if e.get("chosen")), None)
print(json.dumps({{"search_s": search_s, "round_s": round_s, "occurrences": program.n,
                  "configs": len(backends.select()), "candidates": len(result.log),
                  "stages": dict(Counter(e["stage"] for e in result.log)),
                  "chosen": None if chosen is None else {{k: chosen.get(k) for k in
                      ("stage", "settings", "bytes", "occurrences_executed", "claim")}}}}))
"""


def run(quick: bool) -> list[dict]:
    occurrences = 50_000 if quick else 1_000_000
    path = decode_program(occurrences)
    out, rss = run_child(_child(str(path), 1 if quick else 3))
    seconds = out["search_s"]
    met = seconds <= TARGET_S
    chosen = out["chosen"]
    chosen_txt = (
        "no candidate verified"
        if chosen is None
        else f"chosen {chosen['stage']} {chosen['settings']}: {chosen['bytes']:,} B, "
        f"executes {chosen['occurrences_executed']:,}, claim {chosen['claim']}"
    )
    return [
        row(
            f"behavior search {len(BUDGETS.split(','))} budgets x {out['configs']} configs, "
            f"{out['occurrences']:,} occurrences (decode)",
            round(seconds, 1),
            "s",
            "one compile (bounded 2 us) + verify-behavior of the same trace",
            round(out["round_s"], 2),
            round(seconds / out["round_s"], 1),
            f"<= {TARGET_S:g} s (1M occurrences)",
            f"{met} (quick size)" if quick else met,
            round(rss, 1),
            f"one search run; {out['candidates']} candidates compiled and verified "
            f"({', '.join(f'{k} {v}' for k, v in out['stages'].items())}); {chosen_txt}",
        )
    ]


if __name__ == "__main__":
    print(json.dumps(run(quick=True), indent=1))
