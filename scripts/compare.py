from tracecanary.campaign.workflow import cli, run_rule

sm = snakemake  # noqa: F821
argv = [
    "compare",
    sm.input.report,
    sm.input.report,
    "--config",
    f"{sm.params.baseline}:{sm.params.candidate}",
    "--threshold",
    sm.params.thresholds,
    "-o",
    sm.output.verdict,
    "--markdown",
    sm.output.markdown,
]
run_rule(sm, lambda: cli(argv, ok_codes=(0, 1)))  # a tripped gate is the verdict, recorded
