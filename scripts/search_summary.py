from tracecanary.campaign.summary import write_search_summary
from tracecanary.campaign.workflow import run_rule

sm = snakemake  # noqa: F821
run_rule(
    sm,
    lambda: write_search_summary(
        sm.output.markdown,
        sm.input.logs,
        sm.input.verifications,
        sm.input.baselines,
        sm.input.sidecars,
    ),
)
