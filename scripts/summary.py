from tracecanary.campaign.summary import write_campaign_summary
from tracecanary.campaign.workflow import run_rule

sm = snakemake  # noqa: F821
run_rule(
    sm,
    lambda: write_campaign_summary(
        sm.output.markdown,
        campaign=sm.wildcards.campaign,
        manifest_path=sm.input.manifest,
        sidecars=list(sm.input.sidecars),
        search_logs=list(sm.input.search_logs),
        canaries=list(sm.input.canaries),
        source_reports=list(sm.input.source_reports),
        baselines=list(sm.input.baselines),
        physical=list(sm.input.physical),
        alphabeta_fits=list(sm.input.alphabeta_fits),
    ),
)
