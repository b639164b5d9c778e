"""``formats.schema_subset`` answers exactly as jsonschema does, or declines.

``formats.schemas.validate`` accepts a document on the subset's True without importing
jsonschema, so a True that jsonschema would not give lets a bad document in. These tests
hold the subset to jsonschema's Draft 2020-12 validator: on random JSON values against a
schema for every keyword the subset models, on every document of a real tiny-campaign
run and on thousands of mutations of them, and on the inputs it must decline."""

from __future__ import annotations

import copy
import json
import math
import random
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tracecanary.errors import SchemaError
from tracecanary.formats import schemas
from tracecanary.formats.ids import FORMAT_SCHEMAS
from tracecanary.formats.schema_subset import SubsetValidator

SUBSET = SubsetValidator(schemas.schema_by_id)


def jsonschema_says(doc, schema: dict) -> bool:
    return schemas.jsonschema_validator(schema).is_valid(doc)


# one schema per keyword the subset models, and a few that combine them
KEYWORD_SCHEMAS = [
    {"type": "integer"},
    {"type": "number"},
    {"type": ["string", "null"]},
    {"type": "boolean"},
    {"type": "array"},
    {"type": "object"},
    {"enum": [1, "a", None, [1, 2], {"k": True}]},
    {"enum": [True, 0.0]},
    {"const": 1},
    {"const": False},
    {"const": [1, [True]]},
    {"minimum": 0},
    {"maximum": 2.5},
    {"exclusiveMinimum": 0},
    {"exclusiveMaximum": 1},
    {"minLength": 1, "maxLength": 3},
    {"pattern": "^[a-c]+$"},
    {"minItems": 1, "maxItems": 2},
    {"uniqueItems": True},
    {"items": {"type": "integer"}},
    {"prefixItems": [{"type": "string"}], "items": False},
    {"prefixItems": [{"type": "integer"}, {"type": "string"}]},
    {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
    {"properties": {"a": {}}, "additionalProperties": False},
    {"properties": {"a": {}}, "patternProperties": {"^x": {"type": "string"}},
     "additionalProperties": {"type": "boolean"}},  # fmt: skip
    {"propertyNames": {"pattern": "^[a-z]$"}, "minProperties": 1, "maxProperties": 2},
    {"dependentRequired": {"a": ["b"]}},
    {"allOf": [{"type": "number"}, {"minimum": 1}]},
    {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    {"oneOf": [{"type": "number"}, {"type": "integer"}]},
    {"not": {"type": "array"}},
    {"if": {"type": "integer"}, "then": {"minimum": 3}, "else": {"type": "string"}},
    {"$defs": {"pos": {"type": "integer", "minimum": 1}},
     "type": "array", "items": {"$ref": "#/$defs/pos"}},  # fmt: skip
    {"$ref": "https://tracecanary.dev/schemas/trace.schema.json#/$defs/skew_status"},
    {"$defs": {"ab": {"properties": {"a": {}, "b": {"type": "integer"}}}},
     "allOf": [{"$ref": "#/$defs/ab"}], "unevaluatedProperties": False},  # fmt: skip
    {"anyOf": [{"properties": {"a": {"type": "string"}}}, {"patternProperties": {"^x": {}}}],
     "unevaluatedProperties": {"type": "integer"}},  # fmt: skip
    {"oneOf": [{"additionalProperties": {"type": "boolean"}}, {"required": ["b"]}],
     "unevaluatedProperties": False},  # fmt: skip
    True,
    False,
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0.0, 1.0, -0.0, 2.5])
    | st.text("abcx", max_size=4),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text("abx", max_size=2), children, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(doc=json_values, index=st.integers(0, len(KEYWORD_SCHEMAS) - 1))
def test_subset_decides_every_modelled_keyword_as_jsonschema_does(doc, index):
    schema = KEYWORD_SCHEMAS[index]
    root = schema if isinstance(schema, dict) else {"allOf": [schema]}
    assert SUBSET.decide(doc, root) == jsonschema_says(doc, root)


@pytest.mark.parametrize(
    ("doc", "schema", "expected"),
    [
        (True, {"type": "integer"}, False),  # a boolean is no integer
        (1.0, {"type": "integer"}, True),  # a float with no fraction is one
        (True, {"const": 1}, False),
        (1, {"const": 1.0}, True),
        ([1, True], {"uniqueItems": True}, True),
        ([1, 1.0], {"uniqueItems": True}, False),
        ([[1], [True]], {"uniqueItems": True}, True),
        ({"xy": "s"}, {"patternProperties": {"^x": {}}, "additionalProperties": False}, True),
        (5, {"oneOf": [{"type": "number"}, {"type": "integer"}]}, False),  # both match
        (["a", 1], {"prefixItems": [{"type": "string"}], "items": False}, False),
    ],
)
def test_subset_keeps_json_schema_equality_and_type_rules(doc, schema, expected):
    assert jsonschema_says(doc, schema) is expected
    assert SUBSET.decide(doc, schema) is expected


@pytest.mark.parametrize(
    ("doc", "schema"),
    [
        ("x", {"format": "date"}),
        ({"a": 1}, {"if": {"required": ["a"]}, "unevaluatedProperties": False}),
        (4, {"multipleOf": 2}),
        ((1, 2), {"type": "array"}),  # a tuple is no JSON value
        (np.int64(3), {"type": "integer"}),
        (OrderedDict(a=1), {"type": "object"}),
        ([(1,)], {"enum": [[[1]]]}),
        (1, {"$ref": "https://example.org/elsewhere.json"}),
        (1, {"$ref": "#/$defs/missing"}),
        (1, {"type": "float"}),
    ],
)
def test_subset_declines_what_it_does_not_model(doc, schema):
    assert SUBSET.decide(doc, schema) is None


def test_a_failing_keyword_decides_false_beside_a_declined_one():
    assert SUBSET.decide("x", {"type": "integer", "format": "date"}) is False


# ---- real documents -------------------------------------------------------------------


def campaign_documents(root: Path) -> list[tuple[str, str, dict]]:
    """(path, schema name, document) for every JSON or YAML file under ``root`` whose
    ``format`` has a schema."""
    found = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".json", ".yaml") or "/cas/" in str(path) or not path.is_file():
            continue
        try:
            text = path.read_text()
            doc = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (UnicodeDecodeError, ValueError, yaml.YAMLError):
            continue
        if isinstance(doc, dict) and doc.get("format") in FORMAT_SCHEMAS:
            found.append((str(path.relative_to(root)), FORMAT_SCHEMAS[doc["format"]], doc))
    return found


