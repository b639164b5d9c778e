# rule import_kineto: runs tracecanary.campaign.stages.import_kineto and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
