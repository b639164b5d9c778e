"""Replay reports (``tracecanary.report/v1``): build them, and verify them bit for bit.

A report is a claim about a *model*: every report says so in ``model.notice``. It embeds
its protocol (input digest, the backend configuration content and digest, simulator
version, ablations, isolated flag, settings, tie tolerance, and with ``--iterations``
the seeded noise settings) and the per-occurrence samples from which every number can be
recomputed; a noisy report also holds per-iteration metric samples (``sim.noise``), which
``verify_report`` regenerates from the same seed.

Guarantees:
- ``build_report`` is deterministic: the same Program, backends and protocol give the
  same document (and, through ``canonical.write_json``, the same bytes);
- ``verify_report`` replays the declared protocol on the program and compares every
  field with the fresh replay; any difference raises ``ClaimFailed`` (exit 1) whose
  field is the dotted path of the first differing field (``configs.<name>.latency.p99_ns``,
  ``configs.<name>.tail_events[3].occ``). Sample blocks are compared by their decoded
  values and digests, so a different zlib build never fails a true report.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator

import numpy as np

from tracecanary.canonical import canonical_json_bytes
from tracecanary.clocks.status import WAYS_OUT
from tracecanary.errors import ClaimFailed, InputError
from tracecanary.formats.ids import REPORT_FORMAT
from tracecanary.program import Program
from tracecanary.sim import SIM_VERSION
from tracecanary.sim import samples as sample_codec
from tracecanary.sim.backends import BackendConfig, Backends, backends_from_content
from tracecanary.sim.engine import Prepared, SimResult, normalize_ablations, prepare, simulate
from tracecanary.sim.isolated import ISOLATED_REPEATS, isolated_times, signatures
from tracecanary.sim.metrics import (
    QUANTILES,
    TAIL_FRACTION,
    TAIL_MIN_EVENTS,
    distribution,
    summarize,
)
from tracecanary.sim.noise import NoiseSettings, noise_settings, noisy_block
from tracecanary.sim.ranking import (
    DEFAULT_TIE_TOLERANCE,
    LATENCY_METRICS,
    latency_values,
    pairwise_decisions,
    pairwise_table,
    ranking,
)

MODEL_NOTICE = (
    "Deterministic scheduler model of rendezvous, per-channel FIFO queueing, compute "
    "overlap and contention (docs/simulator.md). It is not NCCL and touches no hardware: "
    "every number is a claim about this model, not about silicon."
)
ABLATION_LABEL = "simulator controls, not physical interventions"
ISOLATED_DESCRIPTION = (
    "each distinct op signature alone, repeated back to back (nccl-tests style): no gaps, "
    "no skew, no overlap, no other traffic; score = occurrence-weighted sum of per-signature times"
)


def settings() -> dict:
    """The fixed settings of this simulator version (part of every protocol)."""
    return {
        "time_unit": "ns",
        "quantile_method": "weighted inverted_cdf",
        "quantiles": dict(QUANTILES),
        "tail_fraction": TAIL_FRACTION,
        "tail_min_events": TAIL_MIN_EVENTS,
        "isolated_repeats": ISOLATED_REPEATS,
        "service_rounding": "float64 cost, rint half to even",
        "latency": "completion - first member arrival - hidden by overlap",
        "queue_discipline": "FIFO per (group, stream) in occurrence order",
    }


def skew_statement(prep: Prepared) -> dict:
    if prep.skew_status == "simulated":
        text = "arrival skew measured on one clock and simulated (early members wait at the rendezvous)"
    elif prep.skew_status == "ablated":
        text = f"arrival skew set to 0 by the 'skew' ablation ({ABLATION_LABEL})"
    else:
        text = (
            f"arrival skew is UNKNOWN ({prep.skew_reason or 'no reason recorded'}) and was NOT "
            "simulated: rendezvous waits are absent from these numbers; this is not a claim "
            f"that skew is zero. To simulate it: {WAYS_OUT}"
        )
    out = {"status": prep.skew_status, "statement": text}
    if prep.skew_status == "unknown":
        out["reason"] = prep.skew_reason or ""
    return out


def simulate_each(
    prep: Prepared, configs: Iterable[BackendConfig]
) -> Iterator[tuple[BackendConfig, SimResult]]:
    """(configuration, result) for each configuration in order, simulated only when the
    caller asks for the next one (a progress bar on a terminal): a caller that keeps
    only what it needs of each result holds one configuration's arrays at a time."""
    from tracecanary.progress import progress

    for config in progress(list(configs), desc="simulate", unit="config"):
        yield config, simulate(prep, config)


