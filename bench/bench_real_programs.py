"""Real programs at the length a user captures (issue 37): each workload of the zoo,
written as an ordinary user program (``examples/user_programs``: DDP, DTensor TP x FSDP2
on a 2x2 mesh, tensor-parallel decode, pipelining, a ring-attention loop of
``isend``/``irecv`` + ``all_gather``; gloo on CPU), recorded live and unmodified with
``tracecanary capture -o DIR -- python PROGRAM STEPS`` on the fewest ranks the program
allows (2; TP x FSDP2 needs 4), then searched with ``tracecanary search`` (the zoo bench's
budgets, ``config/backends.yaml``, the default tolerances).

Per workload, measured in one run: steps, occurrences, the source's bytes (the
compiler's serialization of the normalized source, ``stats.bytes_source``), the chosen
canary's bytes and the ratio (target >= 10x), the executed fraction (target <= 20%),
whether it is verified, the top blocking check, and how much of the signature order
repeats (``compile.repetition``: in the searched order and in each group's own), for
each occurrence order (``search --order``: time, by earliest arrival, the default; or
canonical, a timing-independent linear extension of the ranks' issue orders). The top
blocking check is the first rejected candidate's first
``blocking`` entry in the search log (check, configuration, source and canary figures,
tolerance) or, where no check failed, the log's reason (e.g. "executes no fewer").

``python -m bench.bench_real_programs [NAME...] [--quick | --steps N] [--order O] [--standard S] [--physical REPS] [--cache DIR]``
prints the table and the rows as JSON (``--steps``: every workload's capture length, decode
tokens for tp_decode; ``--quick``: QUICK_STEPS). Captures are kept under
``$TRACECANARY_BENCH_DIR/real`` or ``--cache DIR`` (``DIR/<name>-<steps>/capture``; delete
to re-capture). Not a timed test: the walls are printed for orientation only.

``--physical REPS`` (default off) also replays each searched canary against its full
program through real gloo collectives on the capture's ranks, under the campaign's
configurations (native, fused64k), REPS rounds, and runs ``compare-physical`` on them
(``physical``): per configuration the canary/full pass-time ratio (median, paired 95%
bootstrap interval; target <= PHYSICAL_TARGET), the configuration pairs decided in both
programs and how many agree, and the gate.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import REPO, WORK, tracecanary_cli

SIZE_TARGET = 10.0
EXECUTED_TARGET = 0.20
BUDGETS = "0,1,2,4,8,16,32,64,256,1024,4096,16384"  # bench_zoo's
# workload -> (user program, ranks it runs on, a user's capture length)
PROGRAMS = {
    "ddp": ("ddp_train", 2, 400),
    "fsdp2_tp": ("tp_fsdp2_train", 4, 400),
    "tp_decode": ("tp_decode", 2, 1000),
    "pp": ("pipeline_train", 2, 400),
    "ring_attention": ("ring_attention", 2, 400),
    "moe": ("moe_train", 2, 400),
}
QUICK_STEPS = {
    "ddp": 20, "fsdp2_tp": 20, "tp_decode": 50, "pp": 20, "ring_attention": 20, "moe": 20,
}  # fmt: skip
# programs started under torchrun (the others spawn their own ranks)
TORCHRUN = {"moe"}


def capture(name: str, steps: int, cache: Path) -> tuple[Path, float]:
    """The merged trace of ``name`` recorded at ``steps`` (reused when cached), and the
    capture command's wall seconds (0 when reused)."""
    program = REPO / "examples" / "user_programs" / f"{PROGRAMS[name][0]}.py"
    out = cache / f"{name}-{steps}" / "capture"
    merged = out / "merged.jsonl.gz"
    if merged.is_file():
        return merged, 0.0
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    cmd = [sys.executable, "-m", "tracecanary", "capture", "-o", str(out), "--", sys.executable]
    if name in TORCHRUN:
        ranks = PROGRAMS[name][1]
        cmd += ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}"]
    run = subprocess.run(
        [*cmd, str(program), str(steps)],
        capture_output=True,
        text=True,
        timeout=3600,
        cwd=REPO,
    )
    if run.returncode != 0:
        raise RuntimeError(f"capture of {name} exited {run.returncode}: {run.stderr[-600:]}")
    return merged, time.perf_counter() - started


