# Shared helpers: campaign lookups, input functions, wildcard constraints.
import glob
from pathlib import Path

from tracecanary.campaign.config_check import second_captures
from tracecanary.campaign.physical_sources import check_physical_configs, physical_sources

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
    if src["kind"] == "command":  # capture -- CMD writes merged.jsonl.gz into its directory
        return {"trace": f"results/{CAMPAIGN}/capture_command/{wildcards.source}"}
    return {"trace": f"results/{CAMPAIGN}/merge/{wildcards.source}.jsonl.gz"}  # captures, live_capture


def captures_calibration(source):
    """A captures source's calibration: its file, or the one calibrate.smk derives."""
    calibration = SOURCES[source]["calibration"]
    if calibration == "derived":
        return f"results/{CAMPAIGN}/calibration/derived/{source}.json"
    return calibration


# the per-rank native traces a kineto or flight_recorder source's import writes
IMPORT_DIRS = {"kineto": "kineto_import", "flight_recorder": "flight_recorder_import"}


def imported_ranks(wildcards):
    """The directory of imported rank<r>.json of a kineto or flight_recorder source."""
    return f"results/{CAMPAIGN}/{IMPORT_DIRS[source_of(wildcards)['kind']]}/{wildcards.source}"


def get_merge_input(wildcards):
    src = source_of(wildcards)
    if src["kind"] == "captures":  # the blocks ingest.smk checked, in the source's order
        blocks = rank_block_dirs(wildcards.source)
        return {"capture_blocks": blocks, "calibration": captures_calibration(wildcards.source)}
    if src["kind"] == "live_capture":
        return {"captures": f"results/{CAMPAIGN}/import/{wildcards.source}", "calibration": src["calibration"]}
    if src["kind"] in IMPORT_DIRS:  # see kineto.smk, flight_recorder.smk
        calibration = src.get("calibration") or f"results/{CAMPAIGN}/calibration/{wildcards.source}.json"
        return {"captures": imported_ranks(wildcards), "calibration": calibration}
    raise ValueError(f"source {wildcards.source} has no captures to merge")


# per-rank work as Snakemake jobs (docs/cluster.md): a captures or kineto source's rank files
# in blocks of scatter.rank_files_per_job (or the source's own), one job per block
RANK_BLOCK_DIRS = {"captures": "capture_blocks", "kineto": "kineto_blocks"}


def rank_file_blocks(source):
    """The source's rank files (captures / traces) in the blocks its scattered jobs take."""
    from tracecanary.rank_blocks import partition

    src = SOURCES[source]
    files = src["captures"] if src["kind"] == "captures" else src["traces"]
    per_job = src.get("rank_files_per_job") or config["scatter"]["rank_files_per_job"]
    return partition(list(files), per_job)


def rank_block_dirs(source):
    """The directories the source's block jobs write, block 0 first."""
    kind_dir = RANK_BLOCK_DIRS[SOURCES[source]["kind"]]
    blocks = range(len(rank_file_blocks(source)))
    return [f"results/{CAMPAIGN}/{kind_dir}/{source}/block{b}" for b in blocks]


def rank_block_files(wildcards):
    return rank_file_blocks(wildcards.source)[int(wildcards.block)]


def rank_block_first_index(wildcards):
    """Position of the block's first rank file in the source's list."""
    return sum(len(b) for b in rank_file_blocks(wildcards.source)[: int(wildcards.block)])


# external ladders (nccl-tests logs) are staged into the campaign as recorded evidence
EXTERNAL = {
    a["id"]: a for a in config["alphabeta"]["external"] if not a["optional"] or Path(a["path"]).exists()
}
ALPHABETA = {
    lid: {**a, "path": f"results/{CAMPAIGN}/external/{lid}.txt"} for lid, a in EXTERNAL.items()
}


# captures sources whose clocks are derived from their own happens-before order (calibrate.smk)
DERIVED_CALIBRATION = [
    sid for sid, src in SOURCES.items() if src["kind"] == "captures" and src["calibration"] == "derived"
]


