"""The rollout gate: compare a baseline replay report with a candidate replay report.

A regression is candidate - baseline (positive = slower) of a latency or queue-wait
metric of one configuration pair. A threshold is relative (``p99=5%``: fail when the
candidate is more than 5% slower) or absolute (``p99=200us``: fail when more than
200 us slower); ``warn`` starts at ``warn_fraction`` (default 0.5) of the threshold.
Improvements never trip. The per-phase and per-op breakdowns apply the ``mean`` and
``p99`` thresholds to each phase and each op; a breakdown regression beyond them makes
the verdict at least ``warn`` and is named (phase or op, metric, sizes).

Verdict: ``fail`` when any overall check exceeds its threshold, else ``warn`` when any
check exceeds its warn level or any breakdown regressed, else ``pass``.

Refusals (``InputError``, exit 2): reports of different inputs (input digest) or of
different protocols (simulator version, ablations, isolated flag, settings, tie
tolerance) unless ``allow_different_inputs``; configurations that do not exist. A
candidate configuration on the same canary (same input digest, different backend
content) is the normal case and is allowed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from tracecanary.errors import InputError
from tracecanary.formats.ids import REPORT_FORMAT, VERDICT_FORMAT

DEFAULT_THRESHOLDS = "p50=3%,p95=5%,p99=5%,max=10%,mean=3%,queue_p99=10%"
DEFAULT_WARN_FRACTION = 0.5
METRICS: dict[str, tuple[str, str]] = {
    "p50": ("latency", "p50_ns"),
    "p95": ("latency", "p95_ns"),
    "p99": ("latency", "p99_ns"),
    "max": ("latency", "max_ns"),
    "mean": ("latency", "mean_ns"),
    "queue_p50": ("queue_wait", "p50_ns"),
    "queue_p95": ("queue_wait", "p95_ns"),
    "queue_p99": ("queue_wait", "p99_ns"),
    "queue_max": ("queue_wait", "max_ns"),
    "queue_mean": ("queue_wait", "mean_ns"),
}
_UNITS_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
_THRESHOLD_RE = re.compile(r"^\s*([a-z0-9_]+)\s*=\s*([0-9]+(?:\.[0-9]+)?)\s*(%|ns|us|ms|s)\s*$")


@dataclass(frozen=True)
class Threshold:
    metric: str
    kind: str  # "relative" | "absolute_ns"
    value: float  # fraction for relative, ns for absolute
    spec: str

    def exceeds(self, baseline: float, candidate: float, fraction: float = 1.0) -> bool:
        delta = candidate - baseline
        if delta <= 0:
            return False
        if self.kind == "absolute_ns":
            return delta > fraction * self.value
        if baseline <= 0:
            return True  # any slowdown from zero is an unbounded relative regression
        return delta / baseline > fraction * self.value

    def as_dict(self, warn_fraction: float) -> dict:
        return {
            "spec": self.spec,
            "kind": self.kind,
            "value": self.value,
            "warn_at": self.value * warn_fraction,
        }


def parse_thresholds(spec: str) -> dict[str, Threshold]:
    """``p50=3%,p99=200us`` -> thresholds; InputError naming the bad item."""
    out: dict[str, Threshold] = {}
    for item in (s for s in spec.split(",") if s.strip()):
        m = _THRESHOLD_RE.match(item)
        if not m:
            raise InputError(
                f"threshold {item.strip()!r} is not METRIC=NUMBER(%|ns|us|ms|s)", field="threshold"
            )
        metric, number, unit = m.group(1), float(m.group(2)), m.group(3)
        if metric not in METRICS:
            raise InputError(
                f"unknown threshold metric {metric!r} (known: {', '.join(METRICS)})",
                field="threshold",
            )
        if unit == "%":
            out[metric] = Threshold(metric, "relative", number / 100.0, item.strip())
        else:
            out[metric] = Threshold(metric, "absolute_ns", number * _UNITS_NS[unit], item.strip())
    if not out:
        raise InputError("no thresholds given", field="threshold")
    return out


def _relative(baseline: float | None, candidate: float | None) -> float | None:
    if baseline is None or candidate is None or baseline <= 0:
        return None
    return (candidate - baseline) / baseline


def _protocol_key(report: dict) -> dict:
    proto = report["protocol"]
    return {
        k: proto.get(k) for k in ("simulator", "ablations", "isolated", "settings", "tie_tolerance")
    }


def _check_report(report: Any, name: str) -> None:
    if not isinstance(report, dict) or report.get("format") != REPORT_FORMAT:
        raise InputError(f"not a {REPORT_FORMAT} document", file=name, field="format")
    for key in ("protocol", "configs"):
        if not isinstance(report.get(key), dict):
            raise InputError(f"report lacks {key}", file=name, field=key)


def _pairs(
    baseline: dict, candidate: dict, config: str | None, names: tuple[str, str]
) -> list[tuple[str, str]]:
    b_names, c_names = sorted(baseline["configs"]), sorted(candidate["configs"])
    if config:
        b, _, c = config.partition(":")
        c = c or b
        if b not in baseline["configs"]:
            raise InputError(
                f"no configuration {b!r} (has: {', '.join(b_names)})", file=names[0], field="config"
            )
        if c not in candidate["configs"]:
            raise InputError(
                f"no configuration {c!r} (has: {', '.join(c_names)})", file=names[1], field="config"
            )
        return [(b, c)]
    if len(b_names) == 1 and len(c_names) == 1:
        return [(b_names[0], c_names[0])]
    common = [n for n in b_names if n in candidate["configs"]]
    if not common:
        raise InputError(
            "the reports share no configuration name; say which with --config BASE:CAND",
            field="config",
        )
    return [(n, n) for n in common]


def _breakdown(kind: str, base: dict, cand: dict, thresholds: dict[str, Threshold]) -> list[dict]:
    rows = []
    for key in sorted(set(base) | set(cand)):
        b, c = base.get(key), cand.get(key)
        row: dict[str, Any] = {kind: key}
        if b is None or c is None:
            row.update({"status": "missing_in_" + ("baseline" if b is None else "candidate")})
            rows.append(row)
            continue
        regressed = []
        for metric in ("mean", "p99"):
            bv, cv = b[f"{metric}_ns"], c[f"{metric}_ns"]
            row[f"baseline_{metric}_ns"] = bv
            row[f"candidate_{metric}_ns"] = cv
            row[f"{metric}_relative"] = _relative(bv, cv)
            t = thresholds.get(metric)
            if t is not None and t.exceeds(bv, cv):
                regressed.append(metric)
        row["regressed"] = regressed
        row["status"] = "regressed" if regressed else "ok"
        rows.append(row)
    return rows


def compare_reports(
    baseline: dict,
    candidate: dict,
    *,
    thresholds: dict[str, Threshold] | None = None,
    warn_fraction: float = DEFAULT_WARN_FRACTION,
    config: str | None = None,
    allow_different_inputs: bool = False,
    names: tuple[str, str] = ("BASELINE", "CANDIDATE"),
    digests: tuple[str | None, str | None] = (None, None),
) -> dict:
    """The ``tracecanary.verdict/v1`` document (see module doc)."""
    _check_report(baseline, names[0])
    _check_report(candidate, names[1])
    if not 0 < warn_fraction <= 1:
        raise InputError(
            f"warn fraction must be in (0, 1], got {warn_fraction}", field="warn_fraction"
        )
    thresholds = thresholds or parse_thresholds(DEFAULT_THRESHOLDS)
    b_input = baseline["protocol"].get("input", {}).get("sha256")
    c_input = candidate["protocol"].get("input", {}).get("sha256")
    same_input = b_input == c_input and b_input is not None
    same_protocol = _protocol_key(baseline) == _protocol_key(candidate)
    if not allow_different_inputs:
        if not same_input:
            raise InputError(
                f"reports are of different inputs ({b_input} vs {c_input}); pass --allow-different-inputs "
                "if that comparison is intended",
                file=names[1],
                field="protocol.input.sha256",
            )
        if not same_protocol:
            differing = [
                k for k, v in _protocol_key(baseline).items() if _protocol_key(candidate)[k] != v
            ]
            raise InputError(
                f"reports use different protocols ({', '.join(differing)}); pass --allow-different-inputs "
                "if that comparison is intended",
                file=names[1],
                field=f"protocol.{differing[0]}",
            )

    comparisons = []
    tripped = []
    warnings = []
    for b_name, c_name in _pairs(baseline, candidate, config, names):
        b_block, c_block = baseline["configs"][b_name], candidate["configs"][c_name]
        checks = []
        for metric, t in sorted(thresholds.items()):
            section, field = METRICS[metric]
            bv, cv = b_block[section][field], c_block[section][field]
            if bv is None or cv is None:
                status = "pass" if bv == cv else "fail"
            elif t.exceeds(bv, cv):
                status = "fail"
            elif t.exceeds(bv, cv, warn_fraction):
                status = "warn"
            else:
                status = "pass"
            check = {
                "metric": metric,
                "baseline_ns": bv,
                "candidate_ns": cv,
                "delta_ns": None if bv is None or cv is None else cv - bv,
                "relative": _relative(bv, cv),
                "threshold": t.spec,
                "status": status,
            }
            checks.append(check)
            where = {
                "baseline_config": b_name,
                "candidate_config": c_name,
                "metric": metric,
                "relative": check["relative"],
                "delta_ns": check["delta_ns"],
                "threshold": t.spec,
            }
            if status == "fail":
                tripped.append(where)
            elif status == "warn":
                warnings.append(where)
        by_phase = _breakdown(
            "phase", b_block.get("by_phase", {}), c_block.get("by_phase", {}), thresholds
        )
        by_op = _breakdown("op", b_block.get("by_op", {}), c_block.get("by_op", {}), thresholds)
        statuses = {c["status"] for c in checks}
        breakdown_regressed = any(r["status"] != "ok" for r in by_phase + by_op)
        verdict = (
            "fail"
            if "fail" in statuses
            else ("warn" if "warn" in statuses or breakdown_regressed else "pass")
        )
        comparisons.append(
            {
                "baseline_config": b_name,
                "candidate_config": c_name,
                "verdict": verdict,
                "checks": checks,
                "by_phase": by_phase,
                "by_op": by_op,
            }
        )
    order = {"pass": 0, "warn": 1, "fail": 2}
    overall = max((c["verdict"] for c in comparisons), key=order.__getitem__)

    def side(report: dict, digest: str | None) -> dict:
        proto = report["protocol"]
        return {
            "report_sha256": digest,
            "input_sha256": proto.get("input", {}).get("sha256"),
            "backends_sha256": proto.get("backends", {}).get("sha256"),
            "simulator_version": proto.get("simulator", {}).get("version"),
            "ablations": proto.get("ablations", {}).get("applied", []),
        }

    return {
        "format": VERDICT_FORMAT,
        "verdict": overall,
        "notice": "a gate over simulator reports: a regression in the model, not a hardware measurement",
        "baseline": side(baseline, digests[0]),
        "candidate": side(candidate, digests[1]),
        "same_input": same_input,
        "same_protocol": same_protocol,
        "allow_different_inputs": allow_different_inputs,
        "warn_fraction": warn_fraction,
        "thresholds": {m: t.as_dict(warn_fraction) for m, t in sorted(thresholds.items())},
        "comparisons": comparisons,
        "tripped": tripped,
        "warnings": warnings,
    }


def _fmt_ns(v: float | None) -> str:
    return "-" if v is None else f"{v / 1000:.2f} us"


def _fmt_rel(v: float | None) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{100 * v:+.2f}%"


def verdict_markdown(verdict: dict) -> str:
    """Human-readable summary of a verdict document."""
    lines = [f"# Rollout gate: **{verdict['verdict'].upper()}**", "", f"_{verdict['notice']}_", ""]
    if not verdict["same_input"] or not verdict["same_protocol"]:
        lines += [
            "> reports of different inputs or protocols, compared on request (--allow-different-inputs)",
            "",
        ]
    for comp in verdict["comparisons"]:
        lines += [
            f"## {comp['baseline_config']} -> {comp['candidate_config']}: {comp['verdict']}",
            "",
            "| metric | baseline | candidate | change | threshold | status |",
            "|---|---|---|---|---|---|",
        ]
        for c in comp["checks"]:
            lines.append(
                f"| {c['metric']} | {_fmt_ns(c['baseline_ns'])} | {_fmt_ns(c['candidate_ns'])} | "
                f"{_fmt_rel(c['relative'])} | {c['threshold']} | {c['status']} |"
            )
        for kind, rows in (("phase", comp["by_phase"]), ("op", comp["by_op"])):
            lines += [
                "",
                f"Per {kind}:",
                "",
                f"| {kind} | mean (base -> cand) | change | p99 (base -> cand) | change | status |",
                "|---|---|---|---|---|---|",
            ]
            for r in rows:
                if "baseline_mean_ns" not in r:
                    lines.append(f"| {r[kind]} | - | - | - | - | {r['status']} |")
                    continue
                lines.append(
                    f"| {r[kind]} | {_fmt_ns(r['baseline_mean_ns'])} -> {_fmt_ns(r['candidate_mean_ns'])} | "
                    f"{_fmt_rel(r['mean_relative'])} | {_fmt_ns(r['baseline_p99_ns'])} -> {_fmt_ns(r['candidate_p99_ns'])} | "
                    f"{_fmt_rel(r['p99_relative'])} | {r['status']}{' (' + ', '.join(r['regressed']) + ')' if r['regressed'] else ''} |"
                )
        lines.append("")
    if verdict["tripped"]:
        lines.append("Tripped thresholds:")
        lines += [
            f"- {t['baseline_config']} -> {t['candidate_config']}: {t['metric']} {_fmt_rel(t['relative'])} (threshold {t['threshold']})"
            for t in verdict["tripped"]
        ]
        lines.append("")
    return "\n".join(lines)
