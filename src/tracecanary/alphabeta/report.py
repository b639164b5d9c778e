"""The fit document (``tracecanary.alphabeta/v1``, schema ``schemas/alphabeta.schema.json``)
and its Markdown rendering.

Guarantees: the document holds no absolute paths and no timestamps (inputs are named by
base name and SHA-256), floats are rounded to 10 significant digits, so the same inputs
and parameters give the same canonical JSON bytes; the Markdown is a pure function of the
document.
"""

from __future__ import annotations

import math

from tracecanary.formats.ids import ALPHABETA_FORMAT as FORMAT

SIGNIFICANT_DIGITS = 10

FORM_LABELS = {1: "2.20-2.22", 2: "2.23", 3: "2.24+"}

REASON_TEXT = {
    "poor_fit": "poor fit",
    "not_bandwidth_bound": "not bandwidth-bound",
    "too_few_points": "too few points",
}


def round_floats(obj):
    """Round every float to ``SIGNIFICANT_DIGITS`` significant digits, recursively."""
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise ValueError(f"non-finite float in report: {obj!r}")
        return float(f"{obj:.{SIGNIFICANT_DIGITS}g}")
    if isinstance(obj, dict):
        return {k: round_floats(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [round_floats(v) for v in obj]
    return obj


def build_document(
    *, parameters: dict, inputs: list[dict], tuning: dict | None, ladders: list[dict]
) -> dict:
    return round_floats(
        {
            "format": FORMAT,
            "parameters": parameters,
            "inputs": inputs,
            "tuning": tuning,
            "ladders": ladders,
        }
    )


# ----------------------------------------------------------------------------- Markdown


def fmt_num(value: float | None) -> str:
    """Fixed-point with about four significant digits; '-' for None."""
    if value is None:
        return "-"
    a = abs(value)
    if a == 0:
        return "0"
    if a >= 1000:
        return f"{value:.0f}"
    if a >= 100:
        return f"{value:.1f}"
    if a >= 10:
        return f"{value:.2f}"
    if a >= 1:
        return f"{value:.3f}"
    return f"{value:.3g}"


def fmt_bytes(value: int | None) -> str:
    return "-" if value is None else str(int(value))


def fit_line(fit: dict | None) -> str:
    """One line in the CollectiveX spirit: beta printed only when every gate passed."""
    if fit is None:
        return "no fit"
    n = fit["n_points"]
    if fit["alpha_us"] is None:
        return f"no fit [too few points] (n={n})"
    alpha = fmt_num(fit["alpha_us"]) + " us" + ("*" if fit["alpha_extrapolated"] else "")
    if fit["alpha_us"] < 0:
        alpha += " [negative: not a physical latency]"
    r2 = "undefined" if fit["r2"] is None else f"{fit['r2']:.3f}"
    quality = (
        f"R2={r2}, transfer share={fit['bandwidth_share']:.2f}, n={n}, "
        f"MAPE={fmt_num(fit['mape_pct'])}%, max error={fmt_num(fit['max_rel_error_pct'])}%"
    )
    span = f"{fmt_bytes(fit['min_bytes'])}..{fmt_bytes(fit['max_bytes'])} B"
    if fit["beta_gbps"] is not None:
        beta = f"beta={fmt_num(fit['beta_gbps'])} GB/s"
    else:
        beta = f"beta=unreliable [{REASON_TEXT[fit['beta_withheld_reason']]}]"
    extra = (
        ""
        if fit["validated"]
        else "; not validated: two points define any line, R2=1 by construction"
    )
    return f"alpha={alpha}, {beta} ({quality}{extra}) over {span}"


def _placement_text(placement: str) -> str:
    return {"out_of_place": "out-of-place", "in_place": "in-place"}.get(placement, placement)


def _rung_flags(r: dict) -> str:
    flags = []
    if r["excluded"]:
        flags.append(f"excluded: {r['excluded']}")
    if r["unstable"]:
        flags.append(f"unstable (CV {fmt_num(r['cv_pct'])}%)")
    return "; ".join(flags)


def render_ladder(ladder: dict, plot_links: list[tuple[str, str]] | None = None) -> list[str]:
    out = []
    out.append(
        f"## {ladder['collective']} · {ladder['dtype']} · n={ladder['world_size']} · "
        f"{_placement_text(ladder['placement'])} · {ladder['op']}"
    )
    out.append("")
    out.append(
        f"Ladder `{ladder['id']}` from input {ladder['input']} (`{ladder['source']}`), run {ladder['run']}; "
        f"{ladder['n_cycles']} cycle(s); busbw factor {ladder['busbw_factor']:.4g}."
    )
    out.append("")
    out.append(
        "| bytes | median us | p95 us | CV % | algbw GB/s | busbw GB/s | algo/proto | flags |"
    )
    out.append("|---:|---:|---:|---:|---:|---:|:---|:---|")
    for r in ladder["rungs"]:
        algo = "-" if r["algorithm"] is None else f"{r['algorithm']}/{r['protocol']}"
        out.append(
            f"| {r['bytes']} | {fmt_num(r['median_us'])} | {fmt_num(r['p95_us'])} | "
            f"{fmt_num(r['cv_pct'])} | {fmt_num(r['algbw_gbps'])} | {fmt_num(r['busbw_gbps'])} | "
            f"{algo} | {_rung_flags(r)} |"
        )
    out.append("")
    fits = ladder["fits"]
    out.append(
        "Fits (`T = alpha + bytes/beta`; beta printed only when R2 and transfer share clear their gates):"
    )
    out.append("")
    out.append(
        "- **global** (one line over the whole ladder; a high R2 can still hide large errors at "
        f"small sizes, read MAPE): {fit_line(fits['global'])}"
    )
    seg = fits["segments"]
    if seg["evidence"] == "tuning":
        for item in seg["items"]:
            out.append(
                f"- **segment {item['algorithm']}/{item['protocol']}**: {fit_line(item['fit'])}"
            )
        out.append(f"- segments: {seg['note']}")
    else:
        out.append(f"- **segments**: {seg['note']}.")
        for item in seg["items"]:
            out.append(f"  - from the saturation entry up: {fit_line(item['fit'])}")
    if fits["large_message"] is None:
        out.append("- **large messages**: no fit (no saturation entry)")
    else:
        out.append(
            f"- **large messages** (from the saturation entry {fmt_bytes(ladder['saturation_entry_bytes'])} B up): "
            f"{fit_line(fits['large_message'])}"
        )
    all_fits = [fits["global"], fits["large_message"], *[i["fit"] for i in seg["items"]]]
    if any(f is not None and f["alpha_extrapolated"] for f in all_fits):
        out.append("")
        out.append(
            "\\* alpha extrapolated: the smallest fitted size is above "
            "10% of the largest, so the ladder never approaches zero bytes."
        )
    out.append("")
    if ladder["saturation_entry_bytes"] is None:
        out.append(
            "Saturation entry: none (the largest size stays below the fraction of the peak algbw)."
        )
    else:
        out.append(
            f"Saturation entry: {ladder['saturation_entry_bytes']} B (every size from there keeps algbw "
            f">= the saturation fraction of the peak {fmt_num(ladder['peak_algbw_gbps'])} GB/s)."
        )
    plateau = ladder["latency_plateau"]
    if plateau is not None:
        out.append(
            f"Latency plateau: {plateau['min_bytes']}..{plateau['max_bytes']} B ({plateau['n_rungs']} rung(s) "
            f"with median within {plateau['tolerance_pct']:g}% of {fmt_num(plateau['base_median_us'])} us)."
        )
    if ladder["tuner"]:
        out.append("")
        out.append(
            "NCCL tuner prediction vs measurement (`time` in the TUNING log is a model, not a measurement):"
        )
        out.append("")
        out.append("| bytes | algo/proto | predicted us | measured us | error % |")
        out.append("|---:|:---|---:|---:|---:|")
        for t in ladder["tuner"]:
            out.append(
                f"| {t['bytes']} | {t['algorithm']}/{t['protocol']} | {fmt_num(t['predicted_us'])} | "
                f"{fmt_num(t['measured_us'])} | {fmt_num(t['error_pct'])} |"
            )
    if ladder["notes"]:
        out.append("")
        out.append("Notes:")
        out.append("")
        for note in ladder["notes"]:
            out.append(f"- {note}")
    if plot_links:
        out.append("")
        out.append("Plots: " + ", ".join(f"[{label}]({href})" for label, href in plot_links))
    out.append("")
    return out


def render_markdown(doc: dict, plot_links: dict[str, list[tuple[str, str]]] | None = None) -> str:
    p = doc["parameters"]
    out = ["# Alpha/beta report", ""]
    out.append(
        f"Gates: beta withheld unless R2 >= {p['r2_min']:g} and transfer share >= {p['share_min']:g} "
        f"with at least {p['min_points']} points; unstable when CV > {p['cv_max_pct']:g}%; saturation "
        f"at {p['saturation_fraction']:g} x peak algbw; plateau within {p['plateau_tolerance_pct']:g}%. "
        "Bandwidths in decimal GB/s (1e9 B/s); times in microseconds."
    )
    out.append("")
    out.append("| input | name | kind | sha256 | runs |")
    out.append("|---:|:---|:---|:---|---:|")
    for item in doc["inputs"]:
        out.append(
            f"| {item['index']} | `{item['name']}` | {item['kind']} | `{item['sha256'][:16]}` | {len(item['runs'])} |"
        )
    for item in doc["inputs"]:
        for run in item["runs"]:
            printed = run.get("avg_bus_bandwidth_printed_gbps")
            if printed is not None:
                out.append("")
                out.append(
                    f"Input {item['index']} run {run['run']}: {run['collective']} on {run['world_size']} ranks "
                    f"(collective from {run['collective_source']}, world size from {run['world_size_source']}); "
                    f"`# Avg bus bandwidth` printed {fmt_num(printed)} GB/s, recomputed from size and time "
                    f"{fmt_num(run['avg_bus_bandwidth_recomputed_gbps'])} GB/s."
                )
    tuning = doc["tuning"]
    if tuning is not None:
        out.append("")
        for log in tuning["logs"]:
            forms = ", ".join(f"{k}: {v}" for k, v in sorted(log["line_forms"].items()))
            out.append(
                f"TUNING log `{log['name']}` (`{log['sha256'][:16]}`): {log['n_records']} distinct "
                f"(function, size) record(s); line forms {forms or 'none'}."
            )
    out.append("")
    for ladder in doc["ladders"]:
        out.extend(render_ladder(ladder, (plot_links or {}).get(ladder["id"])))
    return "\n".join(out).rstrip("\n") + "\n"