def provenance_of(rule, **wildcards):
    """The provenance records of ``rule`` for every combination of ``wildcards`` (read from
    the rule's own ``prov`` output, so a path is written once, in its rule)."""
    return expand(getattr(rules, rule).output.prov, campaign=CAMPAIGN, **wildcards)


def sources_of_kind(*kinds):
    return [sid for sid, src in SOURCES.items() if src["kind"] in kinds]


def provenance_targets(wildcards):
    """Every provenance record the campaign produces (the manifest's inputs). An input
    function, so it runs after every rules file is read."""
    targets = provenance_of("ingest", source=SOURCES)
    targets += provenance_of("compile", source=SOURCES, budget=BUDGETS)
    targets += provenance_of("verify", source=SOURCES, budget=BUDGETS)
    targets += provenance_of("search", source=SOURCES)
    targets += provenance_of("baselines", source=SOURCES)
    targets += provenance_of("controls", source=SOURCES)
    targets += provenance_of("replay", source=SOURCES, which=["source", "canary"])
    targets += provenance_of("compare", source=SOURCES)
    targets += provenance_of("timeline", source=SOURCES)
    targets += provenance_of("perfetto", source=SOURCES)
    targets += provenance_of("merge", source=sources_of_kind("captures", "live_capture", *IMPORT_DIRS))
    targets += provenance_of("import_kineto_traces", source=sources_of_kind("kineto"))
    targets += provenance_of("import_flight_recorder", source=sources_of_kind("flight_recorder"))
    targets += provenance_of("capture_set_header", source=sources_of_kind("captures"))
    for sid in sources_of_kind("captures", "kineto"):
        block_rule = "ingest_capture_block" if SOURCES[sid]["kind"] == "captures" else "import_kineto_block"
        targets += provenance_of(block_rule, source=sid, block=range(len(rank_file_blocks(sid))))
    targets += provenance_of("same_host_calibration", source=[s for s in sources_of_kind(*IMPORT_DIRS) if SOURCES[s].get("same_host")])
    targets += provenance_of("calibrate_clocks", source=DERIVED_CALIBRATION)
    targets += provenance_of("capture_kineto", source=sources_of_kind("live_capture"))
    targets += provenance_of("capture_command", source=sources_of_kind("command"))
    targets += provenance_of("import_kineto", source=sources_of_kind("live_capture"))
    targets += provenance_of("reduce_baseline", source=REDUCED)
    targets += provenance_of("stage_external", ladder=EXTERNAL)
    targets += provenance_of("alphabeta", ladder=ALPHABETA)
    targets += provenance_of("sweep", ladder=SWEEPS)
    for sid, phys in PHYSICAL_SOURCES.items():  # workflow/rules/physical.smk, per source
        targets += provenance_of("export_param", source=sid, program=["canary", "full"])
        targets += provenance_of(
            "replay_physical",
            source=sid,
            config=phys.configs,
            rep=range(1, phys.repetitions + 1),
        )
        targets += provenance_of("physical_report", source=sid)
        if DERIVED_SWEEPS:
            targets += provenance_of("sweep_derived", source=sid)
        if CALIBRATED:
            targets += provenance_of("calibrate_backends", source=sid)
            targets += provenance_of("dispatch_program", source=sid, config=phys.configs)
            targets += provenance_of("replay_dispatch", source=sid, config=phys.configs)
        if PARAM_UPSTREAM_ON:  # workflow/rules/param_upstream.smk
            targets += provenance_of("export_param_upstream", source=sid, program=["canary", "full"])
            reps = range(1, PARAM_UPSTREAM["repetitions"] + 1)
            targets += provenance_of("replay_param", source=sid, rep=reps)
    targets += provenance_of("search_summary")
    return targets


def source_table(wildcards):
    """The normalized table of a source (what compile, replay and verify read)."""
    return f"results/{CAMPAIGN}/ingest/{wildcards.source}.parquet"


def source_inputs(wildcards):
    return {
        "table": source_table(wildcards),
        "sidecar": f"results/{CAMPAIGN}/ingest/{wildcards.source}.meta.json",
    }


# source -> the source that is a second capture of its program (verify and search)
SECOND_CAPTURES = second_captures(config, file=" + ".join(map(str, workflow.configfiles)) or "config")


