# rule export_param: runs tracecanary.campaign.stages.export_param and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