def _blocking_text(c: dict) -> str:
    """A rejected candidate's first named blocking check, else its reason."""
    for b in c.get("blocking", []):
        sig = b.get("signature") or {}
        where = f" on {sig.get('op')}/{sig.get('group')}" if sig else ""
        return (
            f"{c['stage']} {c['settings']}: {b.get('check')} under {b.get('config')}: "
            f"source {b.get('source')}, canary {b.get('canary')}, "
            f"allowed {b.get('allowed')}{where}"
        )
    return f"{c['stage']} {c['settings']}: {c.get('reason')}"


def top_blocking(log: dict) -> str:
    """What stopped the search going further, per stage: for the size (``budget`` and
    ``refine`` candidates) and for the executed fraction (``execution`` candidates), the
    first rejected candidate's first named blocking check, else its reason ('' where
    nothing was rejected)."""
    rejected = [
        c
        for c in log["candidates"]
        if not c.get("accepted") and not str(c.get("reason", "")).startswith("superseded")
    ]
    parts = []
    for label, stages in (("size", ("budget", "refine")), ("executed", ("execution",))):
        mine = [c for c in rejected if c["stage"] in stages]
        named = [c for c in mine if c.get("blocking")] or mine
        if named:
            parts.append(f"{label}: {_blocking_text(named[0])}")
    return "; ".join(parts)


def repetition(merged: Path, order: str) -> dict:
    """How much of the signature order repeats (``compile.repetition``) with the
    occurrences in ``order``: the share of occurrences in repeated records, the top-level
    records, and the same for each group's own order."""
    from tracecanary.compile.repetition import repetition_profile
    from tracecanary.load import load_program

    p = repetition_profile(load_program(merged, order=order))
    n = max(p.occurrences, 1)
    return {
        "records": p.records,
        "repeated": round(p.repeated / n, 3),
        "records_within_groups": p.records_within_groups,
        "repeated_within_groups": round(p.repeated_within_groups / n, 3),
    }


def measure(
    name: str, steps: int, cache: Path, order: str = "time", standard: str = "strict"
) -> dict:
    """One workload's row: capture (or reuse), ``tracecanary search --order ORDER
    --standard STANDARD``, the log read (with the standard the chosen canary met), and
    the repetition of the signature order in that order."""
    merged, capture_s = capture(name, steps, cache)
    base = merged.parent.parent
    tag = order if standard == "strict" else f"{order}-{standard}"
    canary, log_path = base / f"canary-{tag}.json", base / f"search-{tag}.json"
    started = time.perf_counter()
    error = None
    try:
        tracecanary_cli(
            "search", str(merged), "--budgets", BUDGETS,
            "--backends", str(REPO / "config" / "backends.yaml"),
            "-o", str(canary), "--log", str(log_path), "--quiet", "--order", order,
            "--standard", standard,
        )  # fmt: skip
    except RuntimeError as err:  # no verified candidate: the log still says why
        error = str(err)[-300:]
    search_s = time.perf_counter() - started
    log = json.loads(log_path.read_text())
    row = {
        "workload": name,
        "order": order,
        "standard": standard,
        "ranks": PROGRAMS[name][1],
        "steps": steps,
        "capture_s": round(capture_s, 1),
        "search_s": round(search_s, 1),
        "top_blocking": top_blocking(log)[:600],
        "repetition": repetition(merged, order),
    }
    if error is not None or not canary.is_file():
        row.update(verified=False, error=error)
        return row
    doc = json.loads(canary.read_text())
    st = doc["stats"]
    row.update(
        occurrences=st["occurrences_source"],
        source_bytes=st["bytes_source"],
        canary_bytes=canary.stat().st_size,
        ratio=round(st["bytes_source"] / canary.stat().st_size, 2),
        executed_fraction=round(st["occurrences_executed"] / st["occurrences_logical"], 3),
        verified=doc["claim"] == "verified",
        # occurrences the execution plan keeps whole (tail windows: latency or timing
        # outliers, with their context): what bounds the executed fraction from below
        tail_occurrences=int(doc["execution"].get("tail_occurrences") or 0),
        # the standard the chosen canary met: fixed_tolerances or source_reproducibility
        standard_met=next((e for e in log["candidates"] if e.get("chosen")), {}).get(
            "standard_met"
        ),
    )
    row["met"] = bool(
        row["verified"]
        and row["ratio"] >= SIZE_TARGET
        and row["executed_fraction"] <= EXECUTED_TARGET
    )
    return row


