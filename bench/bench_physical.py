"""Physical replay: the searched canary's pass wall time against the full program's, per
physical configuration, through real gloo collectives on CPU (goal <= 1/10 on the decode
workload).

Pipeline, as the campaign runs it (workflow/rules/*.smk, scripts/*.py), every step the
project's own CLI: ``tracecanary synth decode`` (captures cached under
``bench.common.WORK``: same flags, same bytes) -> ``merge --calibration`` -> ``ingest``
-> ``search`` (the campaign's budgets, backends and tolerances: the canary replayed is
the one the behavior search verified, its claim is printed) -> ``export-param``
(canary: ``--execution reduced``; full program: the normalized source, ``--execution
full``) -> ``replay-physical`` (torchrun, ``--nproc`` ranks, gloo) of both under each
configuration of config/physical.yaml. The canary and the full program of one
configuration run back to back, in A B / B A order across configurations (as the
campaign's replay_physical rule does), so drift does not favour either.

Timed: one pass = last op end minus first op start over all ranks of one timed pass
(``tracecanary.physical.report.attempt_metrics``, the campaign report's definition),
median over the ``--iters`` timed passes. Launch (torchrun, workers importing torch,
process groups) and warm-up passes are outside a pass; they are printed beside it.

Where a canary pass goes (``pass_breakdown``): every executed occurrence is charged the
wall time from the previous occurrence's end to its own end (first: from its own start),
so the charges add up to the pass; they are summed per part: the prefill (kept
explicitly, weight 1), decode repetitions that execute whole (weight 1: first and last
repetition of each request, tail windows and their context, timing outliers) and steady
decode repetitions (weight > 1, each standing for several). Inside each part, the share
spent inside the collectives (slowest rank's latency) is printed too.

Why this workload (measured on the 2-core VM, gloo, 4 ranks). A pass has no fixed
per-pass cost to speak of (it starts at the first op); its time is the sum of per-op
costs, ~7 ms per small decode op and ~12 ms per 1 MiB prefill op (4 ranks on 2 cores:
scheduling-bound), so the ratio is about the share of executed ops, prefill weighted
up. The canary keeps, per request, the prefill, the first and last decode step and one
steady step, plus the tail windows and straggler steps (each with one step of context):
a floor of roughly 80-150 executed occurrences, so the ratio falls as the number of decode
steps grows. resources/decode-small (2 requests of ~300 decode steps, 2 layers, 1,202
occurrences) executes 86 (7.2 %). Until the verifier's tail-event recall became tie-aware
(the decode steps' logits all_gathers tie at the tail boundary, and the tail list named
the tied ones by occurrence index), no k=1 reduction of such a workload passed and the
search executed 64-100 % of it.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import yaml

from bench.common import REPO, WORK, row, tracecanary_cli

TARGET_RATIO = 0.1
CAMPAIGN = REPO / "config" / "campaign.yaml"

# Full run: the campaign's decode_small workload (resources/decode-small's flags, 1,202
# collectives), one timed pass after one warm-up per attempt (the full program's
# chunked4 pass alone takes ~30 s here).
FULL_WORKLOAD = {
    "layers": 2,
    "hidden": 1024,
    "requests": 2,
    "prompt-tokens": 512,
    "events-per-rank": 1200,
    "tail-windows": 2,
}
FULL_CONFIGS = ("native", "fused64k", "chunked4")
FULL_NPROC, FULL_WARMUP, FULL_ITERS = 4, 1, 1

# Quick run (< 30 s): a small decode workload (one request), one configuration, two ranks.
QUICK_WORKLOAD = {
    "layers": 2,
    "hidden": 1024,
    "requests": 1,
    "prompt-tokens": 512,
    "events-per-rank": 800,
    "tail-windows": 1,
}
QUICK_CONFIGS = ("native",)
QUICK_NPROC, QUICK_WARMUP, QUICK_ITERS = 2, 1, 2

GENERATOR_VERSION = 1  # bump when `synth decode` changes what it writes


def _key(workload: dict, ranks: int) -> str:
    parts = "_".join(f"{k.split('-')[0][0]}{v}" for k, v in workload.items())
    return f"physical_v{GENERATOR_VERSION}_r{ranks}_{parts}"


def decode_workload(workload: dict, ranks: int) -> Path:
    """``tracecanary synth decode --ranks R <workload flags>`` captures (cached)."""
    out = WORK / _key(workload, ranks) / "captures"
    files = [out / f"rank{r}.jsonl.gz" for r in range(ranks)] + [out / "calibration.json"]
    if not all(f.exists() for f in files):
        shutil.rmtree(out, ignore_errors=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        flags = [x for k, v in workload.items() for x in (f"--{k}", str(v))]
        tracecanary_cli("synth", "decode", "--ranks", str(ranks), *flags, "-o", str(out))
    return out


def prepare(workload: dict, ranks: int) -> dict:
    """merge -> ingest -> search -> export-param (canary reduced, full program), as the
    campaign runs them; returns paths, the canary's claim and sizes, and the seconds."""
    captures = decode_workload(workload, ranks)
    base = captures.parent
    campaign = yaml.safe_load(CAMPAIGN.read_text())
    t0 = time.perf_counter()
    merged, table = base / "merged.jsonl.gz", base / "source.parquet"
    caps = [str(captures / f"rank{r}.jsonl.gz") for r in range(ranks)]
    cal = str(captures / "calibration.json")
    tracecanary_cli("merge", *caps, "--calibration", cal, "-o", str(merged))
    tracecanary_cli("ingest", str(merged), "-o", str(table))
    t1 = time.perf_counter()
    canary = base / "canary.json"
    tracecanary_cli(
        "search", str(table), "--budgets", str(campaign["search"]["budgets"]),
        "--backends", str(REPO / campaign["backends"]),
        "--tolerances", str(REPO / campaign["tolerances"]),
        "-o", str(canary), "--log", str(base / "search.json"),
        "--verification", str(base / "verification.json"),
    )  # fmt: skip
    t2 = time.perf_counter()
    param = base / "param"
    shutil.rmtree(param, ignore_errors=True)
    tracecanary_cli(
        "export-param", str(canary), "--execution", "reduced", "-o", str(param / "canary")
    )
    tracecanary_cli("export-param", str(table), "--execution", "full", "-o", str(param / "full"))
    t3 = time.perf_counter()
    doc = json.loads(canary.read_text())
    return {
        "base": base,
        "canary_dir": param / "canary",
        "full_dir": param / "full",
        "claim": doc["claim"],
        "executed": int(doc["stats"]["occurrences_executed"]),
        "logical": int(doc["stats"]["occurrences_logical"]),
        "merge_ingest_s": t1 - t0,
        "search_s": t2 - t1,
        "export_s": t3 - t2,
    }