def run_configs(
    program: Program, configs: Iterable[BackendConfig], ablations=()
) -> tuple[Prepared, dict[str, tuple[BackendConfig, SimResult]]]:
    """Prepare once, simulate every configuration and keep every result (a progress bar
    on a terminal). Holds all results at once: ``simulate_each`` holds one."""
    prep = prepare(program, ablations)
    return prep, {c.name: (c, result) for c, result in simulate_each(prep, configs)}


def workload_metrics(
    program: Program, backends: Backends, config_names: Iterable[str] | None = None, ablations=()
) -> dict[str, dict]:
    """Report-style metric blocks per configuration, without samples (for the verifier
    and the ddmin oracle: feed them to ``ranking.decisions``)."""
    prep = prepare(program, ablations)
    return {
        config.name: summarize(prep, result, config)
        for config, result in simulate_each(prep, backends.select(config_names))
    }


def build_report(
    program: Program,
    backends: Backends,
    *,
    input_sha256: str,
    config_names: Iterable[str] | None = None,
    ablations=(),
    isolated: bool = False,
    tie_tolerance: float = DEFAULT_TIE_TOLERANCE,
    noise: NoiseSettings | None = None,
) -> dict:
    """The full ``tracecanary.report/v1`` document (see module doc). With ``noise`` the
    protocol declares it and ``report.noise`` holds the seeded per-iteration metrics and
    their intervals (``sim.noise``); without it the document is the noise-free one."""
    if not (
        isinstance(tie_tolerance, int | float)
        and 0 <= tie_tolerance < 1
        and math.isfinite(tie_tolerance)
    ):
        raise InputError(
            f"tie tolerance must be in [0, 1), got {tie_tolerance!r}", field="tie_tolerance"
        )
    abl = normalize_ablations(ablations)
    selected = backends.select(config_names)
    prep = prepare(program, abl)
    configs: dict[str, dict] = {}
    # one configuration's result at a time: each is summarized and encoded, then freed
    for config, result in simulate_each(prep, selected):
        name = config.name
        block = summarize(prep, result, config)
        block["description"] = config.description
        block["samples"] = {
            "latency_ns": sample_codec.encode(result.latency_ns),
            "queue_wait_ns": sample_codec.encode(result.queue_wait_ns),
            "hidden_ns": sample_codec.encode(result.hidden_ns),
            "service_ns": sample_codec.encode(result.service_ns),
            "candidate": sample_codec.encode(result.candidate),
        }
        configs[name] = block
        del result

    rankings: dict = {"tie_tolerance": tie_tolerance, "metrics": {}, "pairwise": []}
    for metric in LATENCY_METRICS:
        values = latency_values(configs, metric)
        rankings["metrics"][metric] = ranking(values, tie_tolerance)
        rankings["pairwise"].extend(pairwise_table(values, tie_tolerance, metric))

    report: dict = {
        "format": REPORT_FORMAT,
        "model": {
            "kind": "deterministic scheduler simulator",
            "notice": MODEL_NOTICE,
            "doc": "docs/simulator.md",
        },
        "protocol": {
            "input": {"sha256": input_sha256},
            "backends": {"sha256": backends.sha256, "content": backends.content},
            "simulator": {"name": "tracecanary.sim", "version": SIM_VERSION},
            "configs": [c.name for c in selected],
            "ablations": {"applied": list(abl), "label": ABLATION_LABEL},
            "isolated": bool(isolated),
            "settings": settings(),
            "tie_tolerance": tie_tolerance,
        },
        "program": {
            "occurrences": program.n,
            "simulated": prep.n,
            "weight_total": math.fsum(prep.weight.tolist()),
            "world_size": program.world_size,
            "skew": skew_statement(prep),
            "custom_ops": list(prep.custom_ops),
            "notes": list(program.notes),
        },
        "rendezvous_wait": _rendezvous_block(prep),
        "samples": {
            "occ": sample_codec.encode(prep.occ),
            "weight": sample_codec.encode(prep.weight),
        },
        "configs": configs,
        "rankings": rankings,
    }
    if noise is not None:
        report["protocol"]["noise"] = noise.as_protocol()
        report["noise"] = noisy_block(prep, list(selected), noise)
    if prep.skew_status != "unknown":
        report["samples"]["rendezvous_wait_ns"] = sample_codec.encode(prep.rendezvous_wait_ns)
    if isolated:
        sigs = signatures(program)
        for config in selected:
            configs[config.name]["isolated"] = isolated_times(sigs, config)
        scores = {name: configs[name]["isolated"]["score_ns"] for name in configs}
        rankings["isolated"] = ranking(scores, tie_tolerance)
        rankings["isolated_vs_workload"] = _isolated_vs_workload(configs, scores, tie_tolerance)
        report["isolated"] = {
            "repeats": ISOLATED_REPEATS,
            "description": ISOLATED_DESCRIPTION,
            "signatures": sigs,
        }
    return report


