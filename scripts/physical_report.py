from tracecanary.physical_report import write_physical
from tracecanary.workflow import run_rule

sm = snakemake  # noqa: F821
run_rule(
    sm,
    lambda: write_physical(
        sm.output.report, sm.output.markdown, list(sm.input.attempts), sm.params.source
    ),
)
