# rule manifest: runs tracecanary.campaign.stages.manifest and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
