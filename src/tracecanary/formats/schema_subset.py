"""Whether a JSON document is valid under one of our schemas, decided in plain Python for
the subset of JSON Schema 2020-12 that the shipped schemas use, without importing
``jsonschema`` (whose import alone costs a command about 0.15 s here).

Guarantee: ``decide`` answers True or False only where the answer is the one
``jsonschema``'s Draft 2020-12 validator (with its format checker) gives, and None
(declined) everywhere else: a keyword outside the subset (``format``, ``$dynamicRef``,
``multipleOf``, ``dependentSchemas`` ...; ``unevaluatedProperties`` beside ``if`` or a
nested ``$id``), a value that is not a plain JSON value (tuples, numpy scalars, dict
subclasses), a ``$ref`` it cannot resolve to a shipped schema. A schema is the conjunction of its keywords, so one keyword that
fails decides False even beside a declined one; True needs every keyword decided.

``formats.schemas.validate`` trusts a True and asks ``jsonschema`` in every other case,
so a refusal's message is jsonschema's, word for word, and nothing is accepted that
``jsonschema`` would refuse. ``tests/test_schema_subset.py`` checks the two agree on
mutated real documents of every schema.

Each keyword below follows ``jsonschema``'s own definition (``jsonschema/_keywords.py``,
``_types.py``, ``_utils.equal``/``uniq``): a keyword applies only to instances of its
type; ``integer`` admits a float with no fractional part; booleans are neither integers
nor numbers, and ``True`` does not equal ``1``."""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable
from urllib.parse import urldefrag, urljoin

# keywords that assert nothing (annotations, and $defs, which only holds what $ref reads)
ANNOTATIONS = frozenset(
    {"$schema", "$id", "$defs", "$comment", "title", "description", "default", "examples",
     "deprecated", "readOnly", "writeOnly", "then", "else"}
)  # fmt: skip  (then and else are read by "if")

_JSON_TYPES = (dict, list, str, int, float, bool, type(None))


class _Declined(Exception):
    """The subset cannot decide this document; jsonschema must."""


def _is_type(instance, name: str) -> bool:
    if name == "object":
        return isinstance(instance, dict)
    if name == "array":
        return isinstance(instance, list)
    if name == "string":
        return isinstance(instance, str)
    if name == "integer":
        if isinstance(instance, bool):
            return False
        return isinstance(instance, int) or (isinstance(instance, float) and instance.is_integer())
    if name == "number":
        return not isinstance(instance, bool) and isinstance(instance, numbers.Number)
    if name == "boolean":
        return isinstance(instance, bool)
    if name == "null":
        return instance is None
    raise _Declined


_TRUE, _FALSE = object(), object()  # what True and False become where they must not equal 1, 0


def _unbool(value):
    if value is True:
        return _TRUE
    if value is False:
        return _FALSE
    return value


def _equal(one, two) -> bool:
    """JSON Schema equality: ``True`` is not ``1``, ``1`` is ``1.0``, containers compared
    element by element; declines anything but JSON values."""
    if one is two:
        return True
    for value in (one, two):
        if type(value) not in _JSON_TYPES and value is not _TRUE and value is not _FALSE:
            raise _Declined
    if isinstance(one, str) or isinstance(two, str):
        return one == two
    if isinstance(one, list) and isinstance(two, list):
        return len(one) == len(two) and all(_equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, dict) and isinstance(two, dict):
        return len(one) == len(two) and all(k in two and _equal(v, two[k]) for k, v in one.items())
    return _unbool(one) == _unbool(two)


def _unique(items: list) -> bool:
    """Whether no two items are equal, found as jsonschema finds it (sorted neighbours,
    or every pair where the items do not sort)."""
    try:
        ordered = sorted(_unbool(i) for i in items)
        return not any(_equal(a, b) for a, b in zip(ordered, ordered[1:], strict=False))
    except (NotImplementedError, TypeError):
        seen: list = []
        for item in items:
            item = _unbool(item)
            if any(_equal(s, item) for s in seen):
                return False
            seen.append(item)
        return True


