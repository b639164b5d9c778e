# rule export_param_upstream: runs tracecanary.campaign.stages.export_param_upstream and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
