"""Scale: the training pipeline (ingest -> load+match -> compile -> verify) at ~1M, ~10M
and ~100M rank events, with time and peak RSS per stage.

Input: ``tracecanary synth training --tp 8 --pp 4 --dp DP`` (tensor-parallel
all_gather/reduce_scatter in groups of 8, pipeline send/recv over 4 stages,
data-parallel gradient buckets over groups of DP, one world all_reduce per step):

- 1024 ranks (DP 32): 6 steps (976,896 rank events, 173,190 occurrences), 60 steps
  (9,768,960 events, 1,731,900 occurrences: exactly 10x, so the time ratio reads
  directly against the goal, <= 12 for 10x) and 600 steps (97,689,600 events);
- 16,384 ranks (DP 512): 38 steps (~99M rank events: the same work per rank, 16x the
  ranks, a tenth of the steps).

Each case runs in its own child process, so its peak RSS is that of the whole pipeline
held in one process (the conservative figure: the CLI runs the stages as separate
processes). Per stage the child reports wall seconds and that stage's own peak RSS
(the kernel's high-water mark, reset before the stage through /proc/self/clear_refs):

1. ``ingest_files`` JSON Lines -> normalized Parquet (streamed in batches);
2. ``load_program`` of the Parquet (matching into occurrences);
3. ``compile_program`` bounded at 2 us on every field;
4. ``verify_behavior`` of that canary against the source under the 5 default
   configurations.

GiB per million rank events is reported two ways: the whole peak over the events, and
the slope between the 10M case and a ~100M case (what each further million costs).

The ~100M cases (full mode only) each need ~19 GB of JSON Lines on disk (generated,
used, then deleted) and are run only when the machine has ``MIN_AVAILABLE_GIB`` of
memory available and the 1M -> 10M slope projects a ~100M peak within ``CAP_GIB``;
otherwise the same shape runs at ~30M events instead and the 100M figure is
extrapolated from the 10M -> 30M slope (the row says so and why). A child whose RSS
passes ``CAP_GIB`` is stopped by its own watchdog (the row says so) rather than let it
take the machine. Quick mode runs a 1-step 1024-rank trace (~163k events) and skips
the larger cases with a row saying so. ``python -m bench.bench_scale --full --cases
100m-16k`` runs only the cases named (with the comparators they need, see ``NEEDS``).
"""

from __future__ import annotations

import json
import shutil

from bench.common import WORK, row, run_child
from bench.inputs import training_trace

SHAPE = {"tp": 8, "pp": 4, "dp": 32}  # 1024 ranks
WIDE_SHAPE = {"tp": 8, "pp": 4, "dp": 512}  # 16,384 ranks
STEPS_QUICK = 1
STEPS_1M = 6
STEPS_10M = 60
STEPS_100M = 600
WIDE_STEPS_100M = 38
FALLBACK_FRACTION = 0.3  # ~30M instead of ~100M when memory is short
TARGET_RSS_MB = 8 * 1024  # the 10M case
TARGET_RATIO = 12.0
CAP_GIB = 16.0  # the 100M goal: completes within this peak
TARGET_GIB_PER_M = 0.09  # 5x below the 0.45 GiB per million events measured before
MIN_AVAILABLE_GIB = 18.0
JSONL_BYTES_PER_EVENT = 195  # what the training generator writes, for the disk check
STAGES = ("ingest", "load", "compile", "verify")
# the cases (full mode), in run order, and the comparators each needs: the 10M row's time
# ratio is against the ~1M case; a ~100M case's projection and slope use both
CASES = ("1m", "10m", "100m-1024", "100m-16k")
NEEDS = {"1m": (), "10m": ("1m",), "100m-1024": ("1m", "10m"), "100m-16k": ("1m", "10m")}
# the ~100M inputs are ~19 GB of JSON Lines, over the default max_file_bytes (4 GiB)
LARGE_INPUT_LIMITS = "max_file_bytes=64e9,max_decompressed_bytes=64e9"