def second_capture_inputs(wildcards):
    """The normalized table of the source's second capture, where it names one."""
    other = SECOND_CAPTURES.get(wildcards.source)
    return {} if other is None else {"second_capture": f"results/{CAMPAIGN}/ingest/{other}.parquet"}


def config_files():
    """Config files loaded, in load order, each once (relative to the working directory)."""
    paths = [str(Path(p).relative_to(Path.cwd())) if Path(p).is_absolute() else str(p) for p in workflow.configfiles]
    return list(dict.fromkeys(paths))


def alphabeta_plot_labels(wildcards):
    """Report labels of one alpha/beta plot (``<ladder id>.<kind>``): what it shows."""
    ladder, _, kind = wildcards.name.rpartition(".")
    return {"plot": kind.replace("_", " "), "ladder": ladder}


def get_alphabeta_input(wildcards):
    return {"ladder": ALPHABETA[wildcards.ladder]["path"]}


def search_summary_inputs(wildcards):
    return {
        "logs": [f"results/{CAMPAIGN}/search/{s}/search.json" for s in SOURCES],
        "verifications": [f"results/{CAMPAIGN}/verify/{s}/{b}.json" for s in SOURCES for b in BUDGETS],
        "baselines": [f"results/{CAMPAIGN}/reduce/{s}/verification.json" for s in REDUCED],
        "sidecars": [f"results/{CAMPAIGN}/ingest/{s}.meta.json" for s in SOURCES],
        "canaries": [f"results/{CAMPAIGN}/search/{s}/canary.json" for s in SOURCES],
        "sampling_baselines": [f"results/{CAMPAIGN}/baselines/{s}.json" for s in SOURCES],
    }


def summary_inputs(wildcards):
    return {
        "manifest": f"results/{CAMPAIGN}/manifest.json",
        "sidecars": [f"results/{CAMPAIGN}/ingest/{s}.meta.json" for s in SOURCES],
        "search_logs": [f"results/{CAMPAIGN}/search/{s}/search.json" for s in SOURCES],
        "canaries": [f"results/{CAMPAIGN}/search/{s}/canary.json" for s in SOURCES],
        "verifications": [f"results/{CAMPAIGN}/search/{s}/verification.json" for s in SOURCES],
        "verdicts": [f"results/{CAMPAIGN}/compare/{s}.json" for s in SOURCES],
        "timelines": [f"results/{CAMPAIGN}/timeline/{s}.png" for s in SOURCES],
        "perfetto": [f"results/{CAMPAIGN}/perfetto/{s}.json" for s in SOURCES],
        "source_reports": [f"results/{CAMPAIGN}/replay/{s}/source.json" for s in SOURCES],
        "baselines": [f"results/{CAMPAIGN}/reduce/{s}/verification.json" for s in REDUCED],
        "sampling_baselines": [f"results/{CAMPAIGN}/baselines/{s}.json" for s in SOURCES],
        "controls": [f"results/{CAMPAIGN}/controls/{s}.json" for s in SOURCES],
        "physical": physical_summaries(),
        "alphabeta_fits": [f"results/{CAMPAIGN}/alphabeta/{l}/fit.json" for l in ALPHABETA],
        "captures": [f"results/{CAMPAIGN}/capture/{s}" for s in sources_of_kind("live_capture")],
    }


PHYSICAL = config["physical"]  # every default is set by the config schema
# the physical sources, each with its configurations, repetitions and gate threshold
# (tracecanary.campaign.physical_sources; an unknown id is refused by name)
PHYSICAL_SOURCES = physical_sources(config, file=" + ".join(config_files()) or "config")
# the physical configurations file is checked before any job runs: its names are
# identifiers (they become path components) and it defines every configuration named above
check_physical_configs(config, PHYSICAL_SOURCES, file=" + ".join(config_files()) or "config")
SWEEPS = {w["id"]: w for w in PHYSICAL["sweeps"]}
for _sid in SWEEPS:
    ALPHABETA[_sid] = {"id": _sid, "path": f"results/{CAMPAIGN}/sweeps/{_sid}"}
