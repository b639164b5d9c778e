# rule merge: runs tracecanary.campaign.stages.merge and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