def _child(path: str, cap_gib: float) -> str:
    return f"""
import json, os, sys, tempfile, threading, time
os.environ["TRACECANARY_LIMITS"] = {LARGE_INPUT_LIMITS!r}
def _status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) / 1024
def _watch():
    while True:
        if _status("VmRSS:") > {cap_gib * 1024!r}:
            sys.stderr.write("RSS passed {cap_gib:g} GiB: stopped by the watchdog")
            sys.stderr.flush()
            os._exit(3)
        time.sleep(0.1)
threading.Thread(target=_watch, daemon=True).start()
def reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass  # no reset: the stage's figure is the process peak so far
from tracecanary.compile.budget import parse_budget
from tracecanary.compile.canary import compile_program
from tracecanary.ingest import ingest_files
from tracecanary.load import load_program
from tracecanary.sim.backends import load_backends
from tracecanary.verify.behavior import load_tolerances, verify_behavior
out = {{}}
def stage(name, fn):
    reset_peak()
    t0 = time.perf_counter()
    value = fn()
    out[name + "_s"] = time.perf_counter() - t0
    out[name + "_rss_mb"] = _status("VmHWM:")
    return value
with tempfile.TemporaryDirectory(prefix="tracecanary-bench-scale-", dir={str(WORK)!r}) as tmp:
    table = os.path.join(tmp, "trace.parquet")
    result = stage("ingest", lambda: ingest_files([{path!r}], table))
    program = stage("load", lambda: load_program(table))
    budget = parse_budget("gap=2us,overlap=2us,latency=2us,skew=2us")
    canary = stage("compile", lambda: compile_program(program, budget=budget))
    backends = load_backends("config/backends.yaml")
    doc = stage("verify", lambda: verify_behavior(program, canary, backends,
                load_tolerances(None), source_digest="bench", canary_digest="bench"))
out.update(events=result.events, occurrences=program.n, ranks=program.world_size,
           claim=doc["claim"], failed=doc["summary"]["failed"],
           canary_bytes=canary["stats"]["bytes_canary"],
           records=canary["stats"]["records_canary"])
print(json.dumps(out))
"""


def _total(out: dict) -> float:
    return sum(out[f"{s}_s"] for s in STAGES)


def _stages(out: dict) -> str:
    return (
        f"ingest {out['ingest_s']:.1f} s (peak {out['ingest_rss_mb']:.0f} MiB), "
        f"load+match {out['load_s']:.1f} s (peak {out['load_rss_mb']:.0f} MiB), "
        f"compile {out['compile_s']:.1f} s (peak {out['compile_rss_mb']:.0f} MiB), "
        f"verify {out['verify_s']:.1f} s (peak {out['verify_rss_mb']:.0f} MiB); "
        f"{out['occurrences']:,} occurrences, canary {out['records']:,} records / "
        f"{out['canary_bytes']:,} B, claim {out['claim']} ({out['failed']} checks failed)"
    )


def _case(shape: dict, steps: int, cap_gib: float = CAP_GIB) -> tuple[dict, float]:
    return run_child(_child(str(training_trace(**shape, steps=steps)), cap_gib), timeout=7200)


def _gib_per_m(peak_mb: float, events: int) -> float:
    return peak_mb / 1024 / (events / 1e6)


def _available_gib() -> float:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2**20
    return 0.0


def _large_case(
    label: str, shape: dict, steps: int, ten: tuple[dict, float], one: tuple[dict, float]
) -> dict:
    """The ~100M case of ``shape`` (or ~30M and an extrapolation, see module doc); its
    input is deleted afterwards. ``ten`` and ``one``: (result, peak MiB) of the 10M and
    1M cases."""
    ten_out, ten_rss = ten
    ranks = shape["tp"] * shape["pp"] * shape["dp"]  # events scale with ranks x steps
    target = (
        f"completes within {CAP_GIB:g} GiB peak; <= {TARGET_GIB_PER_M} GiB per million "
        "rank events beyond the 10M case"
    )
    available = _available_gib()
    full_events = ten_out["events"] / STEPS_10M * steps * ranks / ten_out["ranks"]
    early_slope = (ten_rss - one[1]) / (ten_out["events"] - one[0]["events"])  # MiB/event
    projected_gib = (ten_rss + early_slope * (full_events - ten_out["events"])) / 1024
    if available < MIN_AVAILABLE_GIB:
        why = f"{available:.1f} GiB available < {MIN_AVAILABLE_GIB:g}"
    elif projected_gib > CAP_GIB:
        why = f"the 1M -> 10M slope projects {projected_gib:.1f} GiB > {CAP_GIB:g} at ~100M"
    else:
        why = ""
    fallback = bool(why)
    run_steps = max(1, round(steps * FALLBACK_FRACTION)) if fallback else steps
    expected_events = full_events / steps * run_steps
    free_disk = shutil.disk_usage(WORK.parent if not WORK.exists() else WORK).free
    if free_disk < 1.3 * expected_events * JSONL_BYTES_PER_EVENT:
        return row(label, "skipped", "s", "", None, None, target, "",
                   None, f"skipped: {free_disk / 1e9:.0f} GB free on disk, the input needs "
                   f"~{expected_events * JSONL_BYTES_PER_EVENT / 1e9:.0f} GB")  # fmt: skip
    path = training_trace(**shape, steps=run_steps)
    try:
        out, rss = run_child(_child(str(path), CAP_GIB), timeout=7200)
    except RuntimeError as err:
        return row(label, "failed", "s", "", None, None, target, False, None, str(err)[-300:])
    finally:
        path.unlink(missing_ok=True)
    slope = (rss - ten_rss) / 1024 / ((out["events"] - ten_out["events"]) / 1e6)
    notes = (
        f"{out['events']:,} rank events, {out['ranks']:,} ranks; "
        f"{out['events'] / _total(out):,.0f} events/s end to end; "
        f"{_gib_per_m(rss, out['events']):.3f} GiB per million events (whole peak), "
        f"{slope:.3f} GiB per further million beyond the 10M case; " + _stages(out)
    )
    peak, met = rss, rss <= CAP_GIB * 1024 and slope <= TARGET_GIB_PER_M
    if fallback:
        full_events = out["events"] / run_steps * steps
        peak = rss + slope * 1024 * (full_events - out["events"]) / 1e6
        notes = (
            f"RAN AT ~30M, NOT 100M ({why}); time is the ~30M run's, the peak figure is "
            f"extrapolated to {full_events:,.0f} events from the 10M -> 30M slope (measured "
            f"peak {rss:.0f} MiB): " + notes
        )
        label = label.replace("~100M", "~30M (peak extrapolated to ~100M)")
        met = ""
    return row(label, round(_total(out), 1), "s",
               f"the 10M case: {ten_out['events']:,} events in {_total(ten_out):.1f} s",
               round(_total(ten_out), 1), round(_total(out) / _total(ten_out), 2), target,
               met, round(peak, 1), notes)  # fmt: skip


