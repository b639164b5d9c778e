# rule capture_set_header: runs tracecanary.campaign.stages.capture_set_header and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