def _rendezvous_block(prep: Prepared) -> dict:
    """Rendezvous waits; null (never 0) when skew is unknown and was not simulated."""
    if prep.skew_status == "unknown":
        return {
            k: None
            for k in ("p50_ns", "p95_ns", "p99_ns", "max_ns", "mean_ns", "member_wait_total_ns")
        }
    member_total = math.fsum((prep.weight * prep.member_wait_ns.astype(np.float64)).tolist())
    return {
        **distribution(prep.rendezvous_wait_ns, prep.weight),
        "member_wait_total_ns": member_total,
    }


def _isolated_vs_workload(configs: dict, scores: dict, tie_tolerance: float) -> dict:
    """Per workload latency metric: do the isolated decisions differ, and where."""
    iso = pairwise_decisions(scores, tie_tolerance)
    out = {}
    for metric in LATENCY_METRICS:
        work = pairwise_decisions(latency_values(configs, metric), tie_tolerance)
        differing = []
        for (a, b), d_iso in iso.items():
            d_work = work[(a, b)]
            if d_iso != d_work:
                differing.append(
                    {
                        "a": a,
                        "b": b,
                        "isolated_winner": None if d_iso == 0 else (a if d_iso < 0 else b),
                        "workload_winner": None if d_work == 0 else (a if d_work < 0 else b),
                        "inverted": d_iso * d_work < 0,
                    }
                )
        out[metric] = {"differs": bool(differing), "pairs": differing}
    return out


def _is_sample_block(node) -> bool:
    return (
        isinstance(node, dict) and node.get("encoding") == sample_codec.ENCODING and "data" in node
    )


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def diff_paths(given, expected, path: str = "", limit: int = 50) -> list[str]:
    """Dotted paths where ``given`` differs from ``expected`` (types must match too)."""
    out: list[str] = []

    def walk(a, b, p: str) -> None:
        if len(out) >= limit:
            return
        if _is_sample_block(b):
            if not isinstance(a, dict):
                out.append(p)
                return
            for key in sorted(set(a) | set(b)):
                if key != "data" and (
                    key not in a
                    or key not in b
                    or type(a[key]) is not type(b[key])
                    or a[key] != b[key]
                ):
                    out.append(_join(p, key))
            try:
                same = np.array_equal(sample_codec.decode(a), sample_codec.decode(b))
            except sample_codec.SampleDecodeError:
                same = False
            if not same:
                out.append(_join(p, "data"))
            return
        if isinstance(b, dict):
            if not isinstance(a, dict):
                out.append(p or "(document)")
                return
            for key in sorted(set(a) | set(b)):
                if key not in a or key not in b:
                    out.append(_join(p, key))
                else:
                    walk(a[key], b[key], _join(p, key))
            return
        if isinstance(b, list):
            if not isinstance(a, list) or len(a) != len(b):
                out.append(p)
                return
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                walk(x, y, f"{p}[{i}]")
            return
        if type(a) is not type(b) or a != b:
            out.append(p)

    walk(given, expected, path)
    return out


