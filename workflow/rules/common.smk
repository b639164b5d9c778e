# Shared helpers: campaign lookups, input functions, wildcard constraints.
import glob
from pathlib import Path

CAMPAIGN = config["campaign"]
SOURCES = {s["id"]: s for s in config["sources"]}
ENV = "../../environment.yml"


BUDGETS = ["lossless"] + list(config["compile"]["budgets"])
REDUCED = [s for s in config["reduce"]["sources"] if s in SOURCES]


wildcard_constraints:
    campaign=CAMPAIGN,
    budget="|".join(BUDGETS),
    which="source|canary",
    source="|".join(SOURCES),
    ladder="[A-Za-z0-9_.-]+",
    program="canary|full",
    rep="[0-9]+",


def source_of(wildcards):
    return SOURCES[wildcards.source]


def get_ingest_input(wildcards):
    """The native trace a source's normalized table is made from."""
    src = source_of(wildcards)
    if src["kind"] == "trace":
        return {"trace": src["path"]}
    return {"trace": f"results/{CAMPAIGN}/merge/{wildcards.source}.jsonl.gz"}  # captures, live_capture


def get_merge_input(wildcards):
    src = source_of(wildcards)
    if src["kind"] == "captures":
        return {"captures": src["captures"], "calibration": src["calibration"]}
    if src["kind"] == "live_capture":
        return {"captures": f"results/{CAMPAIGN}/import/{wildcards.source}", "calibration": src["calibration"]}
    raise ValueError(f"source {wildcards.source} has no captures to merge")


# external ladders (nccl-tests logs) are staged into the campaign as recorded evidence
EXTERNAL = {
    a["id"]: a
    for a in config.get("alphabeta", {}).get("external", [])
    if not a.get("optional") or Path(a["path"]).exists()
}
ALPHABETA = {
    lid: {**a, "path": f"results/{CAMPAIGN}/external/{lid}.txt"} for lid, a in EXTERNAL.items()
}


def provenance_targets():
    """Every provenance record the campaign produces (the manifest's inputs)."""
    targets = [f"results/{CAMPAIGN}/provenance/alphabeta/{lid}.json" for lid in ALPHABETA]
    targets += [f"results/{CAMPAIGN}/provenance/stage_external/{lid}.json" for lid in EXTERNAL]
    for sid, src in SOURCES.items():
        targets.append(f"results/{CAMPAIGN}/provenance/ingest/{sid}.json")
        targets += [f"results/{CAMPAIGN}/provenance/compile/{sid}/{b}.json" for b in BUDGETS]
        targets += [f"results/{CAMPAIGN}/provenance/verify/{sid}/{b}.json" for b in BUDGETS]
        targets.append(f"results/{CAMPAIGN}/provenance/search/{sid}.json")
        targets += [f"results/{CAMPAIGN}/provenance/replay/{sid}/{w}.json" for w in ("source", "canary")]
        targets.append(f"results/{CAMPAIGN}/provenance/compare/{sid}.json")
        if src["kind"] in ("captures", "live_capture"):
            targets.append(f"results/{CAMPAIGN}/provenance/merge/{sid}.json")
        if src["kind"] == "live_capture":
            targets.append(f"results/{CAMPAIGN}/provenance/capture_kineto/{sid}.json")
            targets.append(f"results/{CAMPAIGN}/provenance/import_kineto/{sid}.json")
    targets += reduce_targets()
    targets += physical_provenance()
    targets += [f"results/{CAMPAIGN}/provenance/sweep/{w}.json" for w in SWEEPS]
    targets.append(f"results/{CAMPAIGN}/provenance/search_summary.json")
    return targets


def source_table(wildcards):
    """The normalized table of a source (what compile, replay and verify read)."""
    return f"results/{CAMPAIGN}/ingest/{wildcards.source}.parquet"


def source_inputs(wildcards):
    return {
        "table": source_table(wildcards),
        "sidecar": f"results/{CAMPAIGN}/ingest/{wildcards.source}.meta.json",
    }


