"""Human-readable summaries of a campaign (Markdown, and the same page as HTML), built
only from its artifacts.

Numbers follow ``tracecanary.formatting`` (3 significant digits for ratios, binary units for
bytes, human units for times). One byte count per canary: the size of the canary file as
written (``search/<source>/canary.json``, its verification stamp included), the same on
every page. From ``summary.md`` alone a reader can tell, per source, how big the canary is,
what fraction of the source it executes, whether the canary is smaller than its source at
all (``compressed``), whether it is verified, whether it fares at least as well as random,
frequency, cluster and stratified samples of the source at its own executed size, and whether
each physical source's replay agreed (one section per physical source).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from tracecanary.campaign.html import write_markdown_page
from tracecanary.canonical import write_text
from tracecanary.formatting import count, duration_us, percent, ratio, size, times
from tracecanary.verify.baselines import baselines_table

SIZE_MEANING = (
    "the canary file as written (`search/<source>/canary.json`, verification stamp included)"
)
TOP_FAILED_CHECKS = 8


def _load(path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _by_source(paths, suffix: str = "") -> dict[str, dict]:
    """``{source: document}`` for paths named ``.../<source>/<file>`` (or ``<source><suffix>``)."""
    out = {}
    for p in map(Path, paths):
        source = p.name[: -len(suffix)] if suffix else p.parent.name
        out[source] = _load(p)
    return out


def _write(path, lines: list[str], html) -> str:
    text = "\n".join(lines).rstrip("\n") + "\n"
    if html is not None:
        write_markdown_page(html, text)
    return write_text(path, text)


def canary_size(canary_path) -> str:
    """The one byte count of a canary: its file, human and exact (``33.0 KiB (33,792 B)``)."""
    n = Path(canary_path).stat().st_size
    return f"{size(n)} ({count(n)} B)"


def executed_fraction(stats: dict) -> str:
    executed, logical = stats["occurrences_executed"], stats["occurrences_logical"]
    share = executed / logical if logical else 1.0
    return f"{count(executed)} of {count(logical)} ({percent(share)})"


def _statuses(doc: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in doc["statuses"].items())


def sampling_baselines_lines(source: str, doc: dict, heading: str = "###") -> list[str]:
    """One source's sampling baselines (a ``tracecanary.baselines/v1`` document): a heading
    naming the canary's executed size k of the source's N occurrences, the table of every
    sample beside the canary (``baselines_table``), and whether the canary fares at least as
    well as every baseline (no more failed behaviour checks, no more changed ranking decisions:
    the document's ``canary_fares_best``)."""
    k, n = doc["size"], doc["source"]["occurrences"]
    verdict = "yes" if doc["canary_fares_best"] else "no"
    return [
        f"{heading} {source}: sampling baselines at the canary's executed size "
        f"({count(k)} of {count(n)})",
        "",
        baselines_table(doc).rstrip("\n"),
        "",
        f"canary fares at least as well as every baseline: **{verdict}**",
        "",
    ]


def compression_note(stats: dict) -> str:
    """The canary's byte compression, and ``not compressed`` when the canary file is not
    smaller than its normalized source (a short trace: the canary's tables cost more than
    the few occurrences they stand for)."""
    text = times(stats["byte_compression"])
    return text if stats["compressed"] else f"{text}, **not compressed** (canary larger)"


# --- search.md -------------------------------------------------------------------------


def _budget_label(ns: int) -> str:
    """A searched budget as configured (``8 us``): an exact setting, not a measurement."""
    return "lossless" if ns == 0 else f"{ns / 1000:g}us"


def _outcome(entries: list[dict]) -> str:
    chosen = [e for e in entries if e.get("chosen")]
    if chosen:
        return "**chosen**"
    accepted = [e for e in entries if e.get("accepted")]
    if accepted:
        return "accepted, later superseded"
    reasons = Counter(e.get("reason", "") for e in entries)
    return "; ".join(f"{r} ({n})" if n > 1 else r for r, n in reasons.most_common(2))


def budget_table(candidates: list[dict]) -> list[str]:
    """One row per budget: its compile, its refinements summarised, the outcome."""
    by_budget: dict[int, list[dict]] = {}
    for e in candidates:
        if "budget_ns" in e["settings"]:
            by_budget.setdefault(int(e["settings"]["budget_ns"]), []).append(e)
    lines = [
        "| budget | candidates (compile + refinements) | verified | smallest verified size "
        "| executes | outcome |",
        "|---|---|---|---|---|---|",
    ]
    for ns in sorted(by_budget):
        entries = by_budget[ns]
        verified = [e for e in entries if e.get("claim") == "verified"]
        best = min(verified, key=lambda e: e["bytes"]) if verified else None
        refined = sum(1 for e in entries if e["stage"] == "refine")
        tried = f"1 + {refined}" if refined else "1"
        lines.append(
            f"| {_budget_label(ns)} | {tried} | {len(verified)} of {len(entries)} | "
            f"{size(best['bytes']) if best else '-'} | "
            f"{count(best['occurrences_executed']) if best else '-'} | {_outcome(entries)} |"
        )
    return lines


def execution_table(candidates: list[dict]) -> list[str]:
    rows = [e for e in candidates if e["stage"] == "execution"]
    if not rows:
        return []
    lines = [
        "Reduced execution of the chosen canary (steady-state repetitions executed at most "
        "k times, weighted; tail windows whole):",
        "",
        "| k | claim | size | executes | outcome |",
        "|---|---|---|---|---|",
    ]
    for e in rows:
        selection = e["settings"].get("steady_selection")  # absent: time
        lines.append(
            f"| {e['settings'].get('max_executed_repeats', '')}"
            f"{f' ({selection})' if selection else ''} | {e.get('claim', '-')} | "
            f"{size(e['bytes']) if 'bytes' in e else '-'} | "
            f"{count(e['occurrences_executed']) if 'occurrences_executed' in e else '-'} | "
            f"{_outcome([e])} |"
        )
    return lines


def rejected_checks(candidates: list[dict]) -> list[str]:
    """The rejected candidates and the behavior checks that failed most often."""
    rejected = [e for e in candidates if e.get("claim") not in (None, "verified")]
    refused = [e for e in candidates if "claim" not in e]
    if not rejected and not refused:
        return ["Every candidate compiled and verified."]
    tally: Counter[str] = Counter()
    configs: dict[str, set[str]] = {}
    for e in rejected:
        for check in e.get("failed_checks", []):
            config, _, metric = check.rpartition(":")
            tally[metric] += 1
            configs.setdefault(metric, set()).add(config or "-")
    lines = [
        f"Rejected by verification: {len(rejected)} candidates; refused at compile: {len(refused)}."
    ]
    if tally:
        top = ", ".join(
            f"`{m}` ({n}; {', '.join(sorted(configs[m]))})"
            for m, n in tally.most_common(TOP_FAILED_CHECKS)
        )
        lines.append("")
        lines.append(
            f"Checks that failed most often (candidates; configurations; first ten failures "
            f"of each candidate are logged): {top}."
        )
    return lines


def search_section(
    source: str,
    log: dict,
    verifications: dict[str, dict],
    baseline: dict | None,
    sidecar: dict | None,
    canary_path=None,
    sampling: dict | None = None,
) -> list[str]:
    lines = [f"## {source}", ""]
    if sidecar:
        lines += [
            f"Source: {count(sidecar['events'])} rank events; {sidecar['meta'].get('source', '')}.",
            "",
        ]
    lines += [
        "Compiled canaries, each verified against the whole source:",
        "",
        "| budget | claim | statuses |",
        "|---|---|---|",
    ]
    for budget, doc in verifications.items():
        lines.append(f"| {budget} | **{doc['claim']}** | {_statuses(doc)} |")
    lines += ["", "Behavior search (greedy; every candidate verified in full), per budget:", ""]
    lines += budget_table(log["candidates"])
    execution = execution_table(log["candidates"])
    lines += ["", *execution] if execution else []
    lines += ["", *rejected_checks(log["candidates"])]
    chosen = log.get("chosen")
    if chosen:
        file_size = f"{canary_size(canary_path)}, " if canary_path else ""
        lines += [
            "",
            f"Chosen canary: {file_size}{count(chosen['records'])} records, executes "
            f"{count(chosen['occurrences_executed'])} occurrences; claim **verified** "
            f"(sha256 `{log.get('canary_sha256')}`). Candidate sizes above are the canonical "
            "JSON the search compared, before the verification stamp; the canary's size is "
            f"{SIZE_MEANING}, as in summary.md.",
        ]
    else:
        lines += ["", "No candidate passed verification: no canary was chosen."]
    if baseline is not None:
        changed = len(baseline["ranking"]["changed"])
        lines += [
            "",
            "ddmin baseline (ranking-only oracle), verified the same way:",
            "",
            f"- occurrences executed: {count(baseline['canary']['occurrences_executed'])} of "
            f"{count(baseline['source']['occurrences'])}",
            f"- statuses: {_statuses(baseline)}; claim **{baseline['claim']}**",
            f"- ranking decisions changed: {changed} of "
            f"{baseline['ranking']['decisions_checked']}; failed behavior checks: "
            f"{baseline['summary']['failed']} of {baseline['summary']['checks']}",
            "- why it is rejected: it keeps every pairwise ranking while losing the workload's "
            "latency distribution, queueing and tail events.",
        ]
    lines.append("")
    if sampling is not None:
        lines += sampling_baselines_lines(source, sampling)
    return lines


def write_search_summary(
    path,
    logs,
    verifications,
    baselines,
    sidecars,
    canaries=(),
    *,
    sampling_baselines=(),
    html=None,
) -> str:
    """search.md (and, with ``html``, the same page as HTML); returns search.md's SHA-256.
    ``baselines`` are the ddmin verifications (``reduce/<source>/verification.json``),
    ``sampling_baselines`` the sampling baselines documents (``baselines/<source>.json``)."""
    by_source_verify: dict[str, dict[str, dict]] = {}
    for v in map(Path, verifications):
        by_source_verify.setdefault(v.parent.name, {})[v.stem] = _load(v)
    base = _by_source(baselines)
    sides = _by_source(sidecars, ".meta.json")
    canary_files = {Path(c).parent.name: c for c in canaries}
    sampling = _by_source(sampling_baselines, ".json")
    lines = [
        "# Behavior search",
        "",
        "All numbers come from the deterministic scheduler simulator (a model, not hardware).",
        "",
    ]
    for log_path in logs:
        source = Path(log_path).parent.name
        lines += search_section(
            source,
            _load(log_path),
            by_source_verify.get(source, {}),
            base.get(source),
            sides.get(source),
            canary_files.get(source),
            sampling.get(source),
        )
    return _write(path, lines, html)


# --- summary.md ------------------------------------------------------------------------


def _workload_order(report: dict) -> list[str]:
    configs = report["configs"]
    return sorted(configs, key=lambda c: (configs[c]["latency"]["mean_ns"], c))


def physical_verdict(doc: dict) -> str:
    """Whether the physical replay's canary and full program rank the configurations alike,
    in one phrase. Over the pairs the repetitions decide (bootstrap intervals separate on
    both sides; ``decided_pairs``) when the report has them: a pair whose intervals overlap
    is undetermined and named as such, never counted as agreeing or disagreeing. A report
    without decided-pair fields is judged on its point rankings."""
    agreement = doc.get("ranking_agreement") or {}
    judged = {m: a for m, a in agreement.items() if a.get("pairs")}
    gate = doc.get("gate")
    gate_text = f"; physical gate **{gate['status']}**" if gate else ""
    if not judged:
        return f"not judged (fewer than two complete configurations){gate_text}"
    if not all("decided_pairs" in a for a in judged.values()):
        split = sorted(m for m, a in judged.items() if a["agreeing_pairs"] < a["pairs"])
        pairs = max(a["pairs"] for a in judged.values())
        if not split:
            return f"**agreed** ({', '.join(sorted(judged))}: {pairs} of {pairs} pairs each){gate_text}"
        return f"**disagreed** on {', '.join(split)} (of {', '.join(sorted(judged))}){gate_text}"
    decided = {m: a for m, a in judged.items() if a["decided_pairs"]}
    undetermined = sorted(m for m, a in judged.items() if a["undetermined_pairs"])
    open_text = (
        f"; undetermined (intervals overlap) on {', '.join(undetermined)}" if undetermined else ""
    )
    if not decided:
        return f"undetermined: no pair decided by the repetitions{open_text}{gate_text}"
    split = sorted(
        m for m, a in decided.items() if a["agreeing_decided_pairs"] < a["decided_pairs"]
    )
    counts = ", ".join(
        f"{m} {a['agreeing_decided_pairs']} of {a['decided_pairs']}"
        for m, a in sorted(decided.items())
    )
    word = f"**disagreed** on decided pairs of {', '.join(split)}" if split else "**agreed**"
    return f"{word} (decided pairs agreeing: {counts}){open_text}{gate_text}"


def _runtime_ratios(doc: dict) -> str:
    ratios = {
        name: e.get("runtime_reduction")
        for name, e in (doc.get("configs") or {}).items()
        if e.get("runtime_reduction") is not None
    }
    return ", ".join(f"{name} {ratio(r)}" for name, r in ratios.items()) or "-"


def sources_table(canaries, sides: dict, verifications: dict, physical: dict) -> list[str]:
    """The sources table; ``physical`` maps each physical source to its physical report
    (a source without one shows ``not run``)."""
    lines = [
        "| source | rank events | occurrences | canary size | byte compression (source / "
        "canary) | executes (fraction) | claim | physical replay |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for canary_path in canaries:
        source = Path(canary_path).parent.name
        c = _load(canary_path)
        st = c["stats"]
        verification = verifications.get(source)
        statuses = f" ({_statuses(verification)})" if verification else ""
        phys = physical_verdict(physical[source]) if source in physical else "not run"
        events = sides.get(source, {}).get("events")
        lines.append(
            f"| {source} | {count(events) if events is not None else '?'} | "
            f"{count(st['occurrences_logical'])} | {canary_size(canary_path)} | "
            f"{compression_note(st)} | {executed_fraction(st)} | "
            f"**{c['claim']}**{statuses} | {phys} |"
        )
    return lines


def verdicts_section(verdicts) -> list[str]:
    if not verdicts:
        return []
    lines = [
        "## Rollout gate (simulator, on the searched canary)",
        "",
        "| source | baseline -> candidate | verdict | tripped thresholds |",
        "|---|---|---|---|",
    ]
    for path in verdicts:
        doc = _load(path)
        tripped = doc.get("tripped", [])
        pair = {(c["baseline_config"], c["candidate_config"]) for c in doc.get("comparisons", [])}
        names = ", ".join(
            f"{t['metric']} {'+' if t['relative'] >= 0 else ''}{percent(t['relative'])} "
            f"(limit {t['threshold'].split('=')[-1]})"
            for t in tripped
        )
        configs = " ".join(f"{a} -> {b}" for a, b in sorted(pair)) or "-"
        lines.append(
            f"| {Path(path).stem} | {configs} | **{doc['verdict']}** | {names or 'none'} |"
        )
    return lines + [
        "",
        "A gate over simulator reports: a regression in the model, not silicon.",
        "",
    ]


def timelines_section(timelines, manifest_path, perfetto=()) -> list[str]:
    """Each source's timeline PNG, and beside it its Chrome Trace Event JSON (``perfetto``,
    by source name) for ui.perfetto.dev and chrome://tracing."""
    if not timelines:
        return []
    root = Path(manifest_path).parent

    def shown(path: Path) -> str:
        return (path.relative_to(root) if path.is_relative_to(root) else path).as_posix()

    traces = {Path(p).stem: Path(p) for p in perfetto}
    lines = [
        "## Timelines",
        "",
        "Per source: collectives per rank over time, the canary's executed occurrences with "
        "their weights, tail windows, and per-rank arrival skew (stragglers); beside it the "
        "same as a Chrome trace (a track per rank and group, weights and tail windows as "
        "annotations, a physical source's first canary attempt) to open in ui.perfetto.dev "
        "or chrome://tracing:",
        "",
    ]
    for path in map(Path, timelines):
        trace = traces.get(path.stem)
        beside = f" · Perfetto: `{shown(trace)}`" if trace is not None else ""
        lines.append(f"- {path.stem}: `{shown(path)}`{beside}")
    return lines + [""]


def rankings_section(source_reports) -> list[str]:
    lines = ["## Isolated vs workload ranking (simulator)", ""]
    for report_path in source_reports:
        source = Path(report_path).parent.name
        r = _load(report_path)
        iso = r.get("rankings", {}).get("isolated", {}).get("order")
        lines.append(
            f"- {source}: workload (mean latency) `{' < '.join(_workload_order(r))}`"
            + (f"; isolated `{' < '.join(iso)}`" if iso else "")
        )
        inv = r.get("rankings", {}).get("isolated_vs_workload", {})
        flipped = sum(1 for m in inv.values() for p in m.get("pairs", []) if p.get("inverted"))
        if inv:
            lines.append(f"  - pairs whose isolated winner loses in the workload: {flipped}")
    return lines + [""]


def baselines_section(baselines) -> list[str]:
    if not baselines:
        return []
    lines = ["## The ddmin baseline and why it is rejected", ""]
    for b in baselines:
        doc = _load(b)
        kept = doc["ranking"]["decisions_checked"] - len(doc["ranking"]["changed"])
        lines.append(
            f"- {Path(b).parent.name}: ddmin kept "
            f"{count(doc['canary']['occurrences_executed'])} of "
            f"{count(doc['source']['occurrences'])} occurrences with all {kept} of "
            f"{doc['ranking']['decisions_checked']} ranking decisions; behavior "
            f"**{doc['statuses']['behavior']}**, ranking {doc['statuses']['ranking']}, claim "
            f"**{doc['claim']}** ({doc['summary']['failed']} of {doc['summary']['checks']} "
            "behavior checks fail)."
        )
    return lines + [""]


def sampling_baselines_section(sampling_baselines) -> list[str]:
    """Per source, the canary beside random, frequency, cluster and stratified samples of
    the source at its executed size, each replayed and checked like the canary."""
    if not sampling_baselines:
        return []
    lines = [
        "## Sampling baselines (simulator)",
        "",
        "Random, frequency-weighted, k-means cluster and stratified samples of each source at "
        "the canary's executed size, each replayed and checked against the whole source like "
        "the canary. The canary fares at least as well as a baseline when it fails no more "
        "behaviour checks and changes no more ranking decisions.",
        "",
    ]
    for path in map(Path, sampling_baselines):
        lines += sampling_baselines_lines(path.name.removesuffix(".json"), _load(path))
    return lines


def controls_section(controls) -> list[str]:
    """Per source, the canary and its source under each simulator ablation and seeded
    noise (``tracecanary.controls/v1``): how far each mechanism moves the source, whether
    the canary moved with it, and one verdict line."""
    from tracecanary.verify.controls import controls_table

    if not controls:
        return []
    lines = [
        "## Simulator controls (ablations and noise)",
        "",
        "Each searched canary and its source replayed with one model mechanism switched off "
        "or changed, and under seeded service jitter: the largest shift of the source's mean "
        "latency, the canary's shift in that configuration, the canary's latency mean/p99 "
        "checks against the source under the same control, and the configuration decisions "
        "that changed. Simulator controls, not physical interventions.",
        "",
    ]
    for path in map(Path, controls):
        doc = _load(path)
        verdict = "yes" if doc["tracks_every_control"] else "no"
        lines += [
            f"### {path.name.removesuffix('.json')}",
            "",
            controls_table(doc).rstrip("\n"),
            "",
            f"canary tracks its source under every control: **{verdict}**",
            "",
        ]
    return lines


def _pair_counts(doc: dict) -> str:
    """Decided and undetermined canary-vs-full pairs, summed over the ranking metrics."""
    agreement = (doc.get("ranking_agreement") or {}).values()
    decided = sum(a.get("decided_pairs", 0) for a in agreement)
    undetermined = sum(a.get("undetermined_pairs", 0) for a in agreement)
    return f"{decided} decided, {undetermined} undetermined (pair-metrics)"


def _simulator_lines(sim: dict | None) -> list[str]:
    """The separate claim in two lines: the simulator's ranking against the machine's over
    the pairs the machine decided, and the per-configuration mean-latency prediction error."""
    if not sim or sim.get("status") != "computed":
        reason = (sim or {}).get("reason", "no simulator comparison in the report")
        return [f"- simulator vs machine: not computed ({reason})"]
    share = (
        "no pair decided by the machine"
        if sim["agreement"] is None
        else f"{sim['agreeing_pairs']} of {sim['decided_pairs']} decided pairs rank alike "
        f"({sim['agreement']:.0%})"
    )
    errors = "; ".join(
        f"{program}: "
        + ", ".join(f"{c} {e:+.1f}%" for c, e in sorted(pp["prediction_error_pct"].items()))
        for program, pp in sim["programs"].items()
    )
    return [
        f"- simulator (calibrated backends) vs machine ranking: {share}",
        f"- simulator mean-latency prediction error per configuration: {errors}",
    ]


def _gate_line(doc: dict) -> list[str]:
    gate = doc.get("gate")
    if not gate:
        return ["- physical gate: not in the report"]
    threshold = gate.get("max_runtime_ratio")
    at = f" (canary/full runtime ratio at most {threshold:g})" if threshold is not None else ""
    return [
        f"- physical gate: **{gate['status']}**{at}",
        *[f"  - fails: {reason}" for reason in gate.get("reasons", [])],
        *[f"  - warning: {warning}" for warning in gate.get("warnings", [])],
    ]


def physical_section(physical: dict) -> list[str]:
    """One subsection per physical source (``physical``: source -> physical report, in
    campaign order): the canary-vs-full verdict, decided and undetermined pairs, runtime
    ratios, the simulator's agreement with the machine and its prediction error, the gate."""
    if not physical:
        return []
    lines = ["## Physical replay (real collectives)", ""]
    for source, doc in physical.items():
        lines += [
            f"### `{source}`",
            "",
            f"- canary vs full program ranking: {physical_verdict(doc)}",
            f"- pairs: {_pair_counts(doc)}; a pair is decided only when its bootstrap "
            "intervals separate",
            f"- canary/full runtime per configuration (one pass, median): {_runtime_ratios(doc)}",
            *_simulator_lines(doc.get("simulator_agreement")),
            *_gate_line(doc),
            f"- details: physical/{source}.md",
            "",
        ]
    return lines


def alphabeta_section(alphabeta_fits) -> list[str]:
    if not alphabeta_fits:
        return []
    lines = [
        "## Alpha/beta",
        "",
        "| ladder | collective | ranks | global R2 / MAPE | large-message beta (GB/s) | "
        "alpha | saturation entry |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in alphabeta_fits:
        for ladder in _load(f)["ladders"]:
            g = ladder["fits"]["global"]
            lm = ladder["fits"].get("large_message") or {}
            beta = lm.get("beta_gbps")
            beta_txt = (
                ratio(beta) if beta is not None else f"withheld ({lm.get('beta_withheld_reason')})"
            )
            alpha = lm.get("alpha_us")
            alpha_txt = (
                ""
                if alpha is None
                else f"{duration_us(alpha)}{'*' if lm.get('alpha_extrapolated') else ''}"
            )
            entry = ladder.get("saturation_entry_bytes")
            lines.append(
                f"| {ladder['id']} | {ladder['collective']} | {ladder['world_size']} | "
                f"{ratio(g['r2'])} / {ratio(g['mape_pct'])}% | {beta_txt} | {alpha_txt} | "
                f"{size(entry) if entry else '-'} |"
            )
    return lines + [
        "",
        "`*` alpha extrapolated (the ladder never approaches zero bytes). A global line with "
        "high R2 and large MAPE is the classic trap; see each fit.md.",
        "",
    ]


def capture_noise_section(captures) -> list[str]:
    """Per live capture (its directory, ``capture.json`` inside): ranks, whether each had
    a CPU of its own, and the latency CV per op signature, the noise floor of its figures."""
    rows = []
    for directory in map(Path, captures):
        doc = _load(directory / "capture.json")
        settings, noise = doc["settings"], doc.get("noise")
        if noise is None:
            continue
        pinned = "yes" if settings.get("cpus_per_rank") else "no (ranks share cores)"
        rows.append(
            f"| {directory.name} | {settings.get('workload', '')} | {settings['nproc']} | "
            f"{pinned} | {noise['latency_cv_median']} | {noise['latency_cv_max']} | "
            f"{noise['signatures']} |"
        )
    if not rows:
        return []
    return [
        "## Capture noise floor",
        "",
        "Latency CV: std / mean of every member's measured latency per op signature, the median "
        "and max over signatures (`capture.json` `noise`). No canary is held closer to its "
        "source than this.",
        "",
        "| source | workload | ranks | a CPU per rank | latency CV (median) | (max) | signatures |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def reproducibility_section(verifications: dict[str, dict]) -> list[str]:
    """Per source: the standard its canary's behaviour was held to and met, and each check
    whose source interval (the source's own 95% block-bootstrap interval) is wider than
    its fixed tolerance: the source is noisier than that tolerance demands."""
    lines: list[str] = []
    for source, doc in verifications.items():
        standard = doc.get("standard")
        if not standard:
            continue
        if not lines:
            lines = ["## Fixed tolerances and the sources' own reproducibility", ""]
        method = standard.get("reproducibility") or {}
        blocks = method.get("blocks") or {}
        lines.append(
            f"`{source}`: standard **{standard['chosen']}**; "
            f"{standard['words'] or 'met neither standard'} (block bootstrap over "
            f"{blocks.get('count', '?')} {blocks.get('kind', '')}, {method.get('resamples', '?')} "
            f"resamples, seed {method.get('seed', '?')})."
        )
        wider = set(standard.get("wider_than_tolerance", []))
        rows = [c for c in doc["checks"] if f"{c['config']}:{c['metric']}" in wider]
        if rows:
            lines += [
                "",
                f"{len(rows)} checks whose source interval is wider than the fixed tolerance:",
                "",
                "| config | check | source | allowed ± | source interval | canary |",
                "|---|---|---|---|---|---|",
            ]
            for c in rows:
                lo, hi = c["reproducibility"]["interval"]
                lines.append(
                    f"| {c['config']} | {c['metric']} | {c['source']:.6g} | "
                    f"{c['tolerance']['allowed']:.3g} | [{lo:.6g}, {hi:.6g}] | {c['canary']:.6g} |"
                )
        lines.append("")
    return lines


def write_campaign_summary(
    path,
    *,
    campaign: str,
    manifest_path,
    sidecars,
    search_logs,
    canaries,
    source_reports,
    baselines,
    physical,
    alphabeta_fits,
    verifications=(),
    verdicts=(),
    timelines=(),
    perfetto=(),
    sampling_baselines=(),
    controls=(),
    captures=(),
    html=None,
) -> str:
    """One page: what the campaign showed, each line traceable to an artifact (see module
    doc); with ``html``, the same page as HTML. Returns summary.md's SHA-256.
    ``baselines`` are the ddmin verifications, ``sampling_baselines`` the sampling baselines
    documents (``baselines/<source>.json``). ``physical`` are the physical reports, one
    per physical source, each named ``<source>.json``; the summary shows a section per
    source."""
    del search_logs  # every candidate's statuses are on search.md
    manifest = _load(manifest_path)
    physical_docs = {Path(p).stem: _load(p) for p in physical}
    lines = [
        f"# Campaign `{campaign}`",
        "",
        f"Manifest root digest: `{manifest['root_sha256']}` ({len(manifest['evidence'])} "
        f"evidence items, {len(manifest['derived'])} derived artifacts). "
        f"`tracecanary manifest verify {manifest_path}` recomputes every digest.",
        "",
        "## Sources and canaries",
        "",
        f"Canary size: {SIZE_MEANING}. Byte compression: the normalized source's canonical "
        "size over the canary's; **not compressed** when the canary is the larger (a trace too "
        "short to reduce). Executes: the occurrences the canary replays (reduced "
        "execution, weighted) of the source's logical occurrences. Claim: the verifier's, "
        "against the whole source in the simulator. Physical replay: whether the canary and "
        "the full program rank the physical configurations alike on real collectives.",
        "",
    ]
    lines += sources_table(
        canaries,
        _by_source(sidecars, ".meta.json"),
        _by_source(verifications),
        physical_docs,
    )
    lines += ["", "Verification statuses of every search candidate are in `search.md`.", ""]
    lines += reproducibility_section(_by_source(verifications))
    lines += capture_noise_section(captures)
    lines += verdicts_section(verdicts)
    lines += timelines_section(timelines, manifest_path, perfetto)
    lines += rankings_section(source_reports)
    lines += baselines_section(baselines)
    lines += sampling_baselines_section(sampling_baselines)
    lines += controls_section(controls)
    lines += physical_section(physical_docs)
    lines += alphabeta_section(alphabeta_fits)
    lines += [
        "All simulator numbers are claims about a model of contention and overlap, not about "
        "silicon; physical numbers come from the attempt archives kept as evidence."
    ]
    return _write(path, lines, html)
