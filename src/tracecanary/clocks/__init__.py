"""Clocks: how captured timestamps relate across ranks.

- ``status``: the skew decision (known with its uncertainty, or unknown with the reason),
  made once per trace and carried as a declared field (trace ``meta.skew``, the ingest
  sidecar's ``skew``, ``Program.skew_status``).
- ``calibration``: reading a ``tracecanary.calibration/v1`` document into a per-rank
  mapping onto one reference clock.
- ``constraints`` / ``derive``: a calibration derived from the trace itself (happens-before
  bounds of matched collectives and send/recv), used by ``tracecanary calibrate-clocks``.
"""

DRIFT_MODES = ("auto", "none", "fit")
"""``calibrate-clocks --drift``: fit linear drift per clock when the capture spans at
least ``DRIFT_MIN_SPAN_NS`` (auto), never (none), or always (fit)."""
DRIFT_MIN_SPAN_NS = 10_000_000_000
