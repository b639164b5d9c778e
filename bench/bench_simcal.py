"""The simulator meets the machine: prediction error of calibrated simulator configurations
against physical replays, per configuration, on the campaign's decode workload.

Pipeline, every step the project's own CLI or library: the decode workload's canary and
full program (``bench_physical.prepare``: synth decode -> merge -> ingest -> search ->
export-param) -> ``tracecanary sweep`` ladders of every collective the programs use (gloo,
the physical ranks, warm-up discarded, 3 cycles per rung; kept between runs) -> per
configuration its ``tracecanary dispatch-program`` -> ``REPS`` rounds, the configuration
order rotated by one per round; per configuration in a round one calibration replay of
its dispatch program (a separate run, never one of the judged ones), then the canary and
the full program alternating A B / B A (``tracecanary replay-physical``) ->
``calibrate-backends`` twice: ladders only (the "before" twin) and with ``--dispatch
NAME=ATTEMPT`` for every calibration replay (the "after" twin: the replayer's dispatch
lateness pooled over the rounds, sim/dispatch.py) ->
``tracecanary.physical.report.build_physical_report`` with each (bootstrap intervals,
decided pairs, the twin's ranking and mean-latency prediction error).

Printed per configuration and program: measured mean latency (median over repetitions,
with its 95% bootstrap interval), the twin's prediction and its error (%), with the
ladders-only error beside it, and the load average before and after. Targets (issue 15):
simulator-vs-physical agreement >= 90% of decided pairs, canary-vs-full 100% of decided
pairs, |prediction error| <= 15% per configuration.
``python -m bench.bench_simcal [--quick] [--reps N]``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

from bench.bench_physical import FULL_WORKLOAD, QUICK_WORKLOAD, prepare
from bench.common import REPO, WORK, row, tracecanary_cli

PHYSICAL_YAML = REPO / "config" / "physical.yaml"
FULL = {
    "workload": FULL_WORKLOAD,
    "nproc": 4,
    "configs": ("native", "fused64k", "chunked4"),
    "reps": 5,
    "warmup": 0,
    "iters": 1,
    "max_bytes": "64M",
    "factor": "2",
}
QUICK = {
    "workload": QUICK_WORKLOAD,
    "nproc": 2,
    "configs": ("native", "fused64k"),
    "reps": 3,
    "warmup": 0,
    "iters": 1,
    "max_bytes": "4M",
    "factor": "4",
}
TARGETS = {"sim_agreement": 0.9, "canary_agreement": 1.0, "prediction_error_pct": 15.0}


def ladder_specs(program_dirs: list[Path]) -> list[tuple[str, str, str]]:
    """(collective, dtype, min bytes) of every op the programs run natively."""
    from tracecanary.sim.costs import LADDER_COLLECTIVE_OF_OP
    from tracecanary.sim.twin import op_table

    keys = set()
    for d in program_dirs:
        t = op_table(d)
        keys |= {
            (LADDER_COLLECTIVE_OF_OP[o], dt) for o, dt in zip(t["op"], t["dtype"], strict=True)
        }
    # the smallest decode op (a 64 B broadcast) sits below 1 KiB: broadcast ladders start at 8 B
    return sorted((c, dt, "8" if c == "broadcast" else "1K") for c, dt in keys)


def sweep(spec: tuple[str, str, str], setup: dict, out: Path) -> Path:
    if (out / "attempt.json").exists():
        return out
    shutil.rmtree(out, ignore_errors=True)
    coll, dtype, low = spec
    tracecanary_cli(
        "sweep", "--collective", coll, "--dtype", dtype, "--min-bytes", low,
        "--max-bytes", setup["max_bytes"], "--factor", setup["factor"], "--warmup", "2",
        "--iters", "5", "--cycles", "3", "--backend", "gloo", "--nproc", str(setup["nproc"]),
        "-o", str(out),
    )  # fmt: skip
    return out


def replay(program: Path, config: str, out: Path, setup: dict) -> str:
    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    tracecanary_cli(
        "replay-physical", str(program), "--backend", "gloo", "--nproc", str(setup["nproc"]),
        "--physical-config", config, "--physical-configs", str(PHYSICAL_YAML),
        "--warmup", str(setup["warmup"]), "--iters", str(setup["iters"]), "--timeout", "1200",
        "-o", str(out),
    )  # fmt: skip
    return str(out)


def calibration_program(programs: dict, config: str, base: Path) -> Path:
    """The configuration's dispatch calibration program (``tracecanary dispatch-program``)."""
    program = base / "dispatch" / config / "program"
    tracecanary_cli(
        "dispatch-program", str(programs["canary"]), str(programs["full"]), "--config", config,
        "--physical-configs", str(PHYSICAL_YAML), "-o", str(program), "--force",
    )  # fmt: skip
    return program


