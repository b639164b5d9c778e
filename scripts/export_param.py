from tracecanary.campaign.workflow import cli, run_rule

sm = snakemake  # noqa: F821
run_rule(
    sm,
    lambda: cli(
        [
            "export-param",
            sm.input.program,
            "--execution",
            sm.params.execution,
            "-o",
            sm.output.param,
        ]
    ),
)
