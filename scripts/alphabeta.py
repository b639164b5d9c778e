from tracecanary.campaign.workflow import cli, run_rule

sm = snakemake  # noqa: F821
argv = [
    "alphabeta",
    sm.input.ladder,
    "-o",
    sm.output.fit,
    "--markdown",
    sm.output.markdown,
    "--plot-dir",
    sm.output.plots,
]
if sm.params.world_size:
    argv += ["--world-size", sm.params.world_size]
run_rule(sm, lambda: cli(argv))
