# rule replay_physical: runs tracecanary.campaign.stages.replay_physical and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
