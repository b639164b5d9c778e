# TraceCanary campaign workflow: each stage is one rules file; logic lives in src/tracecanary.
from snakemake.utils import min_version, validate

min_version("9.0")

from tracecanary.campaign.config_check import (
    check_rule_outputs,
    check_store_inside,
    refuse_evaluating_configs,
)
from tracecanary.campaign.physical_gate import report_failed_gates
from tracecanary.campaign.physical_sources import refuse_renamed_physical_keys
from tracecanary.campaign.report_graph import label_report_rule_graph

# a report's rule graph names each node's sources ("ingest · decode, train")
label_report_rule_graph()

# configs are data: refuse yte evaluation (__use_yte__) on the raw YAML before Snakemake
# reads it (a --configfile is read before this line runs: `tracecanary manifest regenerate`
# checks it first; docs/integrity.md)
refuse_evaluating_configs(["config/config.yaml", *workflow.overwrite_configfiles])


configfile: "config/config.yaml"


refuse_renamed_physical_keys(config, file=" + ".join(map(str, workflow.configfiles)) or "config")
validate(config, "schemas/config.schema.json")
check_store_inside(config, file="config")


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/capture.smk"
include: "workflow/rules/kineto.smk"
include: "workflow/rules/flight_recorder.smk"
include: "workflow/rules/calibrate.smk"
include: "workflow/rules/ingest.smk"
include: "workflow/rules/merge.smk"
include: "workflow/rules/compile.smk"
include: "workflow/rules/verify.smk"
include: "workflow/rules/baselines.smk"
include: "workflow/rules/controls.smk"
include: "workflow/rules/replay.smk"
include: "workflow/rules/param_upstream.smk"
include: "workflow/rules/physical.smk"
include: "workflow/rules/alphabeta.smk"
include: "workflow/rules/manifest.smk"
include: "workflow/rules/timeline.smk"
include: "workflow/rules/summary.smk"


check_rule_outputs(workflow.rules, CAMPAIGN, file="Snakefile")


rule all:
    default_target: True
    input:
        manifest=f"results/{CAMPAIGN}/manifest.json",
        summary=f"results/{CAMPAIGN}/summary.md",
        # each physical source's gate runs after the summary (which shows its verdict) and
        # writes it; a failed one fails the run (below)
        physical_gates=physical_gates(),


# a failed physical gate is a verdict, not a crashed job: once every job has run, each failed
# gate is one `error:` line and the run exits 1 (tracecanary/campaign/physical_gate.py)
onsuccess:
    if exit_code := report_failed_gates(physical_gates()):
        raise SystemExit(exit_code)


onerror:
    report_failed_gates(physical_gates())  # Snakemake itself exits non-zero
