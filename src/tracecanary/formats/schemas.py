"""Access to the JSON Schemas shipped as package data in ``tracecanary/formats/schemas/``
(the contract of every file format; the repository's top-level ``schemas/`` is a link to
that folder) and validation that reports one located error.

A valid document is accepted by ``formats.schema_subset`` without importing
``jsonschema``; any other document is judged by ``jsonschema``, which words the error."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracecanary.errors import SchemaError
from tracecanary.formats.schema_subset import SubsetValidator

if TYPE_CHECKING:
    import jsonschema
    import referencing

# the package data folder (read as files: importlib.resources costs a command ~10 ms)
SCHEMA_FOLDER = Path(__file__).parent / "schemas"


@functools.cache
def load_schema(name: str) -> dict:
    """The schema ``schemas/<name>.schema.json`` as a dict."""
    return json.loads((SCHEMA_FOLDER / f"{name}.schema.json").read_text(encoding="utf-8"))


@functools.cache
def schema_names() -> tuple[str, ...]:
    """The names of every shipped schema (``<name>.schema.json``), sorted."""
    suffix = ".schema.json"
    return tuple(
        sorted(e.name[: -len(suffix)] for e in SCHEMA_FOLDER.iterdir() if e.name.endswith(suffix))
    )


SCHEMA_ID_PREFIX = "https://tracecanary.dev/schemas/"


@functools.cache
def schema_by_id(uri: str) -> dict | None:
    """The shipped schema whose ``$id`` is ``uri`` (None when there is none)."""
    if not uri.startswith(SCHEMA_ID_PREFIX) or not uri.endswith(".schema.json"):
        return None
    name = uri[len(SCHEMA_ID_PREFIX) : -len(".schema.json")]
    if name not in schema_names():
        return None
    schema = load_schema(name)
    return schema if schema.get("$id") == uri else None


_SUBSET = SubsetValidator(schema_by_id)


@functools.cache
def _root(name: str, pointer: str | None) -> dict:
    """What a document is validated against: the schema, or one of its ``$defs``."""
    schema = load_schema(name)
    return {**schema["$defs"][pointer], "$defs": schema["$defs"]} if pointer else schema


@functools.cache
def _registry() -> referencing.Registry:
    """Every shipped schema under its ``$id``, so one schema may ``$ref`` a definition
    of another (``trace.schema.json#/$defs/skew_status``) instead of repeating it."""
    import referencing

    schemas = [load_schema(name) for name in schema_names()]
    return referencing.Registry().with_resources(
        (schema["$id"], referencing.Resource.from_contents(schema)) for schema in schemas
    )


def jsonschema_validator(schema: dict) -> jsonschema.protocols.Validator:
    """jsonschema's validator for ``schema`` (its draft, every shipped schema reachable by
    ``$ref``, formats checked): the judge of every document the subset does not accept,
    and the one ``tests/test_schema_subset.py`` holds the subset to."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, registry=_registry(), format_checker=cls.FORMAT_CHECKER)


@functools.cache
def _validator(name: str, pointer: str | None) -> jsonschema.protocols.Validator:
    return jsonschema_validator(_root(name, pointer))


def validate(doc: Any, name: str, *, file: str, pointer: str | None = None, record=None) -> None:
    """Raise SchemaError naming the first violation's field path (deterministic choice)."""
    if _SUBSET.decide(doc, _root(name, pointer)) is True:
        return
    errors = sorted(
        _validator(name, pointer).iter_errors(doc),
        key=lambda e: (list(map(str, e.absolute_path)), e.message),
    )
    if errors:
        err = errors[0]
        path = "/".join(str(p) for p in err.absolute_path) or "(document)"
        raise SchemaError(err.message[:300], file=file, record=record, field=path)
