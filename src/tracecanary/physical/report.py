"""The physical canary-vs-workload comparison, computed only from attempt archives.

For each physical configuration, every attempt of the canary (reduced execution) and of
the full program is read (``rows.parquet``); per occurrence and timed pass the latency is
the slowest rank's (a collective is done when its last member is), per occurrence the
median over passes; latency metrics are weighted by the canary's execution weights.
Reported per configuration: p50, p95, p99, max and mean latency for canary and full, and
the replay time of one pass (median over passes of the last end minus the first start,
over ranks). Across configurations: pairwise ranking agreement between canary and full
per metric (share of agreeing pairs, ties under a relative tolerance) and Kendall's tau-b;
the runtime reduction (canary pass time over full pass time) per configuration.

Only archives whose status is ``complete`` count; any other is listed as excluded with
its reason. Nothing here is simulated: the numbers are measurements on the machine the
archives record (see their environment.json).
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from tracecanary.canonical import write_json, write_text

METRICS = ("p50", "p95", "p99", "max", "mean")
RANK_METRICS = ("p50", "p95", "p99", "mean")


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    cum = np.cumsum(w)
    idx = int(np.searchsorted(cum, q * cum[-1], side="left"))
    return float(v[min(idx, v.size - 1)])


def attempt_metrics(archive: Path) -> dict:
    """Latency metrics (us) and pass time (ms) of one complete attempt archive."""
    rows = pq.read_table(
        archive / "rows.parquet",
        columns=[
            "occ",
            "iteration",
            "rank",
            "start_ns",
            "end_ns",
            "latency_ns",
            "weight",
            "correct",
        ],
    ).to_pandas()
    per = rows.groupby(["occ", "iteration"], sort=True).agg(
        latency=("latency_ns", "max"), weight=("weight", "first")
    )
    occ = per.groupby(level="occ").agg(latency=("latency", "median"), weight=("weight", "first"))
    lat = occ["latency"].to_numpy(np.float64) / 1000.0
    w = occ["weight"].to_numpy(np.float64)
    passes = rows.groupby("iteration").agg(first=("start_ns", "min"), last=("end_ns", "max"))
    pass_ms = float(np.median((passes["last"] - passes["first"]).to_numpy(np.float64))) / 1e6
    return {
        "p50": _weighted_quantile(lat, w, 0.50),
        "p95": _weighted_quantile(lat, w, 0.95),
        "p99": _weighted_quantile(lat, w, 0.99),
        "max": float(lat.max()),
        "mean": float(np.sum(lat * w) / np.sum(w)),
        "pass_ms": pass_ms,
        "occurrences_executed": int(occ.shape[0]),
        "weight_total": float(w.sum()),
        "rows": int(len(rows)),
        "incorrect_rows": int((~rows["correct"].astype(bool)).sum()),
    }


def _decide(a: float, b: float, tie: float) -> int:
    if abs(a - b) <= tie * max(abs(a), abs(b)):
        return 0
    return -1 if a < b else 1


def ranking_agreement(canary: dict[str, float], full: dict[str, float], tie: float) -> dict:
    from scipy.stats import kendalltau

    names = sorted(set(canary) & set(full))
    pairs = list(itertools.combinations(names, 2))
    agree = sum(
        1 for a, b in pairs if _decide(canary[a], canary[b], tie) == _decide(full[a], full[b], tie)
    )
    tau = None
    if len(names) >= 2:
        t = kendalltau([canary[n] for n in names], [full[n] for n in names], variant="b").statistic
        tau = None if t is None or math.isnan(t) else float(t)
    return {
        "pairs": len(pairs),
        "agreeing_pairs": agree,
        "agreement": (agree / len(pairs)) if pairs else None,
        "kendall_tau_b": tau,
        "canary_order": sorted(names, key=lambda n: (canary[n], n)),
        "full_order": sorted(names, key=lambda n: (full[n], n)),
    }


def build_physical_report(attempts: list[str], *, tie_tolerance: float = 0.02) -> dict:
    """Attempt dirs named .../<program>/<config>/rep<k> (program = canary | full)."""
    by: dict[tuple[str, str], list[dict]] = {}
    excluded = []
    environment = None
    for path in sorted(attempts):
        p = Path(path)
        program, config = p.parent.parent.name, p.parent.name
        attempt = json.loads((p / "attempt.json").read_text())
        if attempt.get("status") != "complete":
            excluded.append(
                {
                    "attempt": str(p),
                    "status": attempt.get("status"),
                    "reason": attempt.get("reason"),
                }
            )
            continue
        if environment is None and (p / "environment.json").exists():
            env = json.loads((p / "environment.json").read_text())
            environment = {
                k: env.get(k)
                for k in ("torch", "backend", "hosts", "cpu_model", "nccl_version")
                if k in env
            }
            if isinstance(environment.get("torch"), dict):
                environment["torch"] = environment["torch"].get("version")
        by.setdefault((program, config), []).append(attempt_metrics(p))
    configs = sorted({c for _, c in by})
    per_config = {}
    for config in configs:
        entry = {}
        for program in ("canary", "full"):
            runs = by.get((program, config), [])
            if runs:
                entry[program] = {
                    m: float(np.median([r[m] for r in runs])) for m in (*METRICS, "pass_ms")
                }
                entry[program]["repetitions"] = len(runs)
                entry[program]["occurrences_executed"] = runs[0]["occurrences_executed"]
                entry[program]["weight_total"] = runs[0]["weight_total"]
        if "canary" in entry and "full" in entry:
            entry["runtime_reduction"] = entry["canary"]["pass_ms"] / entry["full"]["pass_ms"]
        per_config[config] = entry
    complete = [c for c in configs if "canary" in per_config[c] and "full" in per_config[c]]
    agreement = {
        m: ranking_agreement(
            {c: per_config[c]["canary"][m] for c in complete},
            {c: per_config[c]["full"][m] for c in complete},
            tie_tolerance,
        )
        for m in RANK_METRICS
    }
    return {
        "format": "tracecanary.physical-report/v1",
        "measured": "real collectives (torch.distributed); numbers are measurements from the attempt archives",
        "environment": environment,
        "tie_tolerance": tie_tolerance,
        "configs": per_config,
        "ranking_agreement": agreement,
        "runtime_reduction": {c: per_config[c].get("runtime_reduction") for c in complete},
        "simulator_agreement": {
            "status": "not_computed",
            "reason": "the physical configurations (replayer modes and environment variables) have no declared counterparts among the simulator's backend configurations, so their rankings are not comparable; this is a separate claim that needs such a mapping",
        },
        "excluded_attempts": excluded,
    }


def _triple(d: dict | None) -> str:
    return "-" if d is None else f"{d['p50']:.1f} / {d['p99']:.1f} / {d['mean']:.1f}"


def _num(d: dict | None, key: str) -> str:
    return "-" if d is None else f"{d[key]:.1f}"


def physical_markdown(report: dict, source: str) -> list[str]:
    lines = [
        f"### Physical replay of `{source}` ({'; '.join(f'{k}={v}' for k, v in (report.get('environment') or {}).items() if k in ('torch', 'backend'))})",
        "",
    ]
    lines += [
        "| configuration | canary p50 / p99 / mean (us) | full p50 / p99 / mean (us) | canary pass (ms) | full pass (ms) | runtime reduction |",
        "|---|---|---|---|---|---|",
    ]
    for name, e in report["configs"].items():
        c, f = e.get("canary"), e.get("full")
        rr = e.get("runtime_reduction")
        lines.append(
            f"| {name} | {_triple(c)} | {_triple(f)} | {_num(c, 'pass_ms')} | {_num(f, 'pass_ms')} | "
            f"{'-' if rr is None else f'{rr:.3f}'} |"
        )
    lines += ["", "Ranking agreement between canary and full program across configurations:", ""]
    for m, a in report["ranking_agreement"].items():
        share = "n/a" if a["agreement"] is None else f"{a['agreeing_pairs']}/{a['pairs']} pairs"
        tau = "n/a" if a["kendall_tau_b"] is None else f"{a['kendall_tau_b']:.3f}"
        lines.append(
            f"- {m}: {share}, Kendall tau-b {tau}; canary `{' < '.join(a['canary_order'])}`, full `{' < '.join(a['full_order'])}`"
        )
    lines += [
        "",
        f"Simulator vs physical ranking (separate claim): {report['simulator_agreement']['status']}: {report['simulator_agreement']['reason']}.",
    ]
    if report["excluded_attempts"]:
        lines += [
            "",
            f"Excluded attempts: {len(report['excluded_attempts'])} (not complete; kept as evidence).",
        ]
    return lines + [""]


def write_physical(report_json: str, report_md: str, attempts: list[str], source: str) -> None:
    report = build_physical_report(attempts)
    lines = physical_markdown(report, source)
    report["summary_lines"] = lines
    write_json(report_json, report)
    write_text(report_md, "\n".join([f"# Physical campaign: {source}", ""] + lines))
