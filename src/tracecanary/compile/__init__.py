"""The compiler with receipts: source serialization and commitments, structure and
timing encodings, the canary document, reduced execution, and expansion (commitment
verification lives in ``tracecanary.verify.commitments``). See docs/formats-canary.md.

The names below are resolved on first use (PEP 562), so importing one submodule (say
``compile.budget`` for the CLI's option parsing) does not load the whole compiler."""

from __future__ import annotations

import importlib

_EXPORTS = {
    "CANARY_FORMAT": "tracecanary.formats.ids",
    "Budget": "tracecanary.compile.budget",
    "parse_budget": "tracecanary.compile.budget",
    "parse_duration_ns": "tracecanary.compile.budget",
    "compile_program": "tracecanary.compile.canary",
    "executed_selection": "tracecanary.compile.reductions",
    "reduce_execution": "tracecanary.compile.execution",
    "expand_canary": "tracecanary.compile.expand",
    "segment_commitment": "tracecanary.compile.source",
    "serialize_source": "tracecanary.compile.source",
    "source_digest": "tracecanary.compile.source",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
