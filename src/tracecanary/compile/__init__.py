"""The compiler with receipts: source serialization and commitments, structure and
timing encodings, the canary document, reduced execution, and expansion (commitment
verification lives in ``tracecanary.verify.commitments``). See docs/formats-canary.md."""

from tracecanary.compile.budget import Budget, parse_budget, parse_duration_ns
from tracecanary.compile.canary import CANARY_FORMAT, compile_program
from tracecanary.compile.execution import executed_selection, reduce_execution
from tracecanary.compile.expand import expand_canary
from tracecanary.compile.source import segment_commitment, serialize_source, source_digest

__all__ = [
    "CANARY_FORMAT",
    "Budget",
    "compile_program",
    "executed_selection",
    "expand_canary",
    "parse_budget",
    "parse_duration_ns",
    "reduce_execution",
    "segment_commitment",
    "serialize_source",
    "source_digest",
]
