# rule sweep_derived: runs tracecanary.campaign.stages.sweep_derived and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