def replay(program: Path, config: str, out: Path, nproc: int, warmup: int, iters: int) -> Path:
    """One ``replay-physical`` attempt (must end complete: every row checked correct)."""
    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    tracecanary_cli(
        "replay-physical", str(program), "--backend", "gloo", "--nproc", str(nproc),
        "--physical-config", config, "--physical-configs", str(REPO / "config" / "physical.yaml"),
        "--warmup", str(warmup), "--iters", str(iters), "--timeout", "1200", "-o", str(out),
    )  # fmt: skip
    return out


def pass_breakdown(archive: Path) -> dict:
    """Median pass (ms) and, per part (prefill / whole decode / steady decode), the wall
    time charged to it (ms, median over passes) and the time inside its collectives."""
    rows = pq.read_table(
        archive / "rows.parquet",
        columns=["occ", "iteration", "phase", "weight", "start_ns", "end_ns", "latency_ns"],
    ).to_pandas()
    per = (
        rows.groupby(["iteration", "occ"], sort=True)
        .agg(
            phase=("phase", "first"),
            weight=("weight", "first"),
            s=("start_ns", "min"),
            e=("end_ns", "max"),
            lat=("latency_ns", "max"),
        )
        .reset_index()
        .sort_values(["iteration", "s", "occ"], kind="stable")
    )
    part = np.where(
        per["phase"].to_numpy() == "prefill",
        "prefill",
        np.where(per["weight"].to_numpy() > 1.0, "decode_steady", "decode_whole"),
    )
    per["part"] = part
    first = per.groupby("iteration")["s"].transform("min").to_numpy()
    prev_end = per.groupby("iteration")["e"].shift(1).to_numpy()
    prev_end = np.where(np.isnan(prev_end), first, prev_end).astype(np.int64)
    per["charge"] = per["e"].to_numpy() - prev_end
    by = per.groupby(["iteration", "part"]).agg(
        ms=("charge", "sum"), inside_ms=("lat", "sum"), occurrences=("occ", "size")
    )
    out: dict = {}
    passes = per.groupby("iteration").agg(first=("s", "min"), last=("e", "max"))
    out["pass_ms"] = float(np.median(passes["last"] - passes["first"])) / 1e6
    for name in ("prefill", "decode_whole", "decode_steady"):
        if name in by.index.get_level_values("part"):
            sub = by.xs(name, level="part")
            out[name] = {
                "ms": round(float(np.median(sub["ms"])) / 1e6, 1),
                "inside_ms": round(float(np.median(sub["inside_ms"])) / 1e6, 1),
                "occurrences": int(sub["occurrences"].iloc[0]),
            }
    attempt = json.loads((archive / "attempt.json").read_text())
    out["attempt_s"] = attempt["wall_time_ns"] / 1e9
    out["status"] = attempt["status"]
    return out