def _protocol_value(report: dict, *keys: str):
    node = report
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            raise InputError("report lacks a field needed to replay it", field=".".join(keys))
        node = node[key]
    return node


def verify_report(
    report: dict,
    program: Program,
    *,
    backends: Backends | None = None,
    input_sha256: str | None = None,
) -> dict:
    """Replay ``report``'s protocol on ``program`` and compare every field.

    Raises ``ClaimFailed`` naming the first differing field path; ``InputError`` when the
    report lacks what is needed to replay it. Returns a small summary on success.
    """
    if not isinstance(report, dict) or report.get("format") != REPORT_FORMAT:
        raise InputError(f"not a {REPORT_FORMAT} document", field="format")
    declared_input = _protocol_value(report, "protocol", "input", "sha256")
    if input_sha256 is not None and declared_input != input_sha256:
        raise ClaimFailed(
            f"input digest {input_sha256} differs from the report's {declared_input}",
            field="protocol.input.sha256",
        )
    content = _protocol_value(report, "protocol", "backends", "content")
    if not isinstance(content, dict):
        raise InputError(
            "embedded backend content is not a mapping", field="protocol.backends.content"
        )
    embedded = backends_from_content(content, file="<report protocol.backends.content>")
    if embedded.sha256 != _protocol_value(report, "protocol", "backends", "sha256"):
        raise ClaimFailed(
            "embedded backend content does not match its digest", field="protocol.backends.sha256"
        )
    if backends is not None and backends.sha256 != embedded.sha256:
        raise ClaimFailed(
            f"the given backends ({backends.sha256}) differ from the report's ({embedded.sha256})",
            field="protocol.backends.sha256",
        )
    names = _protocol_value(report, "protocol", "configs")
    applied = _protocol_value(report, "protocol", "ablations", "applied")
    isolated = _protocol_value(report, "protocol", "isolated")
    tie = _protocol_value(report, "protocol", "tie_tolerance")
    if not (isinstance(names, list) and all(isinstance(n, str) for n in names) and names):
        raise InputError(
            "protocol.configs must be a non-empty list of names", field="protocol.configs"
        )
    if not (isinstance(applied, list) and all(isinstance(a, str) for a in applied)):
        raise InputError(
            "protocol.ablations.applied must be a list of names", field="protocol.ablations.applied"
        )
    if not isinstance(isolated, bool):
        raise InputError("protocol.isolated must be true or false", field="protocol.isolated")
    if isinstance(tie, bool) or not isinstance(tie, int | float):
        raise InputError("protocol.tie_tolerance must be a number", field="protocol.tie_tolerance")
    unknown = [n for n in names if n not in embedded.configs]
    if unknown:
        raise ClaimFailed(
            f"configuration(s) {', '.join(unknown)} are not in the embedded backends",
            field="protocol.configs",
        )
    noise = None
    if "noise" in report.get("protocol", {}):
        declared = _protocol_value(report, "protocol", "noise")
        if not isinstance(declared, dict):
            raise InputError("protocol.noise must be a mapping", field="protocol.noise")
        noise = noise_settings(
            *(
                _protocol_value(report, "protocol", "noise", key)
                for key in ("iterations", "seed", "service_jitter", "arrival_jitter_ns")
            )
        )
    fresh = build_report(
        program,
        embedded,
        noise=noise,
        input_sha256=declared_input,
        config_names=names,
        ablations=applied,
        isolated=isolated,
        tie_tolerance=tie,
    )
    fresh = json.loads(canonical_json_bytes(fresh))
    diffs = diff_paths(report, fresh)
    if diffs:
        more = f" (and {len(diffs) - 1} more)" if len(diffs) > 1 else ""
        raise ClaimFailed(f"differs from the replay of the declared protocol{more}", field=diffs[0])
    return {"configs": names, "fields_checked": "all", "occurrences": program.n}
