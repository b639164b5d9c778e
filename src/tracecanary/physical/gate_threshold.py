"""The physical gate's default runtime threshold, in a module of its own so a command's
options can show it without loading the report's numpy and Arrow."""

DEFAULT_MAX_RUNTIME_RATIO = 0.5
"""The gate fails where the canary's pass takes more than this share of the full program's
(the campaign's ``physical.max_runtime_ratio`` default, in the config schema, is the same)."""
