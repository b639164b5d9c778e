"""Access to the JSON Schemas shipped as package data in ``tracecanary/formats/schemas/``
(the contract of every file format; the repository's top-level ``schemas/`` is a link to
that folder) and validation that reports one located error."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

import jsonschema

from tracecanary.errors import SchemaError

SCHEMA_PACKAGE = "tracecanary.formats"


@functools.cache
def load_schema(name: str) -> dict:
    """The schema ``schemas/<name>.schema.json`` as a dict."""
    resource = resources.files(SCHEMA_PACKAGE) / "schemas" / f"{name}.schema.json"
    return json.loads(resource.read_text(encoding="utf-8"))


@functools.cache
def _validator(name: str, pointer: str | None) -> jsonschema.protocols.Validator:
    schema = load_schema(name)
    if pointer:
        schema = {**schema["$defs"][pointer], "$defs": schema["$defs"]}
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


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
