# rule import_kineto_block: runs tracecanary.campaign.stages.import_kineto_block and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