REPLACEMENTS = [None, True, False, 0, -1, 1, 1.5, 2**70, -0.5, "", "x", "all_reduce", [], {},
                [1], {"x": 1}, float("nan"), float("inf")]  # fmt: skip


def _slots(doc, trail=()):
    """Every (container, key) in a document, containers first."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield doc, key
            yield from _slots(value)
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield doc, index
            yield from _slots(value)


def mutate(doc: dict, rng: random.Random) -> dict:
    """A copy of ``doc`` with one change: a value replaced, a key or item removed, an
    unknown key added, an item duplicated or a boolean turned into its integer."""
    copied = copy.deepcopy(doc)
    slots = list(_slots(copied))
    container, key = rng.choice(slots)
    action = rng.randrange(6)
    if action == 0 or action == 5 and not isinstance(container[key], bool):
        container[key] = copy.deepcopy(rng.choice(REPLACEMENTS))
    elif action == 1:
        del container[key]
    elif action == 2 and isinstance(container, dict):
        container["unexpected_" + str(rng.randrange(3))] = rng.choice(REPLACEMENTS[:8])
    elif action == 3 and isinstance(container, list):
        container.append(copy.deepcopy(container[key]))
    elif action == 5:
        container[key] = int(container[key])
    else:
        container[key] = copy.deepcopy(rng.choice(REPLACEMENTS))
    return copied


def test_subset_accepts_every_campaign_document_and_agrees_on_their_mutations(tiny_campaign):
    documents = campaign_documents(tiny_campaign)
    names = {name for _, name, _ in documents}
    assert {"canary", "verification", "report", "backends", "manifest"} <= names, names
    rng = random.Random(20261202)
    decided = {True: 0, False: 0, None: 0}
    for path, name, doc in documents:
        root = schemas.load_schema(name)
        verdict = SUBSET.decide(doc, root)
        assert jsonschema_says(doc, root), path
        assert verdict is True, path
        size = len(json.dumps(doc))
        for _ in range(40 if size < 200_000 else 4):
            changed = mutate(doc, rng)
            verdict = SUBSET.decide(changed, root)
            decided[verdict] += 1
            if verdict is not None:
                assert verdict == jsonschema_says(changed, root), (path, verdict)
    # the mutations exercise both answers, and the subset decides most of them
    assert decided[True] > 100 and decided[False] > 100, decided
    assert decided[None] < (decided[True] + decided[False]) / 4, decided


def test_shipped_defaults_are_decided_valid():
    from tracecanary.defaults import default_file

    for name, schema in (("backends.yaml", "backends"), ("physical.yaml", "physical")):
        doc = yaml.safe_load(Path(default_file(name)).read_text())
        assert SUBSET.decide(doc, schemas.load_schema(schema)) is True, name


def test_validate_words_a_refusal_as_jsonschema_does():
    doc = yaml.safe_load((Path(__file__).resolve().parents[1] / "config/backends.yaml").read_text())
    doc["configs"] = "none"
    with pytest.raises(SchemaError) as raised:
        schemas.validate(doc, "backends", file="b.yaml")
    assert raised.value.field == "configs"
    assert "'none' is not of type 'object'" in str(raised.value)


def test_a_valid_document_is_accepted_without_importing_jsonschema(tmp_path):
    program = (
        "import sys, yaml\n"
        "from tracecanary.defaults import default_file\n"
        "from tracecanary.formats.schemas import validate\n"
        "validate(yaml.safe_load(open(default_file('backends.yaml')).read()), 'backends', file='b')\n"
        "print(sorted(m for m in ('jsonschema', 'referencing') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_nan_and_infinity_are_judged_as_jsonschema_judges_them():
    for value in (math.nan, math.inf, -math.inf):
        for schema in ({"minimum": 0}, {"maximum": 0}, {"type": "integer"}, {"enum": [1.0]}):
            assert SUBSET.decide(value, schema) == jsonschema_says(value, schema)
