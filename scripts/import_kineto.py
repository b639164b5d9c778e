from pathlib import Path

from tracecanary.campaign.workflow import cli, run_rule

sm = snakemake  # noqa: F821
traces = sorted(str(p) for p in Path(sm.input.capture).glob("rank*.json.gz"))
run_rule(
    sm,
    lambda: cli(["import-kineto", *traces, "--jobs", str(sm.threads), "-o", sm.output.imported]),
)
