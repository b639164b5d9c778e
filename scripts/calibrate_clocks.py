# rule calibrate_clocks: runs tracecanary.campaign.stages.calibrate_clocks and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
