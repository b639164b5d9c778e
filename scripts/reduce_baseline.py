from tracecanary.campaign.workflow import cli, run_rule

sm = snakemake  # noqa: F821


def work():
    cli(["reduce", sm.input.table, "--backends", sm.input.backends, "-o", sm.output.reduced])
    cli(["compile", sm.output.reduced, "--lossless", "-o", sm.output.canary])
    # the verification is expected to reject it (exit 1): that rejection is the result
    cli(
        [
            "verify-behavior",
            sm.input.table,
            sm.output.canary,
            "--backends",
            sm.input.backends,
            "--tolerances",
            sm.input.tolerances,
            "-o",
            sm.output.verification,
        ],
        ok_codes=(0, 1),
    )


run_rule(sm, work)
