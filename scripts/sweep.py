# rule sweep: runs tracecanary.campaign.stages.sweep and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
