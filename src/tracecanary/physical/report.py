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

Noise first: per configuration, program and metric a bootstrap confidence interval of the
median over repetitions (``BOOTSTRAP_RESAMPLES`` resamples of the repetitions, fixed
seed, so the report is a pure function of the archives). A pair of configurations is
*decided* only when their intervals separate, otherwise ``undetermined``; with fewer than
``DECISION_MIN_REPETITIONS`` repetitions no interval is formed and nothing is decided.
Agreement between canary and full program is stated over the pairs decided in both, with
the undetermined count beside it.

The physical gate (``gate``): ``fail`` when a pair decided in both programs flips between
canary and full program, or when a configuration's canary/full pass-time ratio exceeds
``max_runtime_ratio``; ``warning`` when no pair could be decided (too few repetitions or
overlapping intervals everywhere), never a silent pass; else ``pass``.

The separate claim (``simulator_agreement``): with a calibrated backends file and the
replayed PARAM programs, the simulator twin (``sim/twin.py``) of every configuration is
priced from measured ladders and its ranking compared with the machine's, for the full
program and the canary, per metric: pairs the machine decided, how many the simulator
ranks the same way, Kendall's tau-b, and per configuration the prediction error of the
mean latency (simulated minus measured over measured, %). Without that evidence it is
``not_computed`` with the reason naming what is missing.

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
from tracecanary.formats.ids import PHYSICAL_REPORT_FORMAT
from tracecanary.formats.schemas import validate
from tracecanary.physical.gate_threshold import DEFAULT_MAX_RUNTIME_RATIO
from tracecanary.sim.metrics import weighted_quantile_values
from tracecanary.sim.ranking import DEFAULT_TIE_TOLERANCE, RANKING_METRICS, decide

METRICS = ("p50", "p95", "p99", "max", "mean")
RANK_METRICS = RANKING_METRICS
PROGRAMS = ("canary", "full")
DECISION_MIN_REPETITIONS = 3
RECOMMENDED_REPETITIONS = 5
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_CONFIDENCE = 0.95
BOOTSTRAP_SEED = 20261201


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    return float(weighted_quantile_values(values, weights, [q])[0])


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


def bootstrap_interval(values: list[float]) -> list[float] | None:
    """[low, high] percentile bootstrap interval of the median of ``values`` (the
    repetitions), or None with fewer than DECISION_MIN_REPETITIONS values."""
    v = np.asarray(values, dtype=np.float64)
    if v.size < DECISION_MIN_REPETITIONS:
        return None
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    idx = rng.integers(0, v.size, size=(BOOTSTRAP_RESAMPLES, v.size))
    stats = np.median(v[idx], axis=1)
    tail = (1.0 - BOOTSTRAP_CONFIDENCE) / 2.0
    low, high = np.quantile(stats, [tail, 1.0 - tail])
    return [float(low), float(high)]


def decide_by_interval(a: list[float] | None, b: list[float] | None) -> int | None:
    """-1 when a's interval lies wholly below b's, 1 when above, None (undetermined)
    when they overlap or either is missing."""
    if a is None or b is None:
        return None
    if a[1] < b[0]:
        return -1
    if b[1] < a[0]:
        return 1
    return None


def interval_decisions(
    intervals: dict[str, list[float] | None],
) -> dict[tuple[str, str], int | None]:
    return {
        (a, b): decide_by_interval(intervals[a], intervals[b])
        for a, b in itertools.combinations(sorted(intervals), 2)
    }


def _kendall(x: dict[str, float], y: dict[str, float]) -> float | None:
    from scipy.stats import kendalltau

    names = sorted(set(x) & set(y))
    if len(names) < 2:
        return None
    t = kendalltau([x[n] for n in names], [y[n] for n in names], variant="b").statistic
    return None if t is None or math.isnan(t) else float(t)