PHYSICAL_CONFIGS = ("native", "fused64k")  # the campaign's physical configurations
PHYSICAL_TARGET = 0.20  # canary pass / full pass (issue 37)


def physical(row: dict, cache: Path, reps: int) -> dict:
    """The physical canary-vs-full comparison of one measured row: its chosen canary
    exported reduced and the merged source exported full, each replayed through gloo
    collectives on the capture's ranks under every PHYSICAL_CONFIGS configuration,
    ``reps`` rounds (configuration order rotated each round, canary and full alternating
    C F / F C), one warm-up and one timed pass per attempt, then ``tracecanary
    compare-physical`` (the campaign's report and gate, at PHYSICAL_TARGET). Returned:
    per configuration the median canary/full pass-time ratio with the paired ratios'
    95% bootstrap interval, the decided configuration pairs and how many agree, and the
    gate."""
    import shutil

    from tracecanary.physical.report import attempt_metrics, bootstrap_interval

    name, tag = row["workload"], f"{row['order']}-{row['standard']}"
    base = cache / f"{name}-{row['steps']}" / f"physical-{tag}"
    shutil.rmtree(base, ignore_errors=True)
    merged = base.parent / "capture" / "merged.jsonl.gz"
    canary = base.parent / (
        f"canary-{row['order']}.json" if row["standard"] == "strict" else f"canary-{tag}.json"
    )
    dirs = {"canary": base / "param" / "canary", "full": base / "param" / "full"}
    tracecanary_cli(
        "export-param", str(canary), "--execution", "reduced", "-o", str(dirs["canary"])
    )
    tracecanary_cli("export-param", str(merged), "--execution", "full", "-o", str(dirs["full"]))
    started = time.perf_counter()
    passes: dict = {c: {"canary": [], "full": []} for c in PHYSICAL_CONFIGS}
    for rep in range(reps):
        configs = PHYSICAL_CONFIGS[rep % 2 :] + PHYSICAL_CONFIGS[: rep % 2]
        for config in configs:
            for program in ("canary", "full") if rep % 2 == 0 else ("full", "canary"):
                archive = base / program / config / f"rep{rep}"
                tracecanary_cli(
                    "replay-physical", str(dirs[program]), "--backend", "gloo",
                    "--nproc", str(row["ranks"]), "--physical-config", config,
                    "--warmup", "1", "--iters", "1", "--timeout", "1200", "--quiet",
                    "-o", str(archive),
                )  # fmt: skip
                passes[config][program].append(attempt_metrics(archive)["pass_ms"])
    report_path = base / "report.json"
    try:
        tracecanary_cli(
            "compare-physical", str(base / "canary"), str(base / "full"),
            "-o", str(report_path), "--max-runtime-ratio", str(PHYSICAL_TARGET),
        )  # fmt: skip
    except RuntimeError:  # the gate failed: the report is written and says why
        pass
    report = json.loads(report_path.read_text())
    out = {"workload": name, "standard": row["standard"], "repetitions": reps}
    out["replay_s"] = round(time.perf_counter() - started, 1)
    out["executed_fraction"] = row.get("executed_fraction")
    for config in PHYSICAL_CONFIGS:
        c, f = passes[config]["canary"], passes[config]["full"]
        ratios = [a / b for a, b in zip(c, f, strict=True)]
        interval = bootstrap_interval(ratios)
        out[config] = {
            "canary_pass_ms": round(statistics.median(c), 2),
            "full_pass_ms": round(statistics.median(f), 2),
            "ratio": round(statistics.median(ratios), 3),
            "interval_95": [round(x, 3) for x in interval] if interval else None,
        }
    decided = [a.get("decided_pairs", 0) for a in report["ranking_agreement"].values()]
    agreeing = [a.get("agreeing_decided_pairs", 0) for a in report["ranking_agreement"].values()]
    out.update(
        decided_pairs=sum(decided),
        agreeing_decided_pairs=sum(agreeing),
        gate=report["gate"]["status"],
        gate_reasons=report["gate"].get("reasons", []),
    )
    return out


