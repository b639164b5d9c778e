"""Human-readable summaries of a campaign (Markdown), built only from its artifacts."""

from __future__ import annotations

import json
from pathlib import Path

from tracecanary.canonical import write_text


def _load(path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _fmt_settings(settings: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items())


def _statuses(doc: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in doc["statuses"].items())


def search_section(
    source: str,
    log: dict,
    verifications: dict[str, dict],
    baseline: dict | None,
    sidecar: dict | None,
) -> list[str]:
    lines = [f"## {source}", ""]
    if sidecar:
        lines.append(
            f"Source: {sidecar['events']:,} rank events; {sidecar['meta'].get('source', '')}."
        )
        lines.append("")
    lines += [
        "Compiled canaries, each verified against the whole source:",
        "",
        "| budget | claim | statuses |",
        "|---|---|---|",
    ]
    for budget, doc in verifications.items():
        lines.append(f"| {budget} | **{doc['claim']}** | {_statuses(doc)} |")
    lines += ["", "Behavior search (greedy; every candidate verified in full):", ""]
    lines += [
        "| stage | settings | bytes | records | executed | claim | accepted | reason |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for e in log["candidates"]:
        lines.append(
            f"| {e['stage']} | {_fmt_settings(e['settings'])} | {e.get('bytes', '')} | {e.get('records', '')} | "
            f"{e.get('occurrences_executed', '')} | {e.get('claim', '')} | {'yes' if e.get('accepted') else 'no'}"
            f"{' (chosen)' if e.get('chosen') else ''} | {e.get('reason', '')} |"
        )
    chosen = log.get("chosen")
    if chosen:
        lines += [
            "",
            f"Chosen canary: {chosen['bytes']:,} bytes, {chosen['records']:,} records, executes {chosen['occurrences_executed']:,} occurrences; claim **verified** (sha256 `{log.get('canary_sha256')}`).",
        ]
    else:
        lines += ["", "No candidate passed verification: no canary was chosen."]
    if baseline is not None:
        changed = len(baseline["ranking"]["changed"])
        lines += [
            "",
            "ddmin baseline (ranking-only oracle), verified the same way:",
            "",
            f"- occurrences executed: {baseline['canary']['occurrences_executed']} of {baseline['source']['occurrences']}",
            f"- statuses: {_statuses(baseline)}; claim **{baseline['claim']}**",
            f"- ranking decisions changed: {changed} of {baseline['ranking']['decisions_checked']}; failed behavior checks: {baseline['summary']['failed']} of {baseline['summary']['checks']}",
            "- why it is rejected: it keeps every pairwise ranking while losing the workload's latency distribution, queueing and tail events.",
        ]
    lines.append("")
    return lines


def write_search_summary(path, logs, verifications, baselines, sidecars) -> str:
    by_source_verify: dict[str, dict[str, dict]] = {}
    for v in verifications:
        p = Path(v)
        by_source_verify.setdefault(p.parent.name, {})[p.stem] = _load(p)
    base = {Path(b).parent.name: _load(b) for b in baselines}
    sides = {Path(s).name[: -len(".meta.json")]: _load(s) for s in sidecars}
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
        )
    return write_text(path, "\n".join(lines))


def _workload_order(report: dict) -> list[str]:
    configs = report["configs"]
    return sorted(configs, key=lambda c: (configs[c]["latency"]["mean_ns"], c))


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
) -> str:
    """One page: what the campaign showed, each line traceable to an artifact."""
    manifest = _load(manifest_path)
    lines = [
        f"# Campaign `{campaign}`",
        "",
        f"Manifest root digest: `{manifest['root_sha256']}` ({len(manifest['evidence'])} evidence items, {len(manifest['derived'])} derived artifacts). `tracecanary manifest verify {manifest_path}` recomputes every digest.",
        "",
    ]
    lines += [
        "## Sources and canaries",
        "",
        "| source | rank events | occurrences | canary bytes | byte compression | executes / logical | claim |",
        "|---|---|---|---|---|---|---|",
    ]
    sides = {Path(s).name[: -len(".meta.json")]: _load(s) for s in sidecars}
    for canary_path in canaries:
        source = Path(canary_path).parent.name
        c = _load(canary_path)
        st = c["stats"]
        lines.append(
            f"| {source} | {sides.get(source, {}).get('events', '?'):,} | {st['occurrences_logical']:,} | {st['bytes_canary']:,} | "
            f"{st['byte_compression']}x | {st['occurrences_executed']:,} / {st['occurrences_logical']:,} ({st['execution_reduction']:.3f}) | {c['claim']} |"
        )
    lines += ["", "Verification statuses of every search candidate are in `search.md`.", ""]
    lines += ["## Isolated vs workload ranking (simulator)", ""]
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
    lines += [""]
    if baselines:
        lines += ["## The ddmin baseline and why it is rejected", ""]
        for b in baselines:
            doc = _load(b)
            source = Path(b).parent.name
            lines.append(
                f"- {source}: ddmin kept {doc['canary']['occurrences_executed']} of {doc['source']['occurrences']} occurrences with all "
                f"{doc['ranking']['decisions_checked'] - len(doc['ranking']['changed'])} of {doc['ranking']['decisions_checked']} ranking decisions; "
                f"behavior **{doc['statuses']['behavior']}**, ranking {doc['statuses']['ranking']}, claim **{doc['claim']}** "
                f"({doc['summary']['failed']} of {doc['summary']['checks']} behavior checks fail)."
            )
        lines.append("")
    if physical:
        lines += ["## Physical replay (real collectives)", ""]
        for p in physical:
            doc = _load(p)
            lines += doc.get("summary_lines", [f"- {Path(p).name}: see file"])
        lines.append("")
    if alphabeta_fits:
        lines += [
            "## Alpha/beta",
            "",
            "| ladder | collective | n | global r2 / MAPE | large-message beta (GB/s) | alpha (us) | saturation entry |",
            "|---|---|---|---|---|---|---|",
        ]
        for f in alphabeta_fits:
            doc = _load(f)
            for ladder in doc["ladders"]:
                g = ladder["fits"]["global"]
                lm = ladder["fits"].get("large_message") or {}
                beta = lm.get("beta_gbps")
                beta_txt = (
                    f"{beta:.3g}"
                    if beta is not None
                    else f"withheld ({lm.get('beta_withheld_reason')})"
                )
                alpha = lm.get("alpha_us")
                alpha_txt = (
                    ""
                    if alpha is None
                    else f"{alpha:.3g}{'*' if lm.get('alpha_extrapolated') else ''}"
                )
                lines.append(
                    f"| {ladder['id']} | {ladder['collective']} | {ladder['world_size']} | {g['r2']:.4f} / {g['mape_pct']:.1f}% | {beta_txt} | {alpha_txt} | {ladder.get('saturation_entry_bytes')} |"
                )
        lines += [
            "",
            "`*` alpha extrapolated (the ladder never approaches zero bytes). A global line with high r2 and large MAPE is the classic trap; see each fit.md.",
            "",
        ]
    lines += [
        "All simulator numbers are claims about a model of contention and overlap, not about silicon; physical numbers come from the attempt archives kept as evidence."
    ]
    return write_text(path, "\n".join(lines) + "\n")
