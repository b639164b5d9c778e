# rule stage_external: runs tracecanary.campaign.stages.stage_external and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