def config_files():
    """Config files loaded, in load order, each once (relative to the working directory)."""
    paths = [str(Path(p).relative_to(Path.cwd())) if Path(p).is_absolute() else str(p) for p in workflow.configfiles]
    return list(dict.fromkeys(paths))


def get_alphabeta_input(wildcards):
    return {"ladder": ALPHABETA[wildcards.ladder]["path"]}


def reduce_targets():
    out = []
    for sid in REDUCED:
        out.append(f"results/{CAMPAIGN}/provenance/reduce_baseline/{sid}.json")
    return out


def search_summary_inputs(wildcards):
    return {
        "logs": [f"results/{CAMPAIGN}/search/{s}/search.json" for s in SOURCES],
        "verifications": [f"results/{CAMPAIGN}/verify/{s}/{b}.json" for s in SOURCES for b in BUDGETS],
        "baselines": [f"results/{CAMPAIGN}/reduce/{s}/verification.json" for s in REDUCED],
        "sidecars": [f"results/{CAMPAIGN}/ingest/{s}.meta.json" for s in SOURCES],
    }


def summary_inputs(wildcards):
    return {
        "manifest": f"results/{CAMPAIGN}/manifest.json",
        "sidecars": [f"results/{CAMPAIGN}/ingest/{s}.meta.json" for s in SOURCES],
        "search_logs": [f"results/{CAMPAIGN}/search/{s}/search.json" for s in SOURCES],
        "canaries": [f"results/{CAMPAIGN}/search/{s}/canary.json" for s in SOURCES],
        "source_reports": [f"results/{CAMPAIGN}/replay/{s}/source.json" for s in SOURCES],
        "baselines": [f"results/{CAMPAIGN}/reduce/{s}/verification.json" for s in REDUCED],
        "physical": physical_summaries(),
        "alphabeta_fits": [f"results/{CAMPAIGN}/alphabeta/{l}/fit.json" for l in ALPHABETA],
    }


PHYSICAL = config.get("physical", {})
PHYSICAL_SOURCE = PHYSICAL.get("source") if PHYSICAL.get("source") in SOURCES else None
SWEEPS = {w["id"]: w for w in PHYSICAL.get("sweeps", [])}
for _sid in SWEEPS:
    ALPHABETA[_sid] = {"id": _sid, "path": f"results/{CAMPAIGN}/sweeps/{_sid}"}


def physical_summaries():
    return [f"results/{CAMPAIGN}/physical.json"] if PHYSICAL_SOURCE else []


def physical_attempts(wildcards):
    reps = range(1, PHYSICAL["repetitions"] + 1)
    return [
        f"results/{CAMPAIGN}/physical/{PHYSICAL_SOURCE}/{program}/{cfg}/rep{r}"
        for cfg in PHYSICAL["configs"]
        for r in reps
        for program in ("canary", "full")
    ]


def physical_provenance():
    if not PHYSICAL_SOURCE:
        return []
    out = [f"results/{CAMPAIGN}/provenance/export_param/{PHYSICAL_SOURCE}/{p}.json" for p in ("canary", "full")]
    out += [
        f"results/{CAMPAIGN}/provenance/replay_physical/{PHYSICAL_SOURCE}/{cfg}/rep{r}.json"
        for cfg in PHYSICAL["configs"]
        for r in range(1, PHYSICAL["repetitions"] + 1)
    ]
    out.append(f"results/{CAMPAIGN}/provenance/physical_report.json")
    return out


def get_export_input(wildcards):
    if wildcards.program == "canary":
        return {"program": f"results/{CAMPAIGN}/search/{wildcards.source}/canary.json"}
    return source_inputs(wildcards) | {"program": source_table(wildcards)}


def get_replay_input(wildcards):
    if wildcards.which == "canary":
        return {"program": f"results/{CAMPAIGN}/search/{wildcards.source}/canary.json"}
    return source_inputs(wildcards) | {"program": source_table(wildcards)}
