"""Simulator controls: does the canary respond to each model mechanism, and to noise,
the way its source does?

A verified canary matches its source under the standard model. These controls ask the
follow-up a sceptical reader asks: if one mechanism of the model is switched off or
changed, or if service and arrival times are perturbed, does the canary still answer
like the full trace? Every entry is a simulator control, not a physical intervention
(``sim.report.ABLATION_LABEL``).

- **Ablations** (``sim.engine.ALL_ABLATIONS``): the source and the canary's executed
  program are replayed with one ablation applied. Per configuration, the latency mean and
  p99 of the canary are judged against the source's under the same ablation by the
  behaviour checks' own tolerances (``verify.behavior._check``), and the pairwise
  configuration decisions by ``ranking_changes``. ``shift`` is how far the ablation moved
  each side's mean latency from its plain replay (relative), so a reader sees which
  mechanisms matter for this workload and that the canary moved with the source.
  An ablation the model refuses for a program (``InputError``) is ``not_applicable`` with
  the reason.
- **Noise** (``sim.noise``, seeded, common random numbers within a program): both
  programs are replayed ``iterations`` times (each with its own draws); per configuration
  the mean latency's 95% interval over iterations for each side and the number of
  iterations in which the canary's mean latency passes the verifier's mean check against
  the source's of the same iteration; and the share of iterations in which the canary's
  pairwise mean-latency decisions equal the source's.

Guarantees: deterministic for (source, canary, backends, tolerances, noise settings);
a measurement, never a claim: the document says whether the canary tracks every control
(``tracks_every_control``) and the command exits 0 whenever it is written.
"""

from __future__ import annotations

from itertools import combinations

from tracecanary.errors import InputError
from tracecanary.formats.ids import CONTROLS_FORMAT
from tracecanary.program import Program
from tracecanary.sim.noise import NoiseSettings, draws, interval
from tracecanary.verify.behavior import Tolerances, _check, ranking_changes

CONTROL_METRICS = ("mean", "p99")


def _metrics(program: Program, backends, names, ablations=()) -> dict[str, dict]:
    from tracecanary.sim.report import workload_metrics

    return workload_metrics(program, backends, names, ablations)


def _shift(ablated: float | None, plain: float | None) -> float | None:
    if ablated is None or plain is None or plain == 0:
        return None
    return ablated / plain - 1.0


def ablation_entry(
    ablation: str,
    source: Program,
    executed: Program,
    backends,
    tolerances: Tolerances,
    names,
    plain: tuple[dict, dict],
) -> dict:
    """One ablation: per-configuration shifts and checks, ranking changes, ``tracks``."""
    try:
        src = _metrics(source, backends, names, (ablation,))
        can = _metrics(executed, backends, names, (ablation,))
    except InputError as exc:
        return {"ablation": ablation, "status": "not_applicable", "reason": str(exc)}
    src_plain, can_plain = plain
    tol = tolerances.content["latency"]
    configs, checks = {}, []
    for name in src:
        s_lat, c_lat = src[name]["latency"], can[name]["latency"]
        config_checks = [
            _check(name, f"latency.{m}", s_lat[f"{m}_ns"], c_lat[f"{m}_ns"], tol[m])
            for m in CONTROL_METRICS
        ]
        checks += config_checks
        configs[name] = {
            "source_shift": _shift(s_lat["mean_ns"], src_plain[name]["latency"]["mean_ns"]),
            "canary_shift": _shift(c_lat["mean_ns"], can_plain[name]["latency"]["mean_ns"]),
            "checks": config_checks,
        }
    _, _, changed = ranking_changes(src, can, tolerances)
    failed = sum(not c["pass"] for c in checks)
    return {
        "ablation": ablation,
        "status": "computed",
        "configs": configs,
        "checks": {"total": len(checks), "failed": failed},
        "ranking_changed": [list(k) for k in changed],
        "tracks": failed == 0 and not changed,
    }


def _noisy_means(program: Program, configs, settings: NoiseSettings) -> dict[str, list[float]]:
    """Per configuration, the weighted mean latency (ns) of each noisy iteration."""
    from tracecanary.sim.engine import prepare, simulate
    from tracecanary.sim.metrics import distribution

    prep = prepare(program)
    out: dict[str, list[float]] = {c.name: [] for c in configs}
    for k in range(settings.iterations):
        factor, delay = draws(settings, k, prep.n)
        for config in configs:
            result = simulate(prep, config, service_factor=factor, arrival_delay_ns=delay)
            out[config.name].append(float(distribution(result.latency_ns, prep.weight)["mean_ns"]))
    return out


def _iteration_decisions(means: dict[str, list[float]], k: int, tie: float) -> dict:
    from tracecanary.sim.ranking import decide

    return {
        (a, b): decide(means[a][k], means[b][k], tie) for a, b in combinations(sorted(means), 2)
    }