class SubsetValidator:
    """Decides documents against shipped schemas; ``load(uri)`` gives the schema whose
    ``$id`` is ``uri`` (None when there is none, which declines)."""

    def __init__(self, load: Callable[[str], dict | None]):
        self._load = load
        self._resolved: dict[tuple[str, str, int], tuple[dict, tuple]] = {}

    def decide(self, instance, schema: dict) -> bool | None:
        """True or False as jsonschema would answer; None where the subset declines."""
        try:
            return self._valid(instance, schema, schema.get("$id", ""), schema)
        except (_Declined, RecursionError, TypeError):
            return None  # TypeError: say, a non-string key matched against a pattern

    def _resolve(self, ref: str, base: str, root: dict) -> tuple[dict | bool, str, dict]:
        """(target schema, its base URI, its document); remembered per ref, base and root
        (the root is kept with the answer, so its id is not reused while remembered)."""
        key = (ref, base, id(root))
        known = self._resolved.get(key)
        if known is not None and known[0] is root:
            return known[1]
        answer = self._lookup(ref, base, root)
        self._resolved[key] = (root, answer)
        return answer

    def _lookup(self, ref: str, base: str, root: dict) -> tuple[dict | bool, str, dict]:
        uri, fragment = urldefrag(urljoin(base, ref))
        if uri in ("", base.split("#")[0]):
            document = root
        else:
            document = self._load(uri)
            if document is None:
                raise _Declined
        target = document
        if fragment:
            if not fragment.startswith("/"):
                raise _Declined  # an $anchor
            for part in fragment[1:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, dict) or part not in target:
                    raise _Declined
                target = target[part]
        return target, uri, document

    def _valid(self, instance, schema, base: str, root: dict) -> bool:
        if schema is True:
            return True
        if schema is False:
            return False
        if not isinstance(schema, dict):
            raise _Declined
        if type(instance) not in _JSON_TYPES:
            raise _Declined
        if "$id" in schema and schema is not root:
            base = urljoin(base, schema["$id"])
        for keyword, value in schema.items():
            if keyword in ANNOTATIONS:
                continue
            check = _KEYWORDS.get(keyword)
            if check is None:
                raise _Declined
            if not check(self, value, instance, schema, base, root):
                return False
        return True


def _type(v: SubsetValidator, types, instance, schema, base, root) -> bool:
    names = [types] if isinstance(types, str) else types
    return any(_is_type(instance, name) for name in names)


def _enum(v, values, instance, schema, base, root) -> bool:
    return any(_equal(each, instance) for each in values)


def _const(v, value, instance, schema, base, root) -> bool:
    return _equal(instance, value)


def _ref(v: SubsetValidator, ref, instance, schema, base, root) -> bool:
    target, uri, document = v._resolve(ref, base, root)
    return v._valid(instance, target, uri or base, document)


def _properties(v: SubsetValidator, properties, instance, schema, base, root) -> bool:
    if not isinstance(instance, dict):
        return True
    return all(
        v._valid(instance[name], sub, base, root)
        for name, sub in properties.items()
        if name in instance
    )


def _required(v, names, instance, schema, base, root) -> bool:
    return not isinstance(instance, dict) or all(name in instance for name in names)


def _additional_properties(v: SubsetValidator, extra_schema, instance, schema, base, root) -> bool:
    if not isinstance(instance, dict):
        return True
    named = schema.get("properties", {})
    patterns = "|".join(schema.get("patternProperties", {}))
    extras = [
        key for key in instance if key not in named and not (patterns and re.search(patterns, key))
    ]
    if isinstance(extra_schema, dict):
        return all(v._valid(instance[key], extra_schema, base, root) for key in extras)
    return bool(extra_schema) or not extras


def _pattern_properties(v: SubsetValidator, patterns, instance, schema, base, root) -> bool:
    if not isinstance(instance, dict):
        return True
    return all(
        v._valid(value, sub, base, root)
        for pattern, sub in patterns.items()
        for key, value in instance.items()
        if re.search(pattern, key)
    )


def _property_names(v: SubsetValidator, sub, instance, schema, base, root) -> bool:
    return not isinstance(instance, dict) or all(v._valid(k, sub, base, root) for k in instance)


def _min_properties(v, least, instance, schema, base, root) -> bool:
    return not isinstance(instance, dict) or len(instance) >= least


def _max_properties(v, most, instance, schema, base, root) -> bool:
    return not isinstance(instance, dict) or len(instance) <= most


def _dependent_required(v, dependencies, instance, schema, base, root) -> bool:
    if not isinstance(instance, dict):
        return True
    return all(
        each in instance
        for name, needed in dependencies.items()
        if name in instance
        for each in needed
    )


def _prefix_items(v: SubsetValidator, prefix, instance, schema, base, root) -> bool:
    if not isinstance(instance, list):
        return True
    return all(v._valid(item, sub, base, root) for item, sub in zip(instance, prefix, strict=False))


def _items(v: SubsetValidator, items, instance, schema, base, root) -> bool:
    """The items after ``prefixItems`` (which checks its own)."""
    if not isinstance(instance, list):
        return True
    rest = instance[len(schema.get("prefixItems", [])) :]
    if items is False:
        return not rest
    return all(v._valid(item, items, base, root) for item in rest)


def _min_items(v, least, instance, schema, base, root) -> bool:
    return not isinstance(instance, list) or len(instance) >= least


