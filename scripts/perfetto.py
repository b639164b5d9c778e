# rule perfetto: runs tracecanary.campaign.stages.perfetto and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