def ranking_agreement(
    canary: dict[str, float],
    full: dict[str, float],
    tie: float,
    canary_intervals: dict[str, list[float] | None] | None = None,
    full_intervals: dict[str, list[float] | None] | None = None,
) -> dict:
    """Point-estimate agreement (every pair, ties under ``tie``) and, with intervals,
    agreement over the pairs decided in both programs and the flips among them."""
    names = sorted(set(canary) & set(full))
    pairs = list(itertools.combinations(names, 2))
    agree = sum(
        1 for a, b in pairs if decide(canary[a], canary[b], tie) == decide(full[a], full[b], tie)
    )
    out = {
        "pairs": len(pairs),
        "agreeing_pairs": agree,
        "agreement": (agree / len(pairs)) if pairs else None,
        "kendall_tau_b": _kendall(canary, full),
        "canary_order": sorted(names, key=lambda n: (canary[n], n)),
        "full_order": sorted(names, key=lambda n: (full[n], n)),
    }
    cdec = interval_decisions({n: (canary_intervals or {}).get(n) for n in names})
    fdec = interval_decisions({n: (full_intervals or {}).get(n) for n in names})
    decided = [p for p in pairs if cdec[p] is not None and fdec[p] is not None]
    flips = [list(p) for p in decided if cdec[p] != fdec[p]]
    out.update(
        {
            "decided_pairs": len(decided),
            "undetermined_pairs": len(pairs) - len(decided),
            "agreeing_decided_pairs": len(decided) - len(flips),
            "decided_agreement": (len(decided) - len(flips)) / len(decided) if decided else None,
            "flips": flips,
            "decided_full_pairs": sum(1 for p in pairs if fdec[p] is not None),
            "decided_canary_pairs": sum(1 for p in pairs if cdec[p] is not None),
        }
    )
    return out


def _read_attempt(p: Path) -> dict:
    return json.loads((p / "attempt.json").read_text())


def campaign_labels(attempts: list[str]) -> list[tuple[str, str, str]]:
    """(program, configuration, path) of attempts laid out as the campaign lays them out,
    ``.../<program>/<config>/rep<k>``."""
    return [(Path(a).parent.parent.name, Path(a).parent.name, a) for a in attempts]


def _config_name(archive: Path, attempt: dict) -> str:
    """The physical configuration an archive ran: the one it records, else its directory
    in the campaign layout (``<config>/rep<k>``), else ``default``."""
    recorded = attempt.get("physical_config")
    if isinstance(recorded, dict) and recorded.get("name"):
        return str(recorded["name"])
    if archive.name.startswith("rep") and archive.name[3:].isdigit():
        return archive.parent.name
    return "default"


def comparison_attempts(canary: str, full: str) -> list[tuple[str, str, str]]:
    """(program, configuration, path) of every attempt under ``canary`` and ``full``: each
    an attempt archive, or a directory of them laid out ``<config>/rep<k>/`` (the
    campaign's ``physical/{source}/{canary,full}/``).

    Refuses (``InputError``) a path holding no archive and two programs replayed under
    different configurations; ``ClaimFailed`` when no configuration has a complete attempt
    of both programs (naming the first attempt that is not complete)."""
    from tracecanary.errors import ClaimFailed, InputError

    labelled = []
    configs: dict[str, set[str]] = {}
    for program, root in (("canary", Path(canary)), ("full", Path(full))):
        archives = [root] if (root / "attempt.json").is_file() else sorted(root.glob("*/rep*/"))
        archives = [a for a in archives if (a / "attempt.json").is_file()]
        if not archives:
            raise InputError(
                "no attempt archive here (attempt.json) nor under <config>/rep<k>/",
                file=str(root),
                field="attempt.json",
            )
        for archive in archives:
            attempt = _read_attempt(archive)
            config = _config_name(archive, attempt)
            labelled.append((program, config, str(archive), attempt))
            configs.setdefault(program, set()).add(config)
    if configs["canary"] != configs["full"]:
        raise InputError(
            f"configurations differ: canary {', '.join(sorted(configs['canary']))}, "
            f"full {', '.join(sorted(configs['full']))}",
            file=full,
            field="physical_config",
        )
    complete = {(p, c) for p, c, _, a in labelled if a.get("status") == "complete"}
    if not any(("canary", c) in complete and ("full", c) in complete for c in configs["full"]):
        _, _, path, attempt = next(x for x in labelled if x[3].get("status") != "complete")
        raise ClaimFailed(
            f"attempt {attempt.get('status')} ({attempt.get('reason')}): nothing to compare",
            file=path,
            field="status",
        )
    return [(p, c, path) for p, c, path, _ in labelled]