def measure(
    workload: dict, configs: tuple[str, ...], nproc: int, warmup: int, iters: int
) -> tuple[dict, dict]:
    """(prepared pipeline, {config: {"canary": breakdown, "full": breakdown}})."""
    prep = prepare(workload, nproc)
    results: dict = {}
    for i, config in enumerate(configs):
        order = [("canary", prep["canary_dir"]), ("full", prep["full_dir"])]
        if i % 2 == 1:
            order.reverse()
        results[config] = {}
        for program, directory in order:
            out = prep["base"] / "attempts" / config / program
            archive = replay(directory, config, out, nproc, warmup, iters)
            results[config][program] = pass_breakdown(archive)
    return prep, results


PART_LABELS = {
    "prefill": "prefill",
    "decode_whole": "decode weight 1",
    "decode_steady": "decode steady (weighted)",
}


def _parts(b: dict) -> str:
    return ", ".join(
        f"{label} {b[name]['ms']:.0f} ms ({b[name]['occurrences']} occ, "
        f"{b[name]['inside_ms']:.0f} ms inside collectives)"
        for name, label in PART_LABELS.items()
        if name in b
    )


def run(quick: bool) -> list[dict]:
    workload = QUICK_WORKLOAD if quick else FULL_WORKLOAD
    configs = QUICK_CONFIGS if quick else FULL_CONFIGS
    nproc, warmup, iters = (
        (QUICK_NPROC, QUICK_WARMUP, QUICK_ITERS) if quick else (FULL_NPROC, FULL_WARMUP, FULL_ITERS)
    )
    prep, results = measure(workload, configs, nproc, warmup, iters)
    flags = " ".join(f"--{k} {v}" for k, v in workload.items())
    rows = []
    for config in configs:
        c, f = results[config]["canary"], results[config]["full"]
        ratio = c["pass_ms"] / f["pass_ms"]
        met = ratio <= TARGET_RATIO
        rows.append(
            row(
                f"physical replay {config}: canary pass ({prep['executed']:,} of "
                f"{prep['logical']:,} occurrences), gloo {nproc} ranks",
                round(c["pass_ms"], 1),
                "ms",
                "the full program's pass, same configuration",
                round(f["pass_ms"], 1),
                round(ratio, 3),
                f"<= {TARGET_RATIO:g}",
                f"{met} (quick size)" if quick else met,
                None,
                f"synth decode --ranks {nproc} {flags}; canary claim {prep['claim']}; "
                f"median of {iters} timed passes after {warmup} warm-up; canary: {_parts(c)}; "
                f"full: {_parts(f)}; attempt wall (launch + passes) canary {c['attempt_s']:.1f} s, "
                f"full {f['attempt_s']:.1f} s; setup: merge+ingest {prep['merge_ingest_s']:.1f} s, "
                f"search {prep['search_s']:.1f} s, export {prep['export_s']:.1f} s",
            )
        )
    return rows


if __name__ == "__main__":
    print(json.dumps(run(quick="--full" not in sys.argv), indent=1))
