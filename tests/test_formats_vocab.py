"""One home per fact: format ids, the op/dtype vocabulary and the schemas agree, and no
module outside ``tracecanary.formats`` writes a format id or the op list again."""

from __future__ import annotations

import ast
import json
import re
from importlib import resources
from pathlib import Path

import pytest

from tracecanary.formats import ids, vocab
from tracecanary.formats.schemas import load_schema, schema_names

SRC = Path(__file__).resolve().parents[1] / "src" / "tracecanary"
FORMAT_ID = re.compile(r"^tracecanary\.[a-z][a-z.-]*/v[0-9]+$")


def _format_ids() -> dict[str, str]:
    return {
        name: value
        for name, value in vars(ids).items()
        if name.endswith("_FORMAT") and isinstance(value, str)
    }


def _python_sources() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def test_every_format_id_constant_is_a_well_formed_id():
    found = _format_ids()
    assert len(found) >= 20
    for name, value in found.items():
        assert FORMAT_ID.match(value), (name, value)


def test_each_format_schema_is_shipped_and_says_its_format_id():
    shipped = set(schema_names())
    for format_id, schema in ids.FORMAT_SCHEMAS.items():
        assert schema in shipped, f"{format_id}: no schemas/{schema}.schema.json"
        doc = load_schema(schema)
        assert doc["title"] == format_id
        assert doc["properties"]["format"] == {"const": format_id}


def test_every_shipped_schema_with_a_format_field_is_registered_under_its_id():
    registered = set(ids.FORMAT_SCHEMAS.values())
    for name in schema_names():
        fmt = load_schema(name).get("properties", {}).get("format")
        if fmt is not None:
            assert name in registered, f"schemas/{name}.schema.json is not in FORMAT_SCHEMAS"


def test_schemas_are_read_from_the_package_not_the_checkout():
    folder = resources.files("tracecanary.formats") / "schemas"
    assert (folder / "trace.schema.json").is_file()
    assert set(schema_names()) >= {"trace", "canary", "verification", "search-log", "ingest-meta"}


def test_no_module_outside_formats_ids_spells_a_format_id():
    """A format id is a string constant in formats/ids.py only; every other module
    imports it (docstrings and help texts may mention it inside longer text)."""
    known = set(_format_ids().values())
    offenders = []
    for path in _python_sources():
        if path == SRC / "formats" / "ids.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            value = getattr(node, "value", None) if isinstance(node, ast.Constant) else None
            if isinstance(value, bytes):  # a byte marker spells the id inside quotes
                value = next((k for k in known if f'"{k}"'.encode() in value), None)
            if value in known:
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno} {value}")
    assert offenders == []


def test_no_module_outside_formats_vocab_lists_the_ops_again():
    """A literal collection of all plain op names, or all but one, is the op list written
    again (smaller subsets, like the ops that rendezvous, are facts of their own)."""
    plain = set(vocab.OPS)
    offenders = []
    for path in _python_sources():
        if path == SRC / "formats" / "vocab.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Tuple | ast.List | ast.Set):
                names = [e.value for e in node.elts if isinstance(e, ast.Constant)]
                if len(set(names)) >= len(plain) - 1 and set(names) <= plain:
                    offenders.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert offenders == []


def test_trace_schema_op_pattern_is_the_vocabulary_pattern():
    event = load_schema("trace")["$defs"]["event"]
    assert event["properties"]["op"]["pattern"] == vocab.OP_PATTERN


@pytest.mark.parametrize(
    ("op", "valid"),
    [
        *[(op, True) for op in vocab.OPS],
        ("custom:nccl_AllGatherV", True),
        ("gather", False),
        ("custom:", False),
        ("All_Reduce", False),
    ],
)
def test_op_pattern_accepts_plain_and_custom_ops_only(op, valid):
    assert bool(vocab.OP_RE.match(op)) is valid


def test_rooted_and_point_to_point_ops_are_plain_ops():
    assert set(vocab.ROOTED_OPS) <= set(vocab.OPS)
    assert set(vocab.P2P_OPS) <= set(vocab.OPS)


def test_kineto_vocabularies_land_on_the_canonical_names():
    from tracecanary.kineto import vocab as kineto

    assert set(kineto._OP_KEYS.values()) <= set(vocab.OPS)  # noqa: SLF001
    assert set(kineto._KERNEL_OPS.values()) <= set(vocab.OPS)  # noqa: SLF001
    for table in (kineto._SCALAR_TYPE, kineto._CPP_TYPE, kineto._KERNEL_TYPE):  # noqa: SLF001
        assert {v for v in table.values() if v is not None} <= set(vocab.DTYPES)


def test_param_export_covers_every_plain_op_but_recv():
    from tracecanary.param.export import PARAM_OPS

    assert set(vocab.OPS) - set(PARAM_OPS) == {"recv"}


def test_ladder_collectives_are_the_sweep_and_fit_vocabulary():
    from tracecanary.alphabeta import ladder
    from tracecanary.physical import sweep

    assert ladder.COLLECTIVES is vocab.LADDER_COLLECTIVES
    assert sweep.COLLECTIVES is vocab.LADDER_COLLECTIVES


def test_dtype_sizes_are_powers_of_two_bytes():
    assert all(size in (1, 2, 4, 8) for size in vocab.DTYPE_BYTES.values())
    assert vocab.DTYPES == tuple(vocab.DTYPE_BYTES)


def test_schema_cross_references_resolve(tmp_path):
    """ingest-meta and search-log refer to definitions in other schemas."""
    from tracecanary.errors import SchemaError
    from tracecanary.formats.schemas import validate

    bad = {"status": "known"}  # uncertainty_ns missing: trace.schema.json#/$defs/skew_status
    sidecar = {
        "format": ids.NORMALIZED_FORMAT,
        "meta": {"world_size": 1, "source": "t"},
        "groups": {"world": [0]},
        "clocks": {"0": "rank0"},
        "skew": bad,
        "timing_semantics": "gaps",
        "events": 0,
        "ranks_seen": [],
        "sources": [{"path": "t.json", "sha256": "0" * 64}],
        "table_sha256": "0" * 64,
    }
    with pytest.raises(SchemaError, match="skew"):
        validate(sidecar, "ingest-meta", file="t.meta.json")
    sidecar["skew"] = {"status": "unknown", "reason": "no calibration"}
    validate(json.loads(json.dumps(sidecar)), "ingest-meta", file="t.meta.json")