def build_physical_report(
    attempts: list[str] | list[tuple[str, str, str]],
    *,
    tie_tolerance: float = DEFAULT_TIE_TOLERANCE,
    max_runtime_ratio: float = DEFAULT_MAX_RUNTIME_RATIO,
    backends: str | None = None,
    programs: dict[str, str] | None = None,
) -> dict:
    """Attempt dirs named .../<program>/<config>/rep<k> (program = canary | full), or
    (program, configuration, path) triples (``comparison_attempts``); ``backends``
    (calibrated) and ``programs`` ({canary, full}: PARAM program dirs) enable the
    simulator comparison."""
    by: dict[tuple[str, str], list[dict]] = {}
    excluded = []
    environment = None
    timestamped: set[bool] = set()
    labelled = [a if isinstance(a, tuple) else campaign_labels([a])[0] for a in attempts]
    for program, config, path in sorted(labelled, key=lambda x: x[2]):
        p = Path(path)
        attempt = _read_attempt(p)
        if attempt.get("status") != "complete":
            excluded.append(
                {
                    "attempt": str(p),
                    "status": attempt.get("status"),
                    "reason": attempt.get("reason"),
                }
            )
            continue
        timestamped.add(bool(attempt.get("use_timestamps", False)))
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
        for program in PROGRAMS:
            runs = by.get((program, config), [])
            if runs:
                entry[program] = {
                    m: float(np.median([r[m] for r in runs])) for m in (*METRICS, "pass_ms")
                }
                entry[program]["repetitions"] = len(runs)
                entry[program]["occurrences_executed"] = runs[0]["occurrences_executed"]
                entry[program]["weight_total"] = runs[0]["weight_total"]
                entry[program]["interval"] = {
                    m: bootstrap_interval([r[m] for r in runs]) for m in (*METRICS, "pass_ms")
                }
        if "canary" in entry and "full" in entry:
            entry["runtime_reduction"] = entry["canary"]["pass_ms"] / entry["full"]["pass_ms"]
        per_config[config] = entry
    complete = [c for c in configs if "canary" in per_config[c] and "full" in per_config[c]]
    agreement = {
        m: ranking_agreement(
            {c: per_config[c]["canary"][m] for c in complete},
            {c: per_config[c]["full"][m] for c in complete},
            tie_tolerance,
            {c: per_config[c]["canary"]["interval"][m] for c in complete},
            {c: per_config[c]["full"]["interval"][m] for c in complete},
        )
        for m in RANK_METRICS
    }
    reps = [per_config[c][p]["repetitions"] for c in complete for p in PROGRAMS]
    gate = physical_gate(
        agreement,
        {c: per_config[c]["runtime_reduction"] for c in complete},
        max_runtime_ratio=max_runtime_ratio,
        min_repetitions=min(reps) if reps else 0,
    )
    return {
        "format": PHYSICAL_REPORT_FORMAT,
        "measured": "real collectives (torch.distributed); numbers are measurements from the attempt archives",
        "environment": environment,
        "tie_tolerance": tie_tolerance,
        "noise": {
            "statistic": "median over repetitions",
            "interval": f"percentile bootstrap, {BOOTSTRAP_CONFIDENCE:.0%}, "
            f"{BOOTSTRAP_RESAMPLES} resamples of the repetitions, seed {BOOTSTRAP_SEED}",
            "decision": "a pair is decided only when its two intervals separate",
            "decision_min_repetitions": DECISION_MIN_REPETITIONS,
            "recommended_repetitions": RECOMMENDED_REPETITIONS,
        },
        "configs": per_config,
        "ranking_agreement": agreement,
        "runtime_reduction": {c: per_config[c].get("runtime_reduction") for c in complete},
        "gate": gate,
        "simulator_agreement": simulator_agreement(
            per_config,
            complete,
            backends=backends,
            programs=programs,
            tie_tolerance=tie_tolerance,
            timestamped=timestamped,
        ),
        "excluded_attempts": excluded,
    }


