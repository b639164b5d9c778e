from tracecanary.physical.report import write_physical
from tracecanary.campaign.workflow import run_rule

sm = snakemake  # noqa: F821
run_rule(
    sm,
    lambda: write_physical(
        sm.output.report, sm.output.markdown, list(sm.input.attempts), sm.params.source
    ),
)
