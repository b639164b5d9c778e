from tracecanary.campaign.workflow import cli, run_rule

sm = snakemake  # noqa: F821
argv = [
    "search",
    sm.input.table,
    "--budgets",
    sm.params.budgets,
    "--backends",
    sm.input.backends,
    "--tolerances",
    sm.input.tolerances,
    "-o",
    sm.output.canary,
    "--log",
    sm.output.log,
    "--verification",
    sm.output.verification,
]
run_rule(sm, lambda: cli(argv))
