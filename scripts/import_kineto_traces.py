# rule import_kineto_traces: runs tracecanary.campaign.stages.import_kineto_traces and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