def run(quick: bool, reps: int | None = None) -> list[dict]:
    from tracecanary.physical.report import build_physical_report

    setup = dict(QUICK if quick else FULL)
    if reps is not None:
        setup["reps"] = reps
    load_before = os.getloadavg()
    base = WORK / ("simcal_quick" if quick else "simcal")
    base.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    prog = prepare(setup["workload"], setup["nproc"])
    programs = {"canary": prog["canary_dir"], "full": prog["full_dir"]}
    ladders = []
    for spec in ladder_specs(list(programs.values())):
        name = f"{spec[0]}_{spec[1]}_{spec[2]}_{setup['max_bytes']}_f{setup['factor']}_n{setup['nproc']}"
        ladders.append(str(sweep(spec, setup, base / "sweeps" / name)))
    t1 = time.perf_counter()
    backends = base / "backends.yaml"
    argv = ["calibrate-backends", *ladders, "--physical-configs", str(PHYSICAL_YAML)]
    argv += [x for c in setup["configs"] for x in ("--config", c)]
    argv += ["--backend", "gloo", "--program", str(programs["canary"])]
    ladders_only = base / "backends_ladders.yaml"
    tracecanary_cli(*argv, "--program", str(programs["full"]), "-o", str(ladders_only))
    configs = list(setup["configs"])
    calibration = {c: calibration_program(programs, c, base) for c in configs}
    dispatch = []
    attempts = []
    for rep in range(1, setup["reps"] + 1):
        k = (rep - 1) % len(configs)
        order = configs[k:] + configs[:k]  # rotated by one per repetition
        for i, config in enumerate(order):
            # the calibration replay runs beside the judged ones, never as one of them
            out = base / "dispatch" / config / f"rep{rep}"
            dispatch.append(f"{config}={replay(calibration[config], config, out, setup)}")
            pair = ["canary", "full"] if (rep + i) % 2 else ["full", "canary"]
            for program in pair:
                out = base / "physical" / program / config / f"rep{rep}"
                attempts.append(replay(programs[program], config, out, setup))
    t2 = time.perf_counter()
    argv += [x for d in dispatch for x in ("--dispatch", d)]
    tracecanary_cli(*argv, "--program", str(programs["full"]), "-o", str(backends))
    report = build_physical_report(
        attempts, backends=str(backends), programs={k: str(v) for k, v in programs.items()}
    )
    (base / "physical.json").write_text(json.dumps(report, indent=1, sort_keys=True))
    before = build_physical_report(
        attempts, backends=str(ladders_only), programs={k: str(v) for k, v in programs.items()}
    )["simulator_agreement"]
    load_after = os.getloadavg()
    load = (
        f"load {load_before[0]:.1f}/{load_before[1]:.1f} -> {load_after[0]:.1f}/{load_after[1]:.1f}"
    )
    sim = report["simulator_agreement"]
    rows = []
    for program in ("full", "canary"):
        for config in configs:
            measured = report["configs"][config][program]
            err = sim["programs"][program]["prediction_error_pct"][config]
            err0 = before["programs"][program]["prediction_error_pct"][config]
            predicted = sim["programs"][program]["predicted"][config]["mean"]
            ci = measured["interval"]["mean"]
            rows.append(
                row(
                    f"simulator twin mean latency, {program}, {config}",
                    round(predicted, 1),
                    "us",
                    f"measured mean (median of {measured['repetitions']} reps, 95% CI "
                    f"{ci[0]:.0f}-{ci[1]:.0f})"
                    if ci
                    else "measured mean",
                    round(measured["mean"], 1),
                    round(predicted / measured["mean"], 3),
                    f"|error| <= {TARGETS['prediction_error_pct']:g}%",
                    abs(err) <= TARGETS["prediction_error_pct"],
                    notes=f"error {err:+.1f}% (ladders only {err0:+.1f}%); {load}",
                )
            )
    canary_decided = sum(a["decided_pairs"] for a in report["ranking_agreement"].values())
    canary_agree = sum(a["agreeing_decided_pairs"] for a in report["ranking_agreement"].values())
    undetermined = sum(a["undetermined_pairs"] for a in report["ranking_agreement"].values())
    rows.append(
        row(
            "canary vs full ranking, decided pairs (p50/p95/p99/mean)",
            canary_agree,
            "pairs agree",
            "decided pairs",
            canary_decided,
            round(canary_agree / canary_decided, 3) if canary_decided else None,
            "100% of decided pairs",
            canary_decided > 0 and canary_agree == canary_decided,
            notes=f"{undetermined} pair-metrics undetermined; gate {report['gate']['status']}",
        )
    )
    rows.append(
        row(
            "simulator vs machine ranking, decided pairs (full + canary, 4 metrics)",
            sim["agreeing_pairs"],
            "pairs agree",
            "decided pairs",
            sim["decided_pairs"],
            None if sim["agreement"] is None else round(sim["agreement"], 3),
            ">= 90% of decided pairs",
            sim["agreement"] is not None and sim["agreement"] >= TARGETS["sim_agreement"],
            notes=f"sweeps+prepare {t1 - t0:.0f} s, replays {t2 - t1:.0f} s; ladders only "
            f"{before['agreeing_pairs']}/{before['decided_pairs']}; {load}",
        )
    )
    return rows


if __name__ == "__main__":
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else None
    print(json.dumps(run(quick="--quick" in sys.argv, reps=reps), indent=1))
