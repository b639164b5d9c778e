"""Contested configurations on this machine (issue 15, item 6): is there a pair of physical
configurations within 10% of each other on the full program, and a pair whose isolated
ranking (ladders only, nccl-tests style) disagrees with the workload ranking measured?

Pipeline, every step the project's own CLI or library: a one-request decode workload at
4 gloo ranks (``bench_physical.prepare``: synth decode -> merge -> ingest -> search ->
export-param) -> ``tracecanary sweep`` ladders of its collectives and of the calls the
decomposed mode turns them into (``SWEEPS``: 1 KiB-4 MiB, the int64 ones from 8 B, factor 4,
3 cycles) -> the knob grid (``tracecanary.physical.contest.knob_grid``:
native, decomposed, op barriers, fused 16/64/256 KiB, chunked 2; thread counts are fixed
at 1 per rank by the replayer, so not a knob)
written as a physical-configurations file -> ``calibrate-backends`` (the isolated twin of
every configuration, ladders only: decomposed prices the decode's int64 broadcast as
scatter + all_gather from the scatter ladder) -> ``replay-physical`` of the full program under
every configuration, ``REPS`` rounds with the order rotated -> ``contest``: per pair the
gap, the machine's decision (bootstrap intervals of the mean latency), the isolated
decision, inversions and the closest pair -> the canary replayed under the closest pair
(and the first inversion, if any), ``REPS`` rounds, to see whether it ranks them as the
full program does. Per configuration a row states the isolated twin's mean-latency
prediction error against the full program's measured mean (median over rounds).

``python -m bench.bench_contest [--reps N]`` (default 3; about 7 minutes here).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import yaml

from bench.bench_physical import prepare
from bench.common import WORK, row, tracecanary_cli

WORKLOAD = {
    "layers": 2,
    "hidden": 1024,
    "requests": 1,
    "prompt-tokens": 512,
    "events-per-rank": 800,
    "tail-windows": 1,
}
NPROC = 4
# The decode program's ops (all_reduce, all_gather bfloat16; broadcast int64 of 64 B) and
# the calls decomposed makes of them (sim/twin.py): all_reduce -> reduce_scatter +
# all_gather; all_gather -> one bfloat16 broadcast per rank; broadcast -> scatter +
# all_gather of int64.
SWEEPS = (("all_reduce", "bfloat16", "1K"), ("all_gather", "bfloat16", "1K"),
          ("broadcast", "int64", "8"), ("reduce_scatter", "bfloat16", "1K"),
          ("broadcast", "bfloat16", "1K"), ("scatter", "int64", "8"),
          ("all_gather", "int64", "8"))  # fmt: skip


def _sweep(spec: tuple[str, str, str], out: Path) -> str:
    coll, dtype, low = spec
    shutil.rmtree(out, ignore_errors=True)
    tracecanary_cli(
        "sweep", "--collective", coll, "--dtype", dtype, "--min-bytes", low, "--max-bytes", "4M",
        "--factor", "4", "--warmup", "2", "--iters", "5", "--cycles", "3", "--backend", "gloo",
        "--nproc", str(NPROC), "-o", str(out),
    )  # fmt: skip
    return str(out)


def _replay(program: Path, config: str, configs: Path, out: Path) -> str:
    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    tracecanary_cli(
        "replay-physical", str(program), "--backend", "gloo", "--nproc", str(NPROC),
        "--physical-config", config, "--physical-configs", str(configs), "--warmup", "0",
        "--iters", "1", "--timeout", "600", "-o", str(out),
    )  # fmt: skip
    return str(out)


def _rounds(program: Path, names: list[str], configs: Path, base: Path, reps: int) -> dict:
    """name -> attempt paths, ``reps`` rounds with the configuration order rotated."""
    attempts: dict[str, list[str]] = {n: [] for n in names}
    for rep in range(reps):
        k = rep % len(names)
        for name in names[k:] + names[:k]:
            attempts[name].append(_replay(program, name, configs, base / name / f"rep{rep}"))
    return attempts


def _measured(attempts: dict[str, list[str]]) -> dict:
    import numpy as np

    from tracecanary.physical.report import attempt_metrics, bootstrap_interval

    out = {}
    for name, paths in attempts.items():
        means = [attempt_metrics(Path(p))["mean"] for p in paths]
        out[name] = {"mean": float(np.median(means)), "interval": bootstrap_interval(means),
                     "repetitions": len(means)}  # fmt: skip
    return out


def _isolated(backends: Path, program: Path, names: list[str]) -> dict:
    from tracecanary.errors import InputError
    from tracecanary.sim.backends import load_backends
    from tracecanary.sim.twin import op_table, simulate_twin

    loaded = load_backends(backends)
    table = op_table(program)
    out = {}
    for name in names:
        try:
            out[name] = simulate_twin(table, loaded.configs[name], dispatch=False).metrics_us()[
                "mean"
            ]
        except InputError:
            out[name] = None  # no ladder prices this configuration's calls
    return out


def run(reps: int = 3) -> list[dict]:
    from tracecanary.physical.contest import contest, knob_grid

    base = WORK / "contest"
    base.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    prog = prepare(WORKLOAD, NPROC)
    full, canary = Path(prog["full_dir"]), Path(prog["canary_dir"])
    grid = knob_grid(chunks=(2,))  # chunked4 is 2-3x native here: no close call to find
    configs = base / "physical.yaml"
    configs.write_text(yaml.safe_dump(grid, sort_keys=False))
    names = list(grid["configs"])
    ladders = [_sweep(s, base / "sweeps" / f"{s[0]}_{s[1]}") for s in SWEEPS]
    backends = base / "backends.yaml"
    argv = ["calibrate-backends", *ladders, "--physical-configs", str(configs)]
    tracecanary_cli(*argv, *[x for n in names for x in ("--config", n)], "-o", str(backends))
    isolated = _isolated(backends, full, names)
    t1 = time.perf_counter()
    measured = _measured(_rounds(full, names, configs, base / "full", reps))
    t2 = time.perf_counter()
    result = contest(measured, isolated)
    probe = [result["closest"]] + result["inversions"][:1]
    probed = sorted({n for p in probe for n in (p["a"], p["b"])})
    canary_measured = _measured(_rounds(canary, probed, configs, base / "canary", reps))
    t3 = time.perf_counter()
    load1 = os.getloadavg()
    load = f"load {load0[0]:.1f}/{load0[1]:.1f} -> {load1[0]:.1f}/{load1[1]:.1f}"
    canary_result = contest(canary_measured, {n: isolated[n] for n in probed})
    doc = {
        "measured_full": measured,
        "isolated_full": isolated,
        "contest_full": result,
        "measured_canary": canary_measured,
        "contest_canary": canary_result,
        "seconds": {"prepare_sweeps": t1 - t0, "full": t2 - t1, "canary": t3 - t2},
        "load": load,
    }
    (base / "contest.json").write_text(json.dumps(doc, indent=1, sort_keys=True))
    rows = []
    for name in names:
        predicted, mean = isolated[name], measured[name]["mean"]
        err = None if predicted is None else 100.0 * (predicted / mean - 1.0)
        rows.append(
            row(
                f"isolated twin (ladders only) mean latency, full program, {name}",
                None if predicted is None else round(predicted, 1),
                "us",
                f"measured mean (median of {measured[name]['repetitions']} rounds)",
                round(mean, 1),
                None if predicted is None else round(predicted / mean, 3),
                "|error| <= 15%",
                err is not None and abs(err) <= 15.0,
                notes="no ladder prices its calls" if err is None else f"error {err:+.1f}%; {load}",
            )
        )
    for p in probe:
        same = next(q for q in canary_result["pairs"] if (q["a"], q["b"]) == (p["a"], p["b"]))
        rows.append(
            row(
                f"{'inversion' if p['inversion'] else 'closest pair'} {p['a']} vs {p['b']} "
                "(full program, mean latency)",
                round(p["gap_pct"], 1),
                "% apart",
                "machine / isolated / canary decision",
                f"{p['machine']} / {p['isolated']} / {same['machine']}",
                None,
                "canary decides as the full program",
                same["machine"] == p["machine"],
                notes=f"{reps} rounds; {load}",
            )
        )
    rows.append(
        row(
            "contested pairs (within 10%) / inversions / pairs searched",
            len(result["contested"]),
            "pairs",
            "inversions",
            len(result["inversions"]),
            None,
            "an inversion on a real machine",
            bool(result["inversions"]),
            notes=f"{len(result['pairs'])} pairs of {len(names)} configurations; "
            f"prepare+sweeps {t1 - t0:.0f} s, full {t2 - t1:.0f} s, canary {t3 - t2:.0f} s",
        )
    )
    return rows


if __name__ == "__main__":
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 3
    print(json.dumps(run(reps), indent=1))
