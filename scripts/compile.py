from tracecanary.campaign.workflow import cli, run_rule

sm = snakemake  # noqa: F821
mode = (
    ["--lossless"]
    if sm.wildcards.budget == "lossless"
    else [
        "--budget",
        ",".join(f"{f}={sm.wildcards.budget}" for f in ("skew", "overlap", "gap", "latency")),
    ]
)
run_rule(sm, lambda: cli(["compile", sm.input.table, *mode, "-o", sm.output.canary]))
