# rule capture_command: runs tracecanary.campaign.stages.capture_command and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