def _max_items(v, most, instance, schema, base, root) -> bool:
    return not isinstance(instance, list) or len(instance) <= most


def _unique_items(v, wanted, instance, schema, base, root) -> bool:
    return not (wanted and isinstance(instance, list)) or _unique(instance)


def _bound(compare: Callable[[object, object], bool]):
    def check(v, limit, instance, schema, base, root) -> bool:
        return not _is_type(instance, "number") or not compare(instance, limit)

    return check


def _min_length(v, least, instance, schema, base, root) -> bool:
    return not isinstance(instance, str) or len(instance) >= least


def _max_length(v, most, instance, schema, base, root) -> bool:
    return not isinstance(instance, str) or len(instance) <= most


def _pattern(v, pattern, instance, schema, base, root) -> bool:
    return not isinstance(instance, str) or re.search(pattern, instance) is not None


def _evaluated_keys(v: SubsetValidator, instance: dict, schema, base, root) -> set:
    """The keys of ``instance`` that ``schema`` evaluates, as jsonschema collects them for
    ``unevaluatedProperties`` (``$ref``, ``properties``, ``patternProperties``,
    ``additionalProperties``, and the ``allOf``/``anyOf``/``oneOf`` branches the instance
    is valid under); declines the other in-place applicators."""
    if isinstance(schema, bool):
        return set()
    if not isinstance(schema, dict) or any(
        k in schema
        for k in ("$id", "$dynamicRef", "dependentSchemas", "if", "unevaluatedProperties")
    ):
        raise _Declined
    keys: set = set()
    if "$ref" in schema:
        target, uri, document = v._resolve(schema["$ref"], base, root)
        keys |= _evaluated_keys(v, instance, target, uri or base, document)
    if isinstance(schema.get("properties"), dict):
        keys |= schema["properties"].keys() & instance.keys()
    if "additionalProperties" in schema:
        extra = schema["additionalProperties"]
        keys |= {k for k, value in instance.items() if v._valid(value, extra, base, root)}
    for pattern in schema.get("patternProperties", {}):
        keys |= {k for k in instance if re.search(pattern, k)}
    for keyword in ("allOf", "oneOf", "anyOf"):
        for sub in schema.get(keyword, []):
            if v._valid(instance, sub, base, root):
                keys |= _evaluated_keys(v, instance, sub, base, root)
    return keys


def _unevaluated_properties(v: SubsetValidator, rest, instance, schema, base, root) -> bool:
    if not isinstance(instance, dict):
        return True
    others = {k: value for k, value in schema.items() if k not in ("unevaluatedProperties", "$id")}
    evaluated = _evaluated_keys(v, instance, others, base, root)
    return all(v._valid(instance[k], rest, base, root) for k in instance if k not in evaluated)


def _all_of(v: SubsetValidator, schemas, instance, schema, base, root) -> bool:
    return all(v._valid(instance, s, base, root) for s in schemas)


def _any_of(v: SubsetValidator, schemas, instance, schema, base, root) -> bool:
    return any(v._valid(instance, s, base, root) for s in schemas)


def _one_of(v: SubsetValidator, schemas, instance, schema, base, root) -> bool:
    return sum(1 for s in schemas if v._valid(instance, s, base, root)) == 1


def _not(v: SubsetValidator, sub, instance, schema, base, root) -> bool:
    return not v._valid(instance, sub, base, root)


def _if(v: SubsetValidator, condition, instance, schema, base, root) -> bool:
    if v._valid(instance, condition, base, root):
        return "then" not in schema or v._valid(instance, schema["then"], base, root)
    return "else" not in schema or v._valid(instance, schema["else"], base, root)


_KEYWORDS = {
    "type": _type,
    "enum": _enum,
    "const": _const,
    "$ref": _ref,
    "properties": _properties,
    "required": _required,
    "additionalProperties": _additional_properties,
    "patternProperties": _pattern_properties,
    "propertyNames": _property_names,
    "minProperties": _min_properties,
    "maxProperties": _max_properties,
    "dependentRequired": _dependent_required,
    "prefixItems": _prefix_items,
    "items": _items,
    "minItems": _min_items,
    "maxItems": _max_items,
    "uniqueItems": _unique_items,
    "minimum": _bound(lambda x, limit: x < limit),
    "maximum": _bound(lambda x, limit: x > limit),
    "exclusiveMinimum": _bound(lambda x, limit: x <= limit),
    "exclusiveMaximum": _bound(lambda x, limit: x >= limit),
    "minLength": _min_length,
    "maxLength": _max_length,
    "pattern": _pattern,
    "allOf": _all_of,
    "anyOf": _any_of,
    "oneOf": _one_of,
    "not": _not,
    "if": _if,
    "unevaluatedProperties": _unevaluated_properties,
}
