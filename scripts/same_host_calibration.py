# rule same_host_calibration: runs tracecanary.campaign.stages.same_host_calibration and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
