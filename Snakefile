# TraceCanary campaign workflow: each stage is one rules file; logic lives in src/tracecanary.
from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config/config.yaml"


validate(config, "schemas/config.schema.json")


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/capture.smk"
include: "workflow/rules/ingest.smk"
include: "workflow/rules/merge.smk"
include: "workflow/rules/compile.smk"
include: "workflow/rules/verify.smk"
include: "workflow/rules/replay.smk"
include: "workflow/rules/physical.smk"
include: "workflow/rules/alphabeta.smk"
include: "workflow/rules/manifest.smk"
include: "workflow/rules/summary.smk"


rule all:
    default_target: True
    input:
        manifest=f"results/{CAMPAIGN}/manifest.json",
        summary=f"results/{CAMPAIGN}/summary.md",