def physical_gate(
    agreement: dict,
    runtime_ratio: dict[str, float],
    *,
    max_runtime_ratio: float,
    min_repetitions: int,
) -> dict:
    """``fail`` (a decided pair flips, or a runtime ratio above its threshold),
    ``warning`` (nothing could be decided), else ``pass``; with every reason."""
    reasons = []
    for metric, a in agreement.items():
        for x, y in a["flips"]:
            reasons.append(f"{metric}: the pair ({x}, {y}) flips between canary and full program")
    for config, ratio in sorted(runtime_ratio.items()):
        if ratio > max_runtime_ratio:
            reasons.append(
                f"{config}: canary/full runtime ratio {ratio:.3f} exceeds {max_runtime_ratio:g}"
            )
    decided = sum(a["decided_pairs"] for a in agreement.values())
    warnings = []
    if min_repetitions < DECISION_MIN_REPETITIONS:
        warnings.append(
            f"too few repetitions ({min_repetitions} < {DECISION_MIN_REPETITIONS}) for any "
            "decision: no confidence interval, every pair undetermined"
        )
    elif min_repetitions < RECOMMENDED_REPETITIONS:
        warnings.append(
            f"{min_repetitions} repetitions (fewer than the recommended {RECOMMENDED_REPETITIONS})"
        )
    if decided == 0 and runtime_ratio:
        warnings.append("no pair was decided in both programs: the ranking claim is untested")
    status = "fail" if reasons else ("warning" if decided == 0 else "pass")
    return {
        "status": status,
        "reasons": reasons,
        "warnings": warnings,
        "decided_pairs": decided,
        "max_runtime_ratio": max_runtime_ratio,
    }


def simulator_agreement(
    per_config: dict,
    complete: list[str],
    *,
    backends: str | None,
    programs: dict[str, str] | None,
    tie_tolerance: float,
    timestamped: set[bool],
) -> dict:
    """The simulator twin's ranking against the machine's (see module doc)."""
    if backends is None:
        return {
            "status": "not_computed",
            "reason": "no calibrated backends file was given (tracecanary calibrate-backends "
            "builds one from the machine's ladders)",
        }
    if not programs or any(p not in programs for p in PROGRAMS):
        return {
            "status": "not_computed",
            "reason": "the replayed PARAM programs (canary and full) were not given",
        }
    if len(timestamped) > 1:
        return {
            "status": "not_computed",
            "reason": "attempts mix timestamped and back-to-back replay",
        }
    from tracecanary.errors import InputError
    from tracecanary.sim.backends import load_backends
    from tracecanary.sim.twin import op_table, simulate_twin

    loaded = load_backends(backends)
    missing = [c for c in complete if c not in loaded.configs]
    if missing:
        return {
            "status": "not_computed",
            "reason": "no calibrated simulator configuration for the physical configuration(s) "
            + ", ".join(missing),
        }
    is_ts = timestamped == {True}
    predicted: dict[str, dict[str, dict]] = {}
    try:
        for program in PROGRAMS:
            table = op_table(programs[program])
            predicted[program] = {
                c: simulate_twin(table, loaded.configs[c], timestamped=is_ts).metrics_us()
                for c in complete
            }
    except InputError as err:
        return {"status": "not_computed", "reason": err.one_line()}
    per_program = {}
    for program in PROGRAMS:
        metrics = {}
        for m in RANK_METRICS:
            sim = {c: predicted[program][c][m] for c in complete}
            meas = {c: per_config[c][program][m] for c in complete}
            intervals = {c: per_config[c][program]["interval"][m] for c in complete}
            decisions = interval_decisions(intervals)
            decided = [(p, d) for p, d in decisions.items() if d is not None]
            agree = sum(1 for (a, b), d in decided if decide(sim[a], sim[b], tie_tolerance) == d)
            metrics[m] = {
                "pairs": len(decisions),
                "decided_pairs": len(decided),
                "undetermined_pairs": len(decisions) - len(decided),
                "agreeing_pairs": agree,
                "agreement": agree / len(decided) if decided else None,
                "kendall_tau_b": _kendall(sim, meas),
                "simulator_order": sorted(complete, key=lambda n: (sim[n], n)),
                "machine_order": sorted(complete, key=lambda n: (meas[n], n)),
            }
        per_program[program] = {
            "metrics": metrics,
            "prediction_error_pct": {
                c: (predicted[program][c]["mean"] - per_config[c][program]["mean"])
                / per_config[c][program]["mean"]
                * 100.0
                for c in complete
            },
            "predicted": predicted[program],
        }
    decided = sum(v["decided_pairs"] for pp in per_program.values() for v in pp["metrics"].values())
    agreeing = sum(
        v["agreeing_pairs"] for pp in per_program.values() for v in pp["metrics"].values()
    )
    return {
        "status": "computed",
        "backends_sha256": loaded.sha256,
        "timestamped": is_ts,
        "decided_pairs": decided,
        "agreeing_pairs": agreeing,
        "agreement": agreeing / decided if decided else None,
        "programs": per_program,
    }


