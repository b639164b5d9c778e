"""Every file format id TraceCanary reads or writes, written once.

Each id is the value of a document's ``"format"`` field (or, for the line formats, of
its header line). A format with a JSON Schema names it in ``FORMAT_SCHEMAS``; the schema's
``title`` (and its ``format`` const, where it has one) equals the id, which a test checks.
This module imports nothing, so every layer may import it.
"""

from __future__ import annotations

# traces and the tables derived from them
TRACE_FORMAT = "tracecanary.trace/v1"
NORMALIZED_FORMAT = "tracecanary.normalized/v1"
INGEST_META_FORMAT = NORMALIZED_FORMAT  # the ingest sidecar (.meta.json) carries this id
CALIBRATION_FORMAT = "tracecanary.calibration/v1"
CAPTURE_FORMAT = "tracecanary.capture/v1"
RECORDED_RUN_FORMAT = "tracecanary.recorded-run/v1"  # capture -- CMD: DIR/capture.json
GROUPS_FORMAT = "tracecanary.groups/v1"
RANK_BLOCK_FORMAT = "tracecanary.rank-block/v1"  # a block of rank files (rank_blocks)

# the compiler and its receipts
CANARY_FORMAT = "tracecanary.canary/v1"
SOURCE_FORMAT = "tracecanary.source/v1"
SEGMENT_FORMAT = "tracecanary.segment/v1"

# verification, search and the rollout gate
VERIFICATION_FORMAT = "tracecanary.verification/v1"
SEARCH_LOG_FORMAT = "tracecanary.search-log/v1"
REPORT_FORMAT = "tracecanary.report/v1"
VERDICT_FORMAT = "tracecanary.verdict/v1"
BASELINES_FORMAT = "tracecanary.baselines/v1"
CONTROLS_FORMAT = "tracecanary.controls/v1"  # simulator controls: ablations and noise
DIAGNOSTICS_FORMAT = "tracecanary.diagnostics/v1"  # --diagnostics-json

# configuration files
BACKENDS_FORMAT = "tracecanary.backends/v1"
PHYSICAL_CONFIG_FORMAT = "tracecanary.physical/v1"

# PARAM export, physical replay, sweeps and fits
PARAM_EXPORT_FORMAT = "tracecanary.param-export/v1"
ATTEMPT_FORMAT = "tracecanary.attempt/v1"
ENVIRONMENT_FORMAT = "tracecanary.environment/v1"
PHYSICAL_REPORT_FORMAT = "tracecanary.physical-report/v1"
CHROME_TRACE_FORMAT = "tracecanary.chrome-trace/v1"  # Perfetto / chrome://tracing export
LADDERS_FORMAT = "tracecanary.ladders/v1"  # derive-ladders: the sweeps an export needs
ALPHABETA_FORMAT = "tracecanary.alphabeta/v1"

# the campaign
MANIFEST_FORMAT = "tracecanary.manifest/v1"

FORMAT_SCHEMAS: dict[str, str] = {
    TRACE_FORMAT: "trace",
    INGEST_META_FORMAT: "ingest-meta",
    CALIBRATION_FORMAT: "calibration",
    CAPTURE_FORMAT: "capture",
    RECORDED_RUN_FORMAT: "recorded-run",
    GROUPS_FORMAT: "groups",
    RANK_BLOCK_FORMAT: "rank-block",
    CANARY_FORMAT: "canary",
    VERIFICATION_FORMAT: "verification",
    SEARCH_LOG_FORMAT: "search-log",
    REPORT_FORMAT: "report",
    VERDICT_FORMAT: "verdict",
    BASELINES_FORMAT: "baselines",
    CONTROLS_FORMAT: "controls",
    DIAGNOSTICS_FORMAT: "diagnostics",
    BACKENDS_FORMAT: "backends",
    PHYSICAL_CONFIG_FORMAT: "physical",
    PARAM_EXPORT_FORMAT: "param-export",
    ATTEMPT_FORMAT: "attempt",
    ENVIRONMENT_FORMAT: "environment",
    PHYSICAL_REPORT_FORMAT: "physical-report",
    CHROME_TRACE_FORMAT: "chrome-trace",
    LADDERS_FORMAT: "ladders",
    ALPHABETA_FORMAT: "alphabeta",
    MANIFEST_FORMAT: "manifest",
}
"""Format id -> schema name (``formats/schemas/<name>.schema.json``)."""
