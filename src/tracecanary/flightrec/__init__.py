"""PyTorch Flight Recorder dumps (JSON or pickle, one per rank) as native traces.

``import_dumps(paths)`` reads a run's per-rank dumps and returns one
``tracecanary.trace/v1`` document per rank for ``tracecanary merge``; see
``tracecanary.flightrec.importer`` for its guarantees, ``tracecanary.flightrec.plain_pickle``
for how a pickle is read without executing anything, and ``docs/flight-recorder.md``.
"""
