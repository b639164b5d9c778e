"""Physical configurations: config/physical.yaml against its schema, and refusals."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
import yaml

from tracecanary.errors import InputError
from tracecanary.formats.schemas import load_schema
from tracecanary.physical.config import load_configs, resolve_config

SHIPPED = Path(__file__).resolve().parents[1] / "config" / "physical.yaml"


def test_shipped_configs_validate_and_offer_distinct_cpu_strategies():
    doc = yaml.safe_load(SHIPPED.read_text())
    jsonschema.validate(doc, load_schema("physical"))
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
