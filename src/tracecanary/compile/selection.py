"""The values of a reduced-execution policy's ``steady_selection``: which k steady
repetitions of a reduced instance execute (the rule is in ``compile.execution``,
"Selection"). Plain names, no imports: the CLI reads them to build its option."""

TIME_SELECTION = "time"
"""k evenly spaced steady repetitions in repetition order (the default)."""
SKEW_QUANTILE_SELECTION = "skew_quantile"
"""The steady repetitions at the (i + 0.5) / k quantiles of their arrival skew."""
STEADY_SELECTIONS = (TIME_SELECTION, SKEW_QUANTILE_SELECTION)
DEFAULT_STEADY_SELECTION = TIME_SELECTION
"""Never written into a normalized policy: a policy without the key means it."""
