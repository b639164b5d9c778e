"""Backend configurations of the simulator: load, validate, and expose them as cost tables.

A configuration (``tracecanary.backends/v1``, ``schemas/backends.schema.json``) names the
enabled algorithms and protocols (NCCL_ALGO / NCCL_PROTO), the channel count, the
interconnect's bus-bandwidth ceiling, the overlap efficiency, the contention factor and
a table of (algorithm, protocol) candidates with a per-step latency (us) and a
per-channel bus bandwidth (decimal GB/s). A *measured* configuration (written by
``tracecanary calibrate-backends``) instead carries cost curves per (collective, dtype,
group size) from measured ladders (``sim/costs.py``) and the replayer mode its physical
twin uses; it has no candidates.

Guarantees:
- every refusal is an ``InputError``/``SchemaError`` (exit 2) naming the file and the
  field (a JSON-pointer-like path such as ``configs/ring_fast/channels``); YAML
  duplicate keys are refused, never resolved silently;
- the content digest is the SHA-256 of the canonical JSON of the parsed document, so
  the same configuration written with different YAML formatting has the same digest;
- configurations are kept in name order; a configuration's *enabled* candidates keep
  their order in the file (the order breaks ties between equal costs).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracecanary.canonical import canonical_json_bytes, sha256_bytes
from tracecanary.errors import InputError, SchemaError
from tracecanary.formats.schemas import validate
from tracecanary.limits import load_yaml
from tracecanary.sim.costs import CostTable


@dataclass(frozen=True)
class Candidate:
    """One (algorithm, protocol) cost line of a configuration.

    ``effective_busbw_gbps`` = min(channels * busbw_gbps_per_channel, link_busbw_gbps),
    computed once in float64 so the fast engine and any reference use the same value.
    """

    index: int
    algorithm: str
    protocol: str
    latency_us: float
    busbw_gbps_per_channel: float
    effective_busbw_gbps: float

    @property
    def label(self) -> str:
        return f"{self.algorithm}/{self.protocol}"


@dataclass(frozen=True)
class BackendConfig:
    """A named configuration; ``candidates`` holds only the enabled ones, in file order."""

    name: str
    description: str
    channels: int
    link_busbw_gbps: float
    overlap_efficiency: float
    contention: float
    algorithms: tuple[str, ...]
    protocols: tuple[str, ...]
    candidates: tuple[Candidate, ...]
    # measured configurations (``calibrate-backends``): their cost curves and replayer mode;
    # None for a modelled configuration (the candidates then price every op)
    costs: CostTable | None = field(default=None, compare=False)
    replay: dict | None = field(default=None, compare=False)
    # the replayer's measured dispatch lateness (``sim/dispatch.py``), None when not measured
    dispatch: dict | None = field(default=None, compare=False)

    @property
    def measured(self) -> bool:
        return self.costs is not None


@dataclass(frozen=True)
class Backends:
    """All configurations of one document, with its content and digest."""

    content: dict
    sha256: str
    configs: dict[str, BackendConfig]

    def select(
        self, names: Iterable[str] | None = None, *, file: str | None = None
    ) -> list[BackendConfig]:
        """Configurations by name (all, in name order, when ``names`` is None or empty);
        an unknown name is an InputError naming the known ones."""
        wanted = list(names or [])
        if not wanted:
            return [self.configs[n] for n in sorted(self.configs)]
        out = []
        for name in wanted:
            if name not in self.configs:
                known = ", ".join(sorted(self.configs))
                raise InputError(
                    f"no configuration named {name!r} (known: {known})", file=file, field="config"
                )
            if self.configs[name] not in out:
                out.append(self.configs[name])
        return sorted(out, key=lambda c: c.name)


def _finite_numbers(doc: Any, path: str, file: str) -> None:
    if isinstance(doc, float) and not math.isfinite(doc):
        raise SchemaError("number is not finite", file=file, field=path or "(document)")
    if isinstance(doc, dict):
        for k, v in doc.items():
            _finite_numbers(v, f"{path}/{k}" if path else str(k), file)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            _finite_numbers(v, f"{path}/{i}" if path else str(i), file)


def backends_from_content(content: Mapping[str, Any], *, file: str = "<backends>") -> Backends:
    """Validate a parsed backends document and build its cost tables (exit-2 errors)."""
    doc = dict(content)
    _finite_numbers(doc, "", file)
    try:
        canonical_json_bytes(doc)
    except (TypeError, ValueError) as err:
        raise SchemaError(f"content is not plain JSON data: {err}", file=file) from None
    validate(doc, "backends", file=file)
    configs: dict[str, BackendConfig] = {}
    for name in sorted(doc["configs"]):
        raw = doc["configs"][name]
        if "measured" in raw:
            configs[name] = _measured_config(name, raw)
            continue
        seen: set[tuple[str, str]] = set()
        enabled: list[Candidate] = []
        for i, cand in enumerate(raw["candidates"]):
            key = (cand["algorithm"], cand["protocol"])
            if key in seen:
                raise SchemaError(
                    f"candidate {key[0]}/{key[1]} listed twice",
                    file=file,
                    field=f"configs/{name}/candidates/{i}",
                )
            seen.add(key)
            if key[0] in raw["algorithms"] and key[1] in raw["protocols"]:
                per_channel = float(cand["busbw_gbps_per_channel"])
                enabled.append(
                    Candidate(
                        index=i,
                        algorithm=key[0],
                        protocol=key[1],
                        latency_us=float(cand["latency_us"]),
                        busbw_gbps_per_channel=per_channel,
                        effective_busbw_gbps=min(
                            float(raw["channels"]) * per_channel, float(raw["link_busbw_gbps"])
                        ),
                    )
                )
        if not any(c.algorithm == "ring" for c in enabled):
            raise SchemaError(
                "no enabled ring candidate: ring is the only algorithm that serves every "
                "collective (all_gather, reduce_scatter, all_to_all, send)",
                file=file,
                field=f"configs/{name}/candidates",
            )
        configs[name] = BackendConfig(
            name=name,
            description=str(raw.get("description", "")),
            channels=int(raw["channels"]),
            link_busbw_gbps=float(raw["link_busbw_gbps"]),
            overlap_efficiency=float(raw["overlap_efficiency"]),
            contention=float(raw["contention"]),
            algorithms=tuple(raw["algorithms"]),
            protocols=tuple(raw["protocols"]),
            candidates=tuple(enabled),
        )
    return Backends(content=doc, sha256=sha256_bytes(canonical_json_bytes(doc)), configs=configs)


def _measured_config(name: str, raw: Mapping[str, Any]) -> BackendConfig:
    """A configuration calibrated from ladders: no candidates, one cost curve per op key."""
    measured = raw["measured"]
    return BackendConfig(
        name=name,
        description=str(raw.get("description", "")),
        channels=0,
        link_busbw_gbps=0.0,
        overlap_efficiency=float(raw["overlap_efficiency"]),
        contention=float(raw["contention"]),
        algorithms=(),
        protocols=(),
        candidates=(),
        costs=CostTable.from_document(measured["costs"]),
        replay=dict(measured["replay"]),
        dispatch=measured.get("dispatch"),
    )


def load_backends(path: str | Path | None) -> Backends:
    """Read ``path`` (YAML or JSON; None: the shipped example configurations), validate it
    against the schema, build the tables."""
    if path is None:
        from tracecanary.defaults import default_file

        path = default_file("backends.yaml")
    doc = load_yaml(path)  # YAML (and so JSON) under the resource policy
    if not isinstance(doc, dict):
        raise SchemaError("a backends document is a mapping", file=str(path), field="(document)")
    return backends_from_content(doc, file=str(path))