def selected_cases(cases: list[str] | None) -> tuple[str, ...]:
    """The cases to run, in run order: ``cases`` (every case when None) with the
    comparators each needs added (see ``NEEDS``); refuses an unknown name."""
    chosen = set(CASES if cases is None else cases)
    unknown = chosen - set(CASES)
    if unknown:
        raise ValueError(f"unknown case(s) {sorted(unknown)}; known: {', '.join(CASES)}")
    for name in list(chosen):
        chosen |= set(NEEDS[name])
    return tuple(c for c in CASES if c in chosen)


def run(quick: bool, cases: list[str] | None = None) -> list[dict]:
    """The rows of the selected ``cases`` (every case when None; see ``selected_cases``)."""
    chosen = selected_cases(cases)
    small_steps = STEPS_QUICK if quick else STEPS_1M
    small, small_rss = _case(SHAPE, small_steps)
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
            f"{small['events'] / small_s:,.0f} events/s end to end; "
            f"{_gib_per_m(small_rss, small['events']):.3f} GiB per million events; "
            + _stages(small),
        )
    ]
    if quick:
        for label in (
            "pipeline ~10M rank events, 1024 ranks (training)",
            "pipeline ~100M rank events, 1024 ranks (training)",
            "pipeline ~100M rank events, 16,384 ranks (training)",
        ):
            rows.append(
                row(label, "skipped", "s", "", None, None, "", "", None,
                    "skipped in quick mode (run `python -m bench --only bench_scale`)")
            )  # fmt: skip
        return rows
    if "10m" not in chosen:
        return rows
    big, big_rss = _case(SHAPE, STEPS_10M)
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
            f"time ratio per event {ratio / events_ratio:.2f}; "
            f"{_gib_per_m(big_rss, big['events']):.3f} GiB per million events; " + _stages(big),
        )
    )
    for name, label, shape, steps in (
        ("100m-1024", "pipeline ~100M rank events, 1024 ranks (training)", SHAPE, STEPS_100M),
        ("100m-16k", "pipeline ~100M rank events, 16,384 ranks (training)", WIDE_SHAPE,
         WIDE_STEPS_100M),
    ):  # fmt: skip
        if name in chosen:
            rows.append(_large_case(label, shape, steps, (big, big_rss), (small, small_rss)))
    return rows


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.bench_scale [--full] [--cases NAME,...]``: print the rows as JSON."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m bench.bench_scale",
        description="The scale benchmark alone, optionally only some of its cases.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--full", action="store_true", help="full mode (quick mode runs only the ~163k case)"
    )
    parser.add_argument(
        "--cases",
        default=",".join(CASES),
        help="comma-separated cases to run (full mode), each with the comparators it needs "
        "(10m: 1m; 100m-*: 1m and 10m); known: " + ", ".join(CASES),
    )
    args = parser.parse_args(argv)
    try:
        cases = selected_cases([c.strip() for c in args.cases.split(",") if c.strip()])
    except ValueError as err:
        parser.error(str(err))
    print(json.dumps(run(quick=not args.full, cases=list(cases)), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
