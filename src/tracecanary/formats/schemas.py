"""Access to the JSON Schemas shipped as package data in ``tracecanary/formats/schemas/``
(the contract of every file format; the repository's top-level ``schemas/`` is a link to
that folder) and validation that reports one located error."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

import jsonschema
import referencing

from tracecanary.errors import SchemaError

SCHEMA_PACKAGE = "tracecanary.formats"


@functools.cache
def load_schema(name: str) -> dict:
    """The schema ``schemas/<name>.schema.json`` as a dict."""
    resource = resources.files(SCHEMA_PACKAGE) / "schemas" / f"{name}.schema.json"
    return json.loads(resource.read_text(encoding="utf-8"))


def schema_names() -> list[str]:
    """The names of every shipped schema (``<name>.schema.json``), sorted."""
    folder = resources.files(SCHEMA_PACKAGE) / "schemas"
    suffix = ".schema.json"
    return sorted(e.name[: -len(suffix)] for e in folder.iterdir() if e.name.endswith(suffix))


@functools.cache
def _registry() -> referencing.Registry:
    """Every shipped schema under its ``$id``, so one schema may ``$ref`` a definition
    of another (``trace.schema.json#/$defs/skew_status``) instead of repeating it."""
    schemas = [load_schema(name) for name in schema_names()]
    return referencing.Registry().with_resources(
        (schema["$id"], referencing.Resource.from_contents(schema)) for schema in schemas
    )


@functools.cache
def _validator(name: str, pointer: str | None) -> jsonschema.protocols.Validator:
    schema = load_schema(name)
    if pointer:
        schema = {**schema["$defs"][pointer], "$defs": schema["$defs"]}
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, registry=_registry(), format_checker=cls.FORMAT_CHECKER)


def validate(doc: Any, name: str, *, file: str, pointer: str | None = None, record=None) -> None:
    """Raise SchemaError naming the first violation's field path (deterministic choice)."""
    errors = sorted(
        _validator(name, pointer).iter_errors(doc),
        key=lambda e: (list(map(str, e.absolute_path)), e.message),
    )
    if errors:
        err = errors[0]
        path = "/".join(str(p) for p in err.absolute_path) or "(document)"
        raise SchemaError(err.message[:300], file=file, record=record, field=path)