# the ladders a physical source's replays use that SWEEPS does not cover, derived from its
# exports (rule sweep_derived); a SWEEPS ladder overrides the derived one
DERIVE_SWEEPS = PHYSICAL["derive_sweeps"]
DERIVED_SWEEPS = bool(PHYSICAL_SOURCES) and DERIVE_SWEEPS["enabled"]
CALIBRATED = bool(SWEEPS) or DERIVED_SWEEPS  # the simulator twins can be priced


def covered_ladders():
    """SWEEPS as derive-ladders --covered keys (collective:dtype:ranks)."""
    return [f"{w['collective']}:{w['dtype']}:{PHYSICAL['nproc']}" for w in SWEEPS.values()]


def physical_configs_of(wildcards):
    """The physical configurations of the wildcards' source, in round order."""
    return list(PHYSICAL_SOURCES[wildcards.source].configs)


def physical_summaries():
    """Every physical source's report (the summary shows one section per source)."""
    return [f"results/{CAMPAIGN}/physical/{sid}.json" for sid in PHYSICAL_SOURCES]


def physical_gates():
    """Every physical source's gate verdict (a target of `all`, so a failed gate fails the run)."""
    return [f"results/{CAMPAIGN}/physical_gate/{sid}.txt" for sid in PHYSICAL_SOURCES]


def physical_attempts(wildcards):
    reps = range(1, PHYSICAL_SOURCES[wildcards.source].repetitions + 1)
    return [
        f"results/{CAMPAIGN}/physical/{wildcards.source}/{program}/{cfg}/rep{r}"
        for cfg in physical_configs_of(wildcards)
        for r in reps
        for program in ("canary", "full")
    ]


# workflow/rules/param_upstream.smk: the optional upstream PARAM replays
PARAM_UPSTREAM = PHYSICAL["param_upstream"]  # every default is set by the config schema
PARAM_UPSTREAM_ON = bool(PHYSICAL_SOURCES and PARAM_UPSTREAM["enabled"])


def param_upstream_attempts(wildcards):
    """replay-param archives for the source's physical report ([] when the switch is off)."""
    if not PARAM_UPSTREAM_ON:
        return []
    return [
        f"results/{CAMPAIGN}/physical-param/{wildcards.source}/{program}/rep{r}"
        for r in range(1, PARAM_UPSTREAM["repetitions"] + 1)
        for program in ("canary", "full")
    ]


def physical_predecessor(wildcards):
    """The attempt of the same source that runs just before this one: repetitions run as
    rounds (every configuration once per round) and the configuration order rotates by one
    per round, so drift and warm-up favour no configuration; [] for the first."""
    configs = physical_configs_of(wildcards)
    chain = []
    for rep in range(1, PHYSICAL_SOURCES[wildcards.source].repetitions + 1):
        k = (rep - 1) % len(configs)
        chain += [(cfg, rep) for cfg in configs[k:] + configs[:k]]
    i = chain.index((wildcards.config, int(wildcards.rep)))
    if i == 0:
        return []
    cfg, rep = chain[i - 1]
    return [f"results/{wildcards.campaign}/provenance/replay_physical/{wildcards.source}/{cfg}/rep{rep}.json"]


def perfetto_inputs(wildcards):
    """The source table and its canary, and for a physical source the canary's first
    attempt (first configuration, repetition 1) as the physical view."""
    inputs = {
        "table": source_table(wildcards),
        "canary": f"results/{CAMPAIGN}/search/{wildcards.source}/canary.json",
    }
    if wildcards.source in PHYSICAL_SOURCES:
        config = physical_configs_of(wildcards)[0]
        inputs["attempt"] = f"results/{CAMPAIGN}/physical/{wildcards.source}/canary/{config}/rep1"
    return inputs


def get_export_input(wildcards):
    if wildcards.program == "canary":
        return {"program": f"results/{CAMPAIGN}/search/{wildcards.source}/canary.json"}
    return source_inputs(wildcards) | {"program": source_table(wildcards)}


def get_replay_input(wildcards):
    if wildcards.which == "canary":
        return {"program": f"results/{CAMPAIGN}/search/{wildcards.source}/canary.json"}
    return source_inputs(wildcards) | {"program": source_table(wildcards)}
