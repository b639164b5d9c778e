"""PyTorch profiler (Kineto) traces as native traces: import and live capture support.

``import_kineto_file(path, rank=None)`` reads one rank's trace (``.json``/``.json.gz``)
and returns a ``tracecanary.trace/v1`` document. The import is observational and
single-rank; see ``tracecanary.kineto.importer`` for its guarantees and
``docs/kineto.md`` for where each field comes from.
"""

from tracecanary.kineto.importer import convert, import_kineto_file

__all__ = ["convert", "import_kineto_file"]
