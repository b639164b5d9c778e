# rule physical_report: runs tracecanary.campaign.stages.physical_report and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
