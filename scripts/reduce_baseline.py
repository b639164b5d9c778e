# rule reduce_baseline: runs tracecanary.campaign.stages.reduce_baseline and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
