"""Reading the replay reports the rollout gate compares."""

from __future__ import annotations

from tracecanary.errors import InputError
from tracecanary.formats.ids import REPORT_FORMAT
from tracecanary.formats.schemas import validate
from tracecanary.formats.skeleton import skeleton
from tracecanary.limits import load_json


def load_report(path: str) -> dict:
    """A ``tracecanary.report/v1`` document parsed under the resource policy and
    validated against schemas/report.schema.json (long sample lists by representatives,
    as canaries). Refuses (InputError/SchemaError naming ``path`` and the field, exit 2)
    anything else."""
    doc = load_json(path)
    if not isinstance(doc, dict) or doc.get("format") != REPORT_FORMAT:
        raise InputError(f"not a {REPORT_FORMAT} document", file=path, field="format")
    validate(skeleton(doc), "report", file=path)
    return doc
