# Shared helpers: campaign lookups, input functions, wildcard constraints.
import glob
from pathlib import Path

CAMPAIGN = config["campaign"]
SOURCES = {s["id"]: s for s in config["sources"]}
ENV = "../../environment.yml"


wildcard_constraints:
    campaign=CAMPAIGN,
    source="|".join(SOURCES),
    ladder="[A-Za-z0-9_.-]+",


def source_of(wildcards):
    return SOURCES[wildcards.source]


def get_ingest_input(wildcards):
    """The native trace a source's normalized table is made from."""
    src = source_of(wildcards)
    if src["kind"] == "trace":
        return {"trace": src["path"]}
    return {"trace": f"results/{CAMPAIGN}/merge/{wildcards.source}.jsonl.gz"}


def get_merge_input(wildcards):
    src = source_of(wildcards)
    if src["kind"] == "captures":
        return {"captures": src["captures"], "calibration": src["calibration"]}
    raise ValueError(f"source {wildcards.source} has no captures to merge")


ALPHABETA = {
    a["id"]: a
    for a in config.get("alphabeta", {}).get("external", [])
    if not a.get("optional") or Path(a["path"]).exists()
}


def provenance_targets():
    """Every provenance record the campaign produces (the manifest's inputs)."""
    targets = [f"results/{CAMPAIGN}/provenance/alphabeta/{lid}.json" for lid in ALPHABETA]
    for sid, src in SOURCES.items():
        targets.append(f"results/{CAMPAIGN}/provenance/ingest/{sid}.json")
        if src["kind"] == "captures":
            targets.append(f"results/{CAMPAIGN}/provenance/merge/{sid}.json")
    return targets


def config_files():
    """Config files loaded, in load order, each once (relative to the working directory)."""
    paths = [str(Path(p).relative_to(Path.cwd())) if Path(p).is_absolute() else str(p) for p in workflow.configfiles]
    return list(dict.fromkeys(paths))


def get_alphabeta_input(wildcards):
    return {"ladder": ALPHABETA[wildcards.ladder]["path"]}
