"""Simulator configurations built from measured ladders (``tracecanary calibrate-backends``).

Evidence: TraceCanary sweep archives (``tracecanary sweep``) and nccl-tests output. Each
LADDER argument is ``PATH`` or ``NAME=PATH``; its *environment* names the setting it was
measured under:
    sweep archive      the recorded physical configuration's backend and ``env``; only
                       native-mode ladders without op barriers are evidence (the other
                       replayer modes are program transforms the simulator applies, see
                       ``sim/twin.py``; a chunked ladder would count chunking twice)
    nccl-tests output  ``NAME=PATH`` names it; without a name, the NCCL_ALGO /
                       NCCL_PROTO / NCCL_MIN|MAX_NCHANNELS values the log records
                       ("... set by environment to ...") name it; with neither it is
                       refused (one setting is never guessed)

Output: one simulator configuration per physical configuration (``physical_configs`` and
``names`` given: each takes the ladders measured under its own backend and env, and its
replayer mode as ``replay``) or per environment (otherwise). Per (collective, dtype,
group size) a cost curve (``sim/costs.py``): the alpha/beta segments that passed every
trust gate, else monotone interpolation of measured medians, each with its stated error
and the digests of the ladders it came from. A physical configuration with no ladder is
refused by name; a configuration lacking a curve for an op a program's replay uses is
refused by name when that program is priced (``sim/twin.py``, ``sim/engine.py``), never
filled with a default.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from tracecanary.alphabeta.analysis import AnalysisParams, analyze_ladder
from tracecanary.alphabeta.ladder import iter_ladders
from tracecanary.alphabeta.load import load_inputs
from tracecanary.errors import InputError
from tracecanary.formats.ids import BACKENDS_FORMAT
from tracecanary.limits import read_input
from tracecanary.sim.costs import canonical_dtype_name, format_key, monotone_values

CALIBRATION_METHOD = "tracecanary.calibrate-backends/v1"
PLACEMENT_PREFERENCE = ("out_of_place", "unspecified", "in_place")
# a first rung slower than this multiple of the second is flagged and left out of the curve
FIRST_RUNG_OUTLIER_FACTOR = 3.0
_NCCL_ENV_LINE = re.compile(
    r"(NCCL_ALGO|NCCL_PROTO|NCCL_MIN_NCHANNELS|NCCL_MAX_NCHANNELS) set by environment to (\S+)"
)
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$")


def parse_ladder_arg(arg: str) -> tuple[str | None, str]:
    """``NAME=PATH`` -> (NAME, PATH); ``PATH`` -> (None, PATH)."""
    head, sep, tail = arg.partition("=")
    if sep and _NAME.match(head) and not Path(arg).exists():
        return head, tail
    return None, arg


def _sweep_environment(path: Path) -> tuple[str, dict, dict]:
    import json

    attempt = json.loads((path / "attempt.json").read_text(encoding="utf-8"))
    if attempt.get("status") != "complete":
        raise InputError(
            f"sweep attempt is {attempt.get('status')!r}, not complete: not evidence",
            file=str(path),
            field="status",
        )
    cfg = attempt.get("physical_config") or {"name": "native", "mode": "native", "env": {}}
    if cfg.get("mode", "native") != "native" or cfg.get("op_barrier"):
        raise InputError(
            f"ladder swept under mode {cfg.get('mode')!r}"
            f"{' with op barriers' if cfg.get('op_barrier') else ''}: calibrate from native-mode "
            "ladders (the simulator applies the replayer mode as a program transform)",
            file=str(path),
            field="physical_config/mode",
        )
    env = dict(sorted((cfg.get("env") or {}).items()))
    return attempt.get("backend", "gloo"), env, cfg


def _nccltests_environment(path: Path) -> dict:
    text = read_input(path).decode("utf-8", errors="replace")
    return dict(sorted(_NCCL_ENV_LINE.findall(text)))


def _env_label(backend: str, env: dict) -> str:
    if not env:
        return backend
    parts = [f"{k.removeprefix('NCCL_').lower()}-{v.lower()}" for k, v in env.items()]
    return re.sub(r"[^A-Za-z0-9_-]", "_", "_".join([backend, *parts]))[:64]


def _interpolation_errors(bytes_: np.ndarray, values: np.ndarray, medians: np.ndarray) -> dict:
    """Leave-one-out error of linear interpolation at interior rungs (percent of median)."""
    if bytes_.size < 3:
        return {"mean_pct": None, "max_pct": None, "n": 0}
    x = bytes_.astype(np.float64)
    errs = []
    for i in range(1, x.size - 1):
        t = (x[i] - x[i - 1]) / (x[i + 1] - x[i - 1])
        pred = values[i - 1] + t * (values[i + 1] - values[i - 1])
        errs.append(abs(pred - medians[i]) / medians[i] * 100.0)
    arr = np.asarray(errs)
    return {"mean_pct": float(arr.mean()), "max_pct": float(arr.max()), "n": int(arr.size)}


def curve_from_ladder(analysis: dict, ladder_ref: dict) -> dict:
    """One cost curve (see sim/costs.py) from an ``analyze_ladder`` result."""
    rungs = [r for r in analysis["rungs"] if r["excluded"] is None]
    notes: list[str] = []
    excluded = [
        {"bytes": r["bytes"], "reason": r["excluded"]}
        for r in analysis["rungs"]
        if r["excluded"] is not None
    ]
    if (
        len(rungs) >= 3
        and rungs[0]["median_us"] > FIRST_RUNG_OUTLIER_FACTOR * rungs[1]["median_us"]
    ):
        first = rungs.pop(0)
        excluded.append({"bytes": first["bytes"], "reason": "first_rung_outlier"})
        notes.append(
            f"first rung ({first['bytes']} B, median {first['median_us']:.1f} us) is more than "
            f"{FIRST_RUNG_OUTLIER_FACTOR:g}x the next: flagged as a warm-up outlier, not used"
        )
    if not rungs:
        raise InputError(
            "no usable rung (all excluded)", file=ladder_ref["name"], field=analysis["id"]
        )
    b = np.asarray([r["bytes"] for r in rungs], dtype=np.int64)
    med = np.asarray([r["median_us"] for r in rungs], dtype=np.float64)
    cyc = np.asarray([r["n_cycles"] for r in rungs], dtype=np.float64)
    mono = monotone_values(med, cyc)
    segments = []
    for item in analysis["fits"]["segments"]["items"]:
        fit = item["fit"]
        if fit["validated"] and fit["beta_withheld_reason"] is None:
            lo, hi = fit["min_bytes"], fit["max_bytes"]
            if lo < b.min():  # the segment started on a rung left out above
                continue
            segments.append(
                {
                    "basis": item["basis"],
                    "algorithm": item["algorithm"],
                    "protocol": item["protocol"],
                    "min_bytes": lo,
                    "max_bytes": hi,
                    "alpha_us": fit["alpha_us"],
                    "beta_gbps": fit["beta_gbps"],
                    "r2": fit["r2"],
                    "mape_pct": fit["mape_pct"],
                    "max_rel_error_pct": fit["max_rel_error_pct"],
                }
            )
    if not segments:
        notes.append("no alpha/beta segment passed the trust gates: monotone interpolation only")
    interp = _interpolation_errors(b, mono, med)
    cvs = [r["cv_pct"] for r in rungs if r["cv_pct"] is not None]
    seg_err = max((s["max_rel_error_pct"] for s in segments), default=None)
    stated = [v for v in (interp["max_pct"], seg_err) if v is not None]
    return {
        "collective": analysis["collective"],
        "dtype": canonical_dtype_name(analysis["dtype"]),
        "group_size": analysis["world_size"],
        "placement": analysis["placement"],
        "points": [
            {
                "bytes": int(r["bytes"]),
                "median_us": float(m),
                "monotone_us": float(v),
                "n_cycles": int(r["n_cycles"]),
                "cv_pct": r["cv_pct"],
            }
            for r, m, v in zip(rungs, med, mono, strict=True)
        ],
        "segments": segments,
        "error": {
            "interpolation_loo_mean_pct": interp["mean_pct"],
            "interpolation_loo_max_pct": interp["max_pct"],
            "segment_max_rel_error_pct": seg_err,
            "median_rung_cv_pct": float(np.median(cvs)) if cvs else None,
            "stated_error_pct": max(stated) if stated else None,
        },
        "excluded_rungs": excluded,
        "ladders": [ladder_ref],
        "notes": notes,
    }


def calibrate(
    ladder_args: list[str],
    *,
    physical_configs: str | None = None,
    names: list[str] | None = None,
    backend: str | None = None,
    overlap_efficiency: float = 0.0,
    contention: float = 0.0,
    params: AnalysisParams | None = None,
) -> dict:
    """The ``tracecanary.backends/v1`` document (see module doc); InputError (exit 2)
    naming the file or configuration for every refusal."""
    params = params or AnalysisParams()
    if not ladder_args:
        raise InputError("no LADDER given", field="LADDER")
    parsed = [parse_ladder_arg(a) for a in ladder_args]
    paths = [p for _, p in parsed]
    table, loaded, _ = load_inputs(paths)
    env_of_input: dict[int, tuple[str, str, dict]] = {}  # index -> (label, backend, env)
    for item, (name, path) in zip(loaded, parsed, strict=True):
        if item.kind == "sweep_archive":
            be, env, _cfg = _sweep_environment(Path(path))
        else:
            be, env = "nccl", _nccltests_environment(Path(path))
            if name is None and not env:
                raise InputError(
                    "nccl-tests output records no NCCL_ALGO/NCCL_PROTO/channel setting: name its "
                    "configuration as NAME=PATH",
                    file=path,
                )
        env_of_input[item.index] = (name or _env_label(be, env), be, env)

    # evidence per environment label: {(collective, dtype, n): (placement rank, curve)}
    evidence: dict[str, dict] = {}
    env_record: dict[str, tuple[str, dict]] = {}
    for key, rows in iter_ladders(table):
        label, be, env = env_of_input[int(key["input"])]
        env_record.setdefault(label, (be, env))
        if env_record[label] != (be, env):
            raise InputError(
                f"configuration {label!r} names ladders measured under different settings",
                file=loaded[int(key["input"])].path,
                field="NAME",
            )
        item = loaded[int(key["input"])]
        analysis = analyze_ladder(key, rows, params=params, source_name=item.name)
        ref = {"name": item.name, "sha256": item.sha256, "ladder": analysis["id"]}
        curve = curve_from_ladder(analysis, ref)
        ckey = (curve["collective"], curve["dtype"], curve["group_size"])
        rank = PLACEMENT_PREFERENCE.index(curve["placement"])
        slot = evidence.setdefault(label, {})
        if ckey in slot:
            prev_rank, prev = slot[ckey]
            if prev_rank == rank:
                raise InputError(
                    f"two ladders for {format_key(ckey)} under configuration {label!r} "
                    f"({prev['ladders'][0]['name']} and {item.name}): ladders are never merged",
                    file=item.path,
                )
            if prev_rank < rank:
                continue
        slot[ckey] = (rank, curve)

    configs: dict[str, dict] = {}
    if names:
        from tracecanary.physical.config import load_configs, resolve_config

        if physical_configs is None:
            raise InputError("--config needs --physical-configs", field="--config")
        load_configs(physical_configs)
        for name in names:
            record = resolve_config(physical_configs, name, backend or "gloo")
            match = [
                label
                for label, (be, env) in sorted(env_record.items())
                if env == record["env"] and (backend is None or be == backend)
            ]
            if not match:
                raise InputError(
                    f"physical configuration {name!r} has no ladder measured under its backend "
                    f"and env {record['env']}: refused, never filled with a default",
                    file=physical_configs,
                    field=f"configs/{name}",
                )
            configs[name] = _config_doc(
                name, match[0], evidence, record, overlap_efficiency, contention
            )
    else:
        for label in sorted(evidence):
            be, env = env_record[label]
            record = {"name": label, "mode": "native", "env": env, "op_barrier": False}
            configs[label] = _config_doc(
                label, label, evidence, record, overlap_efficiency, contention
            )
    return {
        "format": BACKENDS_FORMAT,
        "description": (
            "simulator configurations calibrated from measured ladders by tracecanary "
            "calibrate-backends: costs are measurements of the machine the ladders record, "
            "each with its stated error"
        ),
        "configs": configs,
    }


def dump_document(doc: dict, path: str) -> bytes:
    """The bytes of ``doc`` for ``path``: JSON for ``.json``, else YAML (keys in order)."""
    import yaml

    from tracecanary.canonical import canonical_json_bytes

    if str(path).endswith(".json"):
        return canonical_json_bytes(doc)
    header = "# written by tracecanary calibrate-backends: measured costs, not model parameters\n"
    return (header + yaml.safe_dump(doc, sort_keys=False, width=100)).encode("utf-8")


def _config_doc(
    name: str,
    label: str,
    evidence: dict,
    record: dict,
    overlap_efficiency: float,
    contention: float,
) -> dict:
    costs = [curve for _, (_, curve) in sorted(evidence[label].items())]
    replay = {"mode": record["mode"], "op_barrier": bool(record.get("op_barrier", False))}
    for key in ("chunks", "bucket_bytes"):
        if key in record:
            replay[key] = int(record[key])
    return {
        "description": f"calibrated from the ladders of {label!r}"
        + (f" for physical configuration {name!r}" if name != label else ""),
        "overlap_efficiency": overlap_efficiency,
        "contention": contention,
        "measured": {
            "method": CALIBRATION_METHOD,
            "evidence": label,
            "env": record["env"],
            "replay": replay,
            "costs": costs,
        },
    }


def add_dispatch(doc: dict, dispatch_args: list[str], *, file: str = "<backends>") -> dict:
    """``doc`` with ``measured.dispatch`` from each ``NAME=ATTEMPT`` (an attempt archive of
    configuration NAME's calibration replay, ``sim/dispatch.py``; repeat a name to pool
    several replays); a name that is not a configuration of ``doc`` is refused."""
    from tracecanary.sim.backends import backends_from_content
    from tracecanary.sim.dispatch import measure_dispatch

    backends = backends_from_content(doc, file=file)
    attempts: dict[str, list[str]] = {}
    for arg in dispatch_args:
        name, sep, path = arg.partition("=")
        if not sep or not _NAME.match(name) or not path:
            raise InputError(f"expected NAME=ATTEMPT, got {arg!r}", field="--dispatch")
        if name not in backends.configs:
            raise InputError(
                f"--dispatch names {name!r}, not a calibrated configuration", field="--dispatch"
            )
        attempts.setdefault(name, []).append(path)
    for name, paths in attempts.items():
        doc["configs"][name]["measured"]["dispatch"] = measure_dispatch(
            paths, backends.configs[name]
        )
    return doc
