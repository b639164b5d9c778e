from tracecanary.ingest import ingest_files
from tracecanary.campaign.workflow import run_rule

run_rule(snakemake, lambda: ingest_files([snakemake.input.trace], snakemake.output.table))  # noqa: F821
