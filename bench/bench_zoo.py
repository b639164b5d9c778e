"""Reduction on real structure: each zoo workload (``tracecanary capture --workload``),
captured live at its default length (50 steps; tp_decode: 200 decode tokens), imported,
merged with a same-host calibration, then searched (the CLI's default budgets and
configurations).

Figures per workload: the searched canary's size against the normalized source
(``stats.bytes_source``, the compiler's serialization of the source), target >= 10x
smaller; its executed occurrences against the source's logical occurrences, target
<= 20%. The canary is verified by construction (search keeps only verified
candidates). Where a target is missed, ``blocked`` lists, per rejected candidate, the
stage, settings, verdict (which names the worst failed check, its configuration and the
source signature it is attributed to), the first failing checks and the search log's
``blocking`` entries (``tracecanary.verify.blocking``), and
``timing_figures`` and ``structure`` (``tracecanary.compile.repetition``) say what limits
the reduction: the timing jitter against the mean tolerance, the timing bytes per
occurrence against the source's, and what keeps the step motif from repeating.

``python -m bench.bench_zoo [NAME...] [--quick | --steps N] [--cache DIR]
[--selections time|all]`` prints every row and the blocked steps (``--steps``: capture
length, decode tokens for tp_decode; ``--selections time``: the search without the
skew-quantile execution rung, for before/after figures); ``python -m bench --only
bench_zoo`` puts the rows in the table. Captures are cached under
``$TRACECANARY_BENCH_DIR/zoo`` or ``--cache DIR`` (``DIR/<name>-<steps|default>/capture``;
delete to re-capture).

``--physical REPS`` (default off: the bench stays quick) also measures the physical pass
(issue 14 item 5, target <= PHYSICAL_TARGET): the searched canary, verified and written by
``tracecanary search`` (the bench's budgets, ``config/backends.yaml``, default tolerances:
the same search as the row), is exported reduced (``export-param --execution reduced``)
and the merged source full (``--execution full``); both are replayed with
``replay-physical`` (gloo, the capture's rank count, configuration ``native``, one warm-up
and PHYSICAL_ITERS timed passes per attempt), canary and full interleaved (C F / F C
alternating per repetition), REPS attempts each. Per attempt: ``pass_ms`` (last op end
minus first op start over ranks, median over timed passes:
``tracecanary.physical.report.attempt_metrics``) and ``inside_ms`` (per timed pass, the
sum over executed occurrences of the slowest member's latency; median over passes; it
can exceed ``pass_ms`` where occurrences overlap in time or ranks wait at different ones).
Reported: the paired canary/full ratio of each, median over repetitions with the physical
report's 95% percentile bootstrap interval (``bootstrap_interval``), beside the executed
fraction; ``met``: the interval's upper end is <= PHYSICAL_TARGET. Attempts are kept
under ``<cache>/<name>-<steps|default>/physical/``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from bench.common import REPO, WORK, row, tracecanary_cli

SIZE_TARGET = 10.0
EXECUTED_TARGET = 0.20
BUDGETS = "0,1,2,4,8,16,32,64,256,1024,4096,16384"
QUICK_STEPS = {"ddp": 10, "fsdp2_tp": 10, "tp_decode": 40, "pp": 10}
Z_95 = 2.0  # about 95% two-sided, for the sample-size estimate below
PHYSICAL_TARGET = 0.20  # canary pass / full program pass (issue 14 item 5)
PHYSICAL_CONFIG = "native"
PHYSICAL_WARMUP, PHYSICAL_ITERS = 1, 2


def timing_figures(program, canary: dict, tolerances: dict) -> dict:
    """What limits reduction on this capture, as figures:

    ``latency_cv``: the coefficient of variation of measured latency within each
    signature, pooled (occurrence-weighted); ``executed_needed``: about how many
    executed occurrences a uniform sample needs for its mean latency to land within the
    mean tolerance at ~95% (``(Z_95 * cv / tolerance)^2``, independent samples assumed:
    an estimate, not a guarantee); ``occurrences_needed``: the capture length at which
    that sample is <= EXECUTED_TARGET of it. ``source_bytes_per_occurrence`` and
    ``timing_bytes_per_occurrence`` (the canary's timing streams): their ratio bounds the
    size ratio however long the capture, while timing stays exact."""
    import numpy as np
    import pandas as pd

    from tracecanary.canonical import canonical_json_bytes

    occ = program.occurrences
    measured = occ["has_latency"].to_numpy(dtype=bool)
    sig, _ = program.signature_ids()
    lat = pd.Series(occ["latency_ns"].to_numpy(dtype=np.float64)[measured])
    by_sig = lat.groupby(sig[measured])
    cv_sig = (by_sig.std(ddof=0) / by_sig.mean()).fillna(0.0)
    cv = float(np.average(cv_sig.to_numpy(), weights=by_sig.size().to_numpy())) if len(lat) else 0.0
    rel = float(tolerances.content["latency"]["mean"]["relative"])
    needed = int(np.ceil((Z_95 * cv / rel) ** 2))
    timing_bytes = sum(
        len(canonical_json_bytes(s)) for s in canary["timing"].values() if s is not None
    )
    n = int(program.n)
    return {
        "latency_cv": round(cv, 2),
        "executed_needed": needed,
        "occurrences_needed": int(np.ceil(needed / EXECUTED_TARGET)),
        "source_bytes_per_occurrence": round(canary["stats"]["bytes_source"] / n, 1),
        "timing_bytes_per_occurrence": round(timing_bytes / n, 1),
    }


def _merged(name: str, steps: int | None, cache: Path | None = None) -> tuple[str, float]:
    """Capture (cached under ``cache``, default ``$TRACECANARY_BENCH_DIR/zoo``), import
    and merge one workload; return (merged path, capture s)."""
    from tracecanary.canonical import write_json
    from tracecanary.kineto import import_kineto_file
    from tracecanary.merge import merge_captures
    from tracecanary.trace_io import write_trace
    from tracecanary.zoo.runner import NPROC, capture_workload

    base = (cache or WORK / "zoo") / f"{name}-{steps or 'default'}"
    capture_dir = base / "capture"
    capture_s = 0.0
    if not (capture_dir / "capture.json").is_file():
        capture_dir.parent.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        capture_workload(name, capture_dir, steps=steps)
        capture_s = time.perf_counter() - started
    else:
        capture_s = json.loads((capture_dir / "capture.json").read_text())["wall_s"]
    imports = []
    for r in range(NPROC):
        path = base / f"import{r}.json"
        write_trace(import_kineto_file(capture_dir / f"rank{r}.json.gz"), path)
        imports.append(str(path))
    calibration = base / "same-host.json"
    write_json(
        calibration,
        {
            "format": "tracecanary.calibration/v1",
            "reference": "same host",
            "method": "same-host",
            "clocks": [
                {"ranks": list(range(NPROC)), "offset_ns": 0, "drift_ppb": 0, "uncertainty_ns": 0}
            ],
        },
    )
    merged = base / "merged.jsonl.gz"
    merged.unlink(missing_ok=True)
    merge_captures(imports, merged, str(calibration))
    return str(merged), capture_s


def measure(
    name: str,
    steps: int | None,
    *,
    cache: Path | None = None,
    steady_selections: tuple[str, ...] | None = None,
) -> dict:
    """One workload's row (see the module doc). ``steady_selections``: passed to
    ``search`` (None: its default, every selection)."""
    merged, capture_s = _merged(name, steps, cache)
    return search_merged(merged, name, steps, capture_s, steady_selections)


def search_merged(
    merged: str,
    name: str,
    steps: int | None,
    capture_s: float,
    steady_selections: tuple[str, ...] | None = None,
) -> dict:
    """Search one merged trace as ``measure`` does; its figures (see the module doc)."""
    from tracecanary.compile.repetition import repetition_profile
    from tracecanary.load import load_program
    from tracecanary.sim.backends import load_backends
    from tracecanary.verify.behavior import load_tolerances
    from tracecanary.verify.search import parse_budgets, search

    program = load_program(merged)
    backends = load_backends("config/backends.yaml")
    tolerances = load_tolerances(None)
    started = time.perf_counter()
    result = search(
        program,
        parse_budgets(BUDGETS),
        backends,
        tolerances,
        source_digest="bench",
        progress=lambda line: None,
        **({"steady_selections": steady_selections} if steady_selections else {}),
    )
    search_s = time.perf_counter() - started
    out = {
        "workload": name,
        "steps": steps,
        "occurrences": int(program.n),
        "capture_s": round(capture_s, 1),
        "search_s": round(search_s, 1),
        "skew_known": bool(program.skew_known),
        "structure": repetition_profile(program).obstacle(),
    }
    blocked = [
        {
            "stage": e["stage"],
            "settings": e["settings"],
            "verdict": e.get("reason"),
            "failed_checks": e.get("failed_checks", [])[:3],
            "blocking": e.get("blocking", [])[:3],
        }
        for e in result.log
        if not e.get("accepted")
        and not e.get("chosen")
        and not str(e.get("reason", "")).startswith("superseded")
    ]
    out["blocked"] = blocked
    if result.canary is None:
        out.update(verified=False, size_ratio=None, executed_fraction=None)
        return out
    stats = result.canary["stats"]
    chosen = next(e for e in result.log if e.get("chosen"))
    out.update(timing_figures(program, result.canary, tolerances))
    out.update(
        verified=result.verification["claim"] == "verified",
        canary_bytes=chosen["bytes"],
        source_bytes=stats["bytes_source"],
        size_ratio=round(stats["bytes_source"] / chosen["bytes"], 2),
        executed=chosen["occurrences_executed"],
        executed_fraction=round(chosen["occurrences_executed"] / stats["occurrences_source"], 3),
        chosen={"stage": chosen["stage"], "settings": chosen["settings"]},
    )
    return out


def _inside_ms(archive: Path) -> float:
    """Median over timed passes of the summed slowest-member latency of every executed
    occurrence (ms): the time a pass spends inside its ops."""
    import numpy as np
    import pyarrow.parquet as pq

    rows = pq.read_table(
        archive / "rows.parquet", columns=["occ", "iteration", "latency_ns"]
    ).to_pandas()
    per_pass = rows.groupby(["iteration", "occ"])["latency_ns"].max().groupby(level=0).sum()
    return float(np.median(per_pass.to_numpy(np.float64))) / 1e6


def physical(name: str, steps: int | None, reps: int, *, cache: Path | None = None) -> dict:
    """The physical pass of the searched canary against the full program (see the module
    doc); every step the project's CLI. Raises RuntimeError when a command fails (an
    attempt that is not complete included: ``replay-physical`` exits 1)."""
    import shutil

    from tracecanary.zoo.runner import NPROC

    merged, _ = _merged(name, steps, cache)
    base = Path(merged).parent / "physical"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    canary = base / "canary.json"
    tracecanary_cli(
        "search", merged, "--budgets", BUDGETS,
        "--backends", str(REPO / "config" / "backends.yaml"),
        "-o", str(canary), "--log", str(base / "search.json"),
    )  # fmt: skip
    return {"workload": name, "steps": steps, **physical_pass(merged, canary, NPROC, reps, base)}


def physical_pass(merged: str | Path, canary: Path, nproc: int, reps: int, base: Path) -> dict:
    """The searched ``canary`` (reduced) against the full program of ``merged``, both
    exported and replayed physically on ``nproc`` gloo ranks, ``reps`` attempts each,
    interleaved (C F / F C), attempts kept under ``base``; per metric the paired
    canary/full ratio's median, 95% bootstrap interval and whether it meets
    PHYSICAL_TARGET (see the module doc)."""
    from tracecanary.physical.report import attempt_metrics, bootstrap_interval

    stats = json.loads(Path(canary).read_text())["stats"]
    dirs = {"canary": base / "param" / "canary", "full": base / "param" / "full"}
    tracecanary_cli(
        "export-param", str(canary), "--execution", "reduced", "-o", str(dirs["canary"])
    )
    tracecanary_cli("export-param", str(merged), "--execution", "full", "-o", str(dirs["full"]))
    runs: dict[str, list[dict]] = {"canary": [], "full": []}
    started = time.perf_counter()
    for rep in range(reps):
        order = ["canary", "full"] if rep % 2 == 0 else ["full", "canary"]
        for program in order:
            archive = base / "attempts" / f"{program}-{rep}"
            tracecanary_cli(
                "replay-physical", str(dirs[program]), "--backend", "gloo",
                "--nproc", str(nproc), "--physical-config", PHYSICAL_CONFIG,
                "--warmup", str(PHYSICAL_WARMUP), "--iters", str(PHYSICAL_ITERS),
                "--timeout", "1200", "--quiet", "-o", str(archive),
            )  # fmt: skip
            runs[program].append(
                {"pass_ms": attempt_metrics(archive)["pass_ms"], "inside_ms": _inside_ms(archive)}
            )
    out: dict = {
        "executed": int(stats["occurrences_executed"]),
        "logical": int(stats["occurrences_logical"]),
        "executed_fraction": round(stats["occurrences_executed"] / stats["occurrences_logical"], 3),
        "repetitions": reps,
        "replay_s": round(time.perf_counter() - started, 1),
        "attempts": runs,
    }
    for metric in ("inside_ms", "pass_ms"):
        ratios = [c[metric] / f[metric] for c, f in zip(runs["canary"], runs["full"], strict=True)]
        interval = bootstrap_interval(ratios)
        out[f"{metric}_ratio"] = {
            "median": round(statistics.median(ratios), 3),
            "interval_95": [round(x, 3) for x in interval] if interval else None,
            "met": bool(interval is not None and interval[1] <= PHYSICAL_TARGET),
        }
    return out


def reduction_row(case: str, m: dict, notes: str) -> dict:
    """The row of a searched capture (``search_merged``'s figures): the canary's size
    against the source's and its executed fraction, against the zoo's targets. Where they
    are missed, ``notes`` is followed by what limits the reduction and the blocked
    candidates."""
    ratio, frac = m.get("size_ratio"), m.get("executed_fraction")
    met = bool(
        m["verified"]
        and ratio is not None
        and ratio >= SIZE_TARGET
        and frac is not None
        and frac <= EXECUTED_TARGET
    )
    if not met:
        blocked = "; ".join(
            f"{b['stage']} {b['settings']}: {b['verdict']}"
            + (f" ({', '.join(map(str, b['failed_checks']))})" if b["failed_checks"] else "")
            for b in sorted(m["blocked"], key=lambda b: b["stage"] != "execution")[:3]
        )
        if "latency_cv" in m:
            notes += (
                f"; latency cv {m['latency_cv']}, ~{m['occurrences_needed']:,} occurrences "
                f"needed for a <= {EXECUTED_TARGET:.0%} sample; structure: {m['structure']}"
            )
        notes += f"; blocked: {blocked}"
    return row(
        f"{case}: searched canary, {m['occurrences']:,} occurrences",
        ratio,
        "x smaller than the normalized source",
        "executed fraction",
        frac,
        ratio,
        f">= {SIZE_TARGET}x and <= {EXECUTED_TARGET:.0%} executed",
        met,
        notes=notes[:1200],
    )


def run(quick: bool) -> list[dict]:
    from tracecanary.zoo import WORKLOADS

    rows = []
    for name in WORKLOADS:
        m = measure(name, QUICK_STEPS[name] if quick else None)
        notes = f"verified={m['verified']}, capture {m['capture_s']} s, search {m['search_s']} s"
        rows.append(reduction_row(f"zoo {name}", m, notes))
    return rows


def main(argv: list[str] | None = None) -> None:
    from tracecanary.compile.selection import DEFAULT_STEADY_SELECTION
    from tracecanary.zoo import WORKLOADS

    parser = argparse.ArgumentParser(
        prog="python -m bench.bench_zoo",
        description="Search each zoo workload's captured trace and print its row as JSON.",
    )
    parser.add_argument(
        "names", nargs="*", metavar="NAME", help=f"workloads (default: all of {list(WORKLOADS)})"
    )
    length = parser.add_mutually_exclusive_group()
    length.add_argument(
        "--quick", action="store_true", help=f"short captures {QUICK_STEPS} (default: off)"
    )
    length.add_argument(
        "--steps",
        type=int,
        metavar="N",
        help="capture length (decode tokens for tp_decode; default: the workload's)",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        metavar="DIR",
        help="capture cache: DIR/<name>-<steps|default>/capture is reused when present "
        f"(default: {WORK / 'zoo'})",
    )
    parser.add_argument(
        "--selections",
        choices=("time", "all"),
        default="all",
        help="execution rung selections: time = the search without the skew-quantile "
        "selection; all = every steady_selection (default: all)",
    )
    parser.add_argument(
        "--physical",
        type=int,
        metavar="REPS",
        default=0,
        help="also replay the searched canary (reduced) and the full program physically, "
        f"gloo, configuration {PHYSICAL_CONFIG}, interleaved, REPS attempts each (>= 3 for "
        "an interval; 0 = off; default: 0)",
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown workloads {unknown}; known: {list(WORKLOADS)}")
    if args.physical < 0:
        parser.error("--physical REPS must be >= 0")
    if args.physical and args.selections == "time":
        parser.error("--physical replays the default search's canary: use --selections all")
    selections = (DEFAULT_STEADY_SELECTION,) if args.selections == "time" else None
    for name in args.names or list(WORKLOADS):
        steps = args.steps or (QUICK_STEPS[name] if args.quick else None)
        row_ = measure(name, steps, cache=args.cache, steady_selections=selections)
        print(json.dumps(row_, indent=1), flush=True)
        if args.physical:
            print(json.dumps(physical(name, steps, args.physical, cache=args.cache)), flush=True)


if __name__ == "__main__":
    main()