def noise_entry(
    source: Program, executed: Program, backends, tolerances: Tolerances, names, settings
) -> dict:
    """Per configuration: both sides' mean-latency intervals over the iterations and in
    how many iterations the canary's mean passes the verifier's latency-mean check
    against the source's of the same iteration; the share of iterations whose pairwise
    decisions agree."""
    configs = list(backends.select(names))
    src, can = _noisy_means(source, configs, settings), _noisy_means(executed, configs, settings)
    tol = tolerances.content["latency"]["mean"]
    per_config = {}
    for name in src:
        s, c = interval(src[name]), interval(can[name])
        passed = sum(
            _check(name, "latency.mean", a, b, tol)["pass"]
            for a, b in zip(src[name], can[name], strict=True)
        )
        per_config[name] = {
            "source_mean_ns": {k: s[k] for k in ("mean", "ci_low", "ci_high")},
            "canary_mean_ns": {k: c[k] for k in ("mean", "ci_low", "ci_high")},
            "mean_check_passed": passed,
        }
    tie = tolerances.tie_tolerance
    agreeing = sum(
        _iteration_decisions(src, k, tie) == _iteration_decisions(can, k, tie)
        for k in range(settings.iterations)
    )
    n = settings.iterations
    return {
        "protocol": settings.as_protocol(),
        "configs": per_config,
        "ranking_agreement": agreeing / n,
        "tracks": all(v["mean_check_passed"] == n for v in per_config.values()) and agreeing == n,
    }


def compare_controls(
    source: Program,
    canary: dict,
    backends,
    tolerances: Tolerances,
    *,
    source_digest: str,
    canary_digest: str,
    noise: NoiseSettings,
    config_names: list[str] | None = None,
    ablations: tuple[str, ...] | None = None,
) -> dict:
    """The ``tracecanary.controls/v1`` document (see the module doc)."""
    from tracecanary.compile.expand import executed_program, expand_canary
    from tracecanary.sim.engine import ALL_ABLATIONS
    from tracecanary.sim.report import ABLATION_LABEL

    names = config_names or None
    executed = executed_program(canary, expand_canary(canary, executed=False))
    plain = (_metrics(source, backends, names), _metrics(executed, backends, names))
    entries = [
        ablation_entry(a, source, executed, backends, tolerances, names, plain)
        for a in (ALL_ABLATIONS if ablations is None else ablations)
    ]
    noisy = noise_entry(source, executed, backends, tolerances, names, noise)
    computed = [e for e in entries if e["status"] == "computed"]
    return {
        "format": CONTROLS_FORMAT,
        "label": ABLATION_LABEL,
        "source": {"sha256": source_digest, "occurrences": source.n},
        "canary": {
            "sha256": canary_digest,
            "claim": canary.get("claim"),
            "occurrences_executed": executed.n,
        },
        "backends": {"sha256": backends.sha256, "configs": list(plain[0])},
        "tolerances": tolerances.content,
        "ablations": entries,
        "noise": noisy,
        "tracks_every_control": all(e["tracks"] for e in computed) and noisy["tracks"],
        "model": "deterministic scheduler simulator (a model, not hardware)",
    }


def _pct(value: float | None) -> str:
    """A signed relative shift as a percentage at 3 significant digits (``+60.7%``)."""
    from tracecanary.formatting import percent

    if value is None:
        return "-"
    return ("-" if value < 0 else "+") + percent(abs(value))


def controls_table(doc: dict) -> str:
    """Markdown: one row per ablation (the largest source shift over configurations, the
    canary's shift in that configuration, checks passed, ranking decisions changed,
    tracks), then one row for the noise control."""
    from tracecanary.formatting import duration_ns

    lines = [
        "| control | largest source shift (config) | canary shift | checks passed "
        "| ranking changes | tracks |",
        "|---|---|---:|---:|---:|---|",
    ]
    for e in doc["ablations"]:
        if e["status"] != "computed":
            lines.append(f"| {e['ablation']} | not applicable: {e['reason']} | - | - | - | - |")
            continue
        shifts = [(n, c) for n, c in e["configs"].items() if c["source_shift"] is not None]
        name, cfg = max(shifts, key=lambda t: abs(t[1]["source_shift"]), default=(None, None))
        largest = "-" if cfg is None else f"{_pct(cfg['source_shift'])} ({name})"
        checks = e["checks"]
        lines.append(
            f"| {e['ablation']} | {largest} | {'-' if cfg is None else _pct(cfg['canary_shift'])} "
            f"| {checks['total'] - checks['failed']}/{checks['total']} "
            f"| {len(e['ranking_changed'])} | {'yes' if e['tracks'] else '**no**'} |"
        )
    noise = doc["noise"]
    p = noise["protocol"]
    n = p["iterations"]
    passed = sum(c["mean_check_passed"] for c in noise["configs"].values())
    widest = max(
        noise["configs"].values(),
        key=lambda c: c["source_mean_ns"]["ci_high"] - c["source_mean_ns"]["ci_low"],
    )
    half = (widest["source_mean_ns"]["ci_high"] - widest["source_mean_ns"]["ci_low"]) / 2
    lines.append(
        f"| noise ({n} iterations, seed {p['seed']}, service jitter "
        f"{p['service_jitter']:g}, arrival jitter {duration_ns(p['arrival_jitter_ns'])}) "
        f"| mean 95% interval +-{duration_ns(half)} (widest) "
        f"| mean check passes in {passed}/{n * len(noise['configs'])} iteration-configs "
        f"| - | ranking agrees in {100 * noise['ranking_agreement']:.0f}% of iterations "
        f"| {'yes' if noise['tracks'] else '**no**'} |"
    )
    return "\n".join(lines) + "\n"
