# rule dispatch_program: runs tracecanary.campaign.stages.dispatch_program and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
