# rule replay_dispatch: runs tracecanary.campaign.stages.replay_dispatch and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
