# rule calibrate_backends: runs tracecanary.campaign.stages.calibrate_backends and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
