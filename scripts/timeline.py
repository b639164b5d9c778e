# rule timeline: runs tracecanary.campaign.stages.timeline and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
