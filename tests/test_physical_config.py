"""Physical configurations: config/physical.yaml against its schema, and refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tracecanary.errors import InputError
from tracecanary.formats.schemas import validate
from tracecanary.physical.config import load_configs, resolve_config

SHIPPED = Path(__file__).resolve().parents[1] / "config" / "physical.yaml"


def test_shipped_configs_validate_and_offer_distinct_cpu_strategies():
    doc = yaml.safe_load(SHIPPED.read_text())
    validate(doc, "physical", file=str(SHIPPED))  # jsonschema, the config schema registered
    gloo = {n: c for n, c in doc["configs"].items() if "gloo" in c.get("backends", ["gloo"])}
    assert {c["mode"] for c in gloo.values()} == {"native", "decomposed", "chunked", "fused"}
    nccl = [c for c in doc["configs"].values() if c.get("backends") == ["nccl"]]
    assert {k for c in nccl for k in c["env"]} >= {"NCCL_ALGO", "NCCL_PROTO", "NCCL_MAX_NCHANNELS"}


def test_resolved_config_makes_defaults_explicit():
    record = resolve_config(SHIPPED, None, "gloo")
    assert record == {
        "name": "native", "description": "one direct call per op, library defaults",
        "mode": "native", "env": {}, "op_barrier": False,
    }  # fmt: skip
    assert resolve_config(SHIPPED, "chunked4", "gloo")["chunks"] == 4


@pytest.mark.parametrize(
    "config, field",
    [
        ({"mode": "chunked", "env": {}}, "configs/c"),
        ({"mode": "native", "env": {}, "chunks": 4}, "configs/c"),
        ({"mode": "fused", "env": {}, "bucket_bytes": 0}, "configs/c/bucket_bytes"),
        ({"mode": "native", "env": {"NCCL_MAX_NCHANNELS": 2}}, "configs/c/env/NCCL_MAX_NCHANNELS"),
        ({"mode": "warp", "env": {}}, "configs/c/mode"),
    ],
)
def test_bad_configuration_is_refused_naming_its_field(tmp_path, config, field):
    path = tmp_path / "physical.yaml"
    path.write_text(yaml.safe_dump({"format": "tracecanary.physical/v1", "configs": {"c": config}}))
    with pytest.raises(InputError) as err:
        load_configs(path)
    assert err.value.field == field and err.value.file == str(path)


@pytest.mark.parametrize("name", ["../../../x_escape", "..", "a..", "x.y", "-x", "a/b", "x" * 129])
def test_a_configuration_name_that_is_not_an_identifier_is_refused_naming_the_key(tmp_path, name):
    """A configuration name becomes a path component in a campaign
    (``physical/<source>/canary/<config>``): it is the config schema's ``identifier``,
    the one pattern of every such name."""
    path = tmp_path / "physical.yaml"
    doc = {"format": "tracecanary.physical/v1", "configs": {name: {"mode": "native", "env": {}}}}
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError) as err:
        load_configs(path)
    assert err.value.field == "configs" and err.value.file == str(path)
    assert repr(name)[:40] in str(err.value) or "too long" in str(err.value)


def test_the_default_configuration_name_is_an_identifier_too(tmp_path):
    path = tmp_path / "physical.yaml"
    doc = {"format": "tracecanary.physical/v1", "default": "../x",
           "configs": {"native": {"mode": "native", "env": {}}}}  # fmt: skip
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError) as err:
        load_configs(path)
    assert err.value.field == "default"


def test_physical_configuration_names_reference_the_config_schemas_identifier():
    """One home for the pattern: the physical schema refers to it, never repeats it."""
    from tracecanary.formats.schemas import load_schema

    physical = load_schema("physical")
    ref = {"$ref": "config.schema.json#/$defs/identifier"}
    assert physical["properties"]["configs"]["propertyNames"] == ref
    assert physical["properties"]["default"]["$ref"] == ref["$ref"]
    assert "pattern" not in json.dumps(physical["properties"])
