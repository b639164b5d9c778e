# rule import_flight_recorder: runs tracecanary.campaign.stages.import_flight_recorder and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
