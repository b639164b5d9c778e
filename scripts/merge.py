from tracecanary.merge import merge_captures
from tracecanary.workflow import run_rule

run_rule(
    snakemake,  # noqa: F821
    lambda: merge_captures(
        list(snakemake.input.captures),  # noqa: F821
        snakemake.output.merged,  # noqa: F821
        snakemake.input.calibration,  # noqa: F821
    ),
)
