# rule ingest_capture_block: runs tracecanary.campaign.stages.ingest_capture_block and records its provenance
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake)  # noqa: F821
