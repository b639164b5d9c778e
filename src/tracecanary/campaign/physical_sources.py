"""The campaign's physical sources: which sources are replayed through real collectives,
each with its configurations and gate threshold.

Guarantees:

- ``refuse_renamed_physical_keys`` refuses (InputError, exit 2, naming the file and
  field) a config that still sets the single ``physical.source`` key, which
  ``physical.sources`` (a list) replaced; call it before schema validation so the refusal
  names the new key instead of reporting an unexpected property.
- ``physical_sources`` resolves ``physical.sources`` (already validated against the
  config schema, defaults set) into one ``PhysicalSource`` per entry, in config order. An
  entry is a source id or ``{id, configs?, repetitions?, max_runtime_ratio?}``; what an
  entry leaves out is the section's own ``configs`` / ``repetitions`` /
  ``max_runtime_ratio`` (the schema holds those defaults; nothing is repeated here). An id that is not one of the campaign's sources,
  or that appears twice, is refused by name: a physical source is never silently dropped.
- ``check_physical_configs`` loads the physical configurations file the campaign names
  (its schema: every configuration name, and the default, is the config schema's
  ``identifier``, so no name becomes a path outside the campaign) before any job runs,
  and refuses a configuration a physical source replays under that the file does not
  define, naming the file and the key.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracecanary.errors import InputError

RENAMED_PHYSICAL_KEYS = {"source": "sources"}


@dataclass(frozen=True)
class PhysicalSource:
    """One source replayed physically: its configurations (in round order), its
    repetitions (rounds) and the canary/full runtime ratio above which its physical gate
    fails."""

    id: str
    configs: tuple[str, ...]
    repetitions: int
    max_runtime_ratio: float


def refuse_renamed_physical_keys(config: dict, *, file: str) -> None:
    """InputError when ``physical`` still uses a key that was renamed (see module doc)."""
    physical = config.get("physical")
    if not isinstance(physical, dict):
        return
    for old, new in RENAMED_PHYSICAL_KEYS.items():
        if old in physical:
            raise InputError(
                f"physical.{old} was replaced by physical.{new}, a list of source ids "
                f"(write `{new}: [{str(physical[old])[:100]}]`)",
                file=file,
                field=f"physical.{old}",
            )


def physical_sources(config: dict, *, file: str) -> dict[str, PhysicalSource]:
    """The physical sources of a schema-validated campaign config, by id, in config order."""
    physical = config["physical"]
    known = {s["id"] for s in config["sources"]}
    resolved: dict[str, PhysicalSource] = {}
    for i, entry in enumerate(physical["sources"]):
        entry = {"id": entry} if isinstance(entry, str) else entry
        sid = entry["id"]
        field = f"physical.sources[{i}]"
        if sid not in known:
            raise InputError(
                f"physical source {sid!r} is not one of the campaign's sources "
                f"({', '.join(sorted(known))})",
                file=file,
                field=field,
            )
        if sid in resolved:
            raise InputError(f"physical source {sid!r} is listed twice", file=file, field=field)
        _check_world_size(config, sid, field, file=file)
        resolved[sid] = PhysicalSource(
            id=sid,
            configs=tuple(entry.get("configs", physical["configs"])),
            repetitions=int(entry.get("repetitions", physical["repetitions"])),
            max_runtime_ratio=float(entry.get("max_runtime_ratio", physical["max_runtime_ratio"])),
        )
    return resolved


def check_physical_configs(config: dict, sources: dict[str, PhysicalSource], *, file: str) -> None:
    """InputError (exit 2) unless the physical configurations file is valid and defines
    every configuration of ``sources`` (see module doc); nothing to check without
    physical sources."""
    if not sources:
        return
    from tracecanary.physical.config import load_configs

    physical = config["physical"]
    path = physical["physical_configs"]
    defined = load_configs(path)["configs"]
    for i, entry in enumerate(physical["sources"]):
        sid = entry if isinstance(entry, str) else entry["id"]
        overridden = isinstance(entry, dict) and "configs" in entry
        for j, name in enumerate(sources[sid].configs):
            if name not in defined:
                where = f"physical.sources[{i}].configs" if overridden else "physical.configs"
                raise InputError(
                    f"physical source {sid!r} replays under configuration {name!r}, which "
                    f"{path} does not define (have: {', '.join(sorted(defined))})",
                    file=file,
                    field=f"{where}[{j}]",
                )


def _check_world_size(config: dict, sid: str, field: str, *, file: str) -> None:
    """InputError (exit 2) where a live capture's rank count (``nproc``) differs from the
    ranks its physical replay and ladders run on (``physical.nodes`` x ``physical.nproc``):
    the export would hold one rank file per captured rank, which the replay refuses only
    after every upstream job has run."""
    source = next(s for s in config["sources"] if s["id"] == sid)
    if source["kind"] != "live_capture" or "nproc" not in source:
        return
    physical = config["physical"]
    ranks = physical["nodes"] * physical["nproc"]
    if source["nproc"] != ranks:
        raise InputError(
            f"physical source {sid!r} is captured on {source['nproc']} ranks but physical "
            f"replays run on {ranks} (physical.nodes x physical.nproc): capture it with "
            f"nproc: {ranks} or leave it out of physical.sources",
            file=file,
            field=field,
        )
