from pathlib import Path

from tracecanary.merge import merge_captures
from tracecanary.campaign.workflow import run_rule

sm = snakemake  # noqa: F821
captures = sm.input.captures
if isinstance(captures, str) and Path(captures).is_dir():  # a live capture's imported ranks
    captures = sorted(str(p) for p in Path(captures).glob("rank*.json"))
run_rule(
    sm,
    lambda: merge_captures(
        list(captures) if not isinstance(captures, str) else [captures],
        sm.output.merged,
        sm.input.calibration,
    ),
)
