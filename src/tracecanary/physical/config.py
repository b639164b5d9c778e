"""Named physical configurations (``config/physical.yaml``, schemas/physical.schema.json).

``resolve_config`` returns the record written into ``attempt.json`` as
``physical_config``: ``{name, description, mode, env, op_barrier, chunks?,
bucket_bytes?, backends?}`` with defaults made explicit (``op_barrier`` false).
"""

from __future__ import annotations

from pathlib import Path

from tracecanary.errors import InputError
from tracecanary.formats.schemas import validate
from tracecanary.limits import load_yaml


def default_configs_path() -> Path:
    """The shipped ``physical.yaml`` (package data; ``config/physical.yaml`` is its copy)."""
    from tracecanary.defaults import default_file

    return Path(default_file("physical.yaml"))


def load_configs(path: str | Path) -> dict:
    """The validated configuration document."""
    path = Path(path)
    doc = load_yaml(path)  # under the resource policy (tracecanary.limits)
    validate(doc, "physical", file=str(path))
    default = doc.get("default")
    if default is not None and default not in doc["configs"]:
        raise InputError(
            f"default {default!r} is not a configuration", file=str(path), field="default"
        )
    return doc


def resolve_config(path: str | Path, name: str | None, backend: str) -> dict:
    """The named configuration (or the document's default, else ``native``) for ``backend``."""
    doc = load_configs(path)
    configs = doc["configs"]
    chosen = name or doc.get("default") or "native"
    if chosen not in configs:
        raise InputError(
            f"no physical configuration {chosen!r} (have: {', '.join(sorted(configs))})",
            file=str(path),
            field="configs",
        )
    cfg = configs[chosen]
    backends = cfg.get("backends")
    if backends is not None and backend not in backends:
        raise InputError(
            f"configuration {chosen!r} is for {backends}, not {backend!r}",
            file=str(path),
            field=f"configs/{chosen}/backends",
        )
    record = {
        "name": chosen,
        "description": cfg.get("description", ""),
        "mode": cfg["mode"],
        "env": dict(sorted(cfg["env"].items())),
        "op_barrier": bool(cfg.get("op_barrier", False)),
    }
    for key in ("chunks", "bucket_bytes", "backends"):
        if key in cfg:
            record[key] = cfg[key]
    return record