def _triple(d: dict | None) -> str:
    return "-" if d is None else f"{d['p50']:.1f} / {d['p99']:.1f} / {d['mean']:.1f}"


def _num(d: dict | None, key: str) -> str:
    return "-" if d is None else f"{d[key]:.1f}"


def _interval(d: dict | None, key: str) -> str:
    if d is None or d["interval"][key] is None:
        return "-"
    lo, hi = d["interval"][key]
    return f"[{lo:.1f}, {hi:.1f}]"


def physical_markdown(report: dict, source: str) -> list[str]:
    lines = [
        f"### Physical replay of `{source}` ({'; '.join(f'{k}={v}' for k, v in (report.get('environment') or {}).items() if k in ('torch', 'backend'))})",
        "",
    ]
    gate = report["gate"]
    verdict = {"pass": "PASS", "fail": "FAIL", "warning": "WARNING"}[gate["status"]]
    lines.append(
        f"**Physical gate: {verdict}** ({gate['decided_pairs']} decided pair-metrics"
        f"{'; ' + '; '.join(gate['reasons']) if gate['reasons'] else ''}"
        f"{'; ' + '; '.join(gate['warnings']) if gate['warnings'] else ''})."
    )
    lines += [
        "",
        "| configuration | reps | canary p50 / p99 / mean (us) | canary mean 95% CI | full p50 / p99 / mean (us) | full mean 95% CI | canary pass (ms) | full pass (ms) | canary/full runtime |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, e in report["configs"].items():
        c, f = e.get("canary"), e.get("full")
        rr = e.get("runtime_reduction")
        reps = "/".join(str(x["repetitions"]) for x in (c, f) if x is not None)
        lines.append(
            f"| {name} | {reps} | {_triple(c)} | {_interval(c, 'mean')} | {_triple(f)} | "
            f"{_interval(f, 'mean')} | {_num(c, 'pass_ms')} | {_num(f, 'pass_ms')} | "
            f"{'-' if rr is None else f'{rr:.3g}'} |"
        )
    lines += ["", "Ranking agreement between canary and full program across configurations:", ""]
    for m, a in report["ranking_agreement"].items():
        share = (
            "n/a"
            if a["decided_agreement"] is None
            else f"{a['agreeing_decided_pairs']}/{a['decided_pairs']} decided pairs"
        )
        tau = "n/a" if a["kendall_tau_b"] is None else f"{a['kendall_tau_b']:.3f}"
        lines.append(
            f"- {m}: {share} agree, {a['undetermined_pairs']} undetermined (intervals overlap); "
            f"Kendall tau-b {tau}; canary `{' < '.join(a['canary_order'])}`, full `{' < '.join(a['full_order'])}`"
        )
    sim = report["simulator_agreement"]
    lines.append("")
    if sim["status"] != "computed":
        lines.append(
            f"Simulator vs physical ranking (separate claim): {sim['status']}: {sim['reason']}."
        )
    else:
        share = (
            "n/a" if sim["agreement"] is None else f"{sim['agreeing_pairs']}/{sim['decided_pairs']}"
        )
        lines.append(
            f"Simulator (calibrated backends) vs physical ranking (separate claim): {share} of the "
            "pairs the machine decided rank the same way."
        )
        for program, pp in sim["programs"].items():
            parts = []
            for m, v in pp["metrics"].items():
                tau = "n/a" if v["kendall_tau_b"] is None else f"{v['kendall_tau_b']:.2f}"
                parts.append(
                    f"{m} {v['agreeing_pairs']}/{v['decided_pairs']} ({v['undetermined_pairs']} undetermined, tau-b {tau})"
                )
            errs = ", ".join(f"{c} {e:+.1f}%" for c, e in pp["prediction_error_pct"].items())
            dispatch = [c for c, v in pp["predicted"].items() if v.get("dispatch")]
            errs += f" (dispatch lateness measured for {', '.join(dispatch) or 'none'})"
            lines.append(f"- {program}: {'; '.join(parts)}; mean-latency prediction error {errs}")
    if report["excluded_attempts"]:
        lines += [
            "",
            f"Excluded attempts: {len(report['excluded_attempts'])} (not complete; kept as evidence).",
        ]
    return lines + [""]


def write_physical(
    report_json: str,
    report_md: str | None,
    attempts: list[str] | list[tuple[str, str, str]],
    source: str,
    *,
    backends: str | None = None,
    programs: dict[str, str] | None = None,
    max_runtime_ratio: float = DEFAULT_MAX_RUNTIME_RATIO,
    param_attempts: list[str] | None = None,
) -> dict:
    """``report_md`` None: no Markdown. ``param_attempts`` (replay-param archives): adds
    ``replayers``, both replayers side by side (``tracecanary.param.side_by_side``), to the report and its markdown."""
    report = build_physical_report(
        attempts, backends=backends, programs=programs, max_runtime_ratio=max_runtime_ratio
    )
    lines = physical_markdown(report, source)
    if param_attempts:
        from tracecanary.param.side_by_side import side_by_side, side_by_side_markdown

        paths = [a[2] if isinstance(a, tuple) else a for a in attempts]
        report["replayers"] = side_by_side([*paths, *param_attempts])
        lines += side_by_side_markdown(report["replayers"])
    report["summary_lines"] = lines
    validate(report, "physical-report", file=report_json)  # the contract, before writing
    write_json(report_json, report)
    if report_md is not None:
        write_text(report_md, "\n".join([f"# Physical campaign: {source}", ""] + lines))
    return report


def gate_failure_line(report: dict, subject: str) -> str:
    """The failed gate as one line: each flipping pair with the figures it flips on, and
    each configuration whose canary/full pass-time ratio exceeds the threshold, with the
    ratio and the threshold."""
    gate = report["gate"]
    flips: dict[tuple[str, str], list[str]] = {}
    agreements = report["ranking_agreement"]
    for metric in [m for m in RANK_METRICS if m in agreements]:  # the report's own order
        for x, y in agreements[metric]["flips"]:
            flips.setdefault((x, y), []).append(metric)
    parts = [
        f"the pair ({x}, {y}) is ranked one way by the canary and the other by the full "
        f"program on {', '.join(metrics)}"
        for (x, y), metrics in flips.items()
    ]
    limit = gate["max_runtime_ratio"]
    over = [
        f"{ratio:.3f} ({config})"
        for config, ratio in sorted(report["runtime_reduction"].items())
        if ratio is not None and ratio > limit
    ]
    if over:
        parts.append(
            f"canary/full pass-time ratio {', '.join(over)} exceeds max_runtime_ratio {limit:g}"
        )
    return f"physical gate failed for {subject}: " + "; ".join(parts or gate["reasons"])


def gate_exit_code(report: dict) -> int:
    """1 when the physical gate failed, else 0 (a warning is shown, not an exit)."""
    return 1 if report["gate"]["status"] == "fail" else 0
