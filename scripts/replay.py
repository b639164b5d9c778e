from tracecanary.campaign.workflow import cli, run_rule

sm = snakemake  # noqa: F821
argv = ["replay", sm.input.program, "--backends", sm.input.backends, "-o", sm.output.report]
if sm.params.isolated:
    argv.append("--isolated")
run_rule(sm, lambda: cli(argv))