def table(rows: list[dict]) -> str:
    head = (
        f"{'workload':<15}{'order':<10}{'standard':<16}{'ranks':>6}{'steps':>7}{'occ':>8}"
        f"{'source B':>11}{'canary B':>10}{'ratio':>8}{'exec':>7}  {'met':<23}  top blocking check"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lead = (
            f"{r['workload']:<15}{r['order']:<10}{r['standard']:<16}{r['ranks']:>6}{r['steps']:>7}"
        )
        if "occurrences" not in r:
            lines.append(f"{lead}  no canary: {r['error']}")
            continue
        lines.append(
            f"{lead}{r['occurrences']:>8,}"
            f"{r['source_bytes']:>11,}{r['canary_bytes']:>10,}{r['ratio']:>7.1f}x"
            f"{r['executed_fraction']:>7.0%}  {r['standard_met'] or 'not verified':<23}  "
            f"{'' if r['met'] else r['top_blocking']}"
            + (
                f"; the chosen canary runs {r['tail_occurrences']:,} tail-window occurrences whole"
                if not r["met"] and r["tail_occurrences"]
                else ""
            )
        )
    lines.append("")
    lines.append("repetition of the signature order (share of occurrences in repeated records):")
    for r in rows:
        rep = r["repetition"]
        lines.append(
            f"  {r['workload']:<15}{r['order']:<10} {rep['records']:>6} records, "
            f"{rep['repeated']:.1%} repeated; each group's own order: "
            f"{rep['records_within_groups']} records, {rep['repeated_within_groups']:.1%}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.bench_real_programs",
        description="Record each workload's user program at a user's length, search it, "
        "print the table.",
    )
    parser.add_argument(
        "names", nargs="*", metavar="NAME", help=f"workloads (default: all of {list(PROGRAMS)})"
    )
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--quick", action="store_true", help=f"short captures {QUICK_STEPS}")
    length.add_argument(
        "--steps", type=int, metavar="N", help="capture length of every workload (default: "
        + ", ".join(f"{k} {v[2]}" for k, v in PROGRAMS.items()) + ")",
    )  # fmt: skip
    parser.add_argument(
        "--order",
        choices=("time", "canonical", "both"),
        default="both",
        help="occurrence order searched (search --order); both: time then canonical, "
        "side by side (default: both)",
    )
    parser.add_argument(
        "--standard",
        choices=("strict", "reproducibility", "both"),
        default="both",
        help="verification standard searched for (search --standard); both: strict then "
        "reproducibility, side by side (default: both)",
    )
    parser.add_argument(
        "--physical",
        type=int,
        default=0,
        metavar="REPS",
        help="also replay each searched canary against its full program physically, REPS "
        "rounds, and compare them (compare-physical); default 0: off",
    )
    parser.add_argument(
        "--cache", type=Path, default=WORK / "real", metavar="DIR",
        help=f"capture cache (default: {WORK / 'real'})",
    )  # fmt: skip
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(PROGRAMS))
    if unknown:
        parser.error(f"unknown workloads {unknown}; known: {list(PROGRAMS)}")
    if args.steps is not None and args.steps < 1:
        parser.error("--steps must be >= 1")
    rows = []
    for name in args.names or list(PROGRAMS):
        steps = args.steps or (QUICK_STEPS[name] if args.quick else PROGRAMS[name][2])
        for order in ("time", "canonical") if args.order == "both" else (args.order,):
            standards = (
                ("strict", "reproducibility") if args.standard == "both" else (args.standard,)
            )
            for standard in standards:
                rows.append(measure(name, steps, args.cache, order, standard))
    print(table(rows))
    print(json.dumps(rows, indent=1), flush=True)
    if args.physical < 0:
        parser.error("--physical REPS must be >= 0")
    if args.physical:
        for r in rows:
            if r.get("verified"):
                print(json.dumps(physical(r, args.cache, args.physical)), flush=True)


if __name__ == "__main__":
    main()
