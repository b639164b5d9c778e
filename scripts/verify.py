from tracecanary.campaign.workflow import cli, run_rule

sm = snakemake  # noqa: F821
argv = [
    "verify-behavior",
    sm.input.table,
    sm.input.canary,
    "--backends",
    sm.input.backends,
    "--tolerances",
    sm.input.tolerances,
    "-o",
    sm.output.verification,
]
run_rule(sm, lambda: cli(argv, ok_codes=(0, 1)))  # a rejected canary is a recorded result
