"""Access to the JSON Schemas in the repository's ``schemas/`` folder (the contract of
every file format) and validation that reports one located error."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

from tracecanary.errors import SchemaError

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schemas"


@functools.cache
def load_schema(name: str) -> dict:
    """The schema ``schemas/<name>.schema.json`` as a dict."""
    path = SCHEMA_DIR / f"{name}.schema.json"
    return json.loads(path.read_text(encoding="utf-8"))


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
