# rule physical_gate: runs tracecanary.campaign.stages.physical_gate and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
