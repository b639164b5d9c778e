rule export_param:
    input:
        unpack(get_export_input),
    output:
        param=directory("results/{campaign}/param/{source}/{program}"),
        prov="results/{campaign}/provenance/export_param/{source}/{program}.json",
    params:
        execution=lambda wc: "reduced" if wc.program == "canary" else "full",
    log:
        "logs/{campaign}/export_param/{source}/{program}.log",
    benchmark:
        "benchmarks/{campaign}/export_param/{source}/{program}.tsv"
    conda:
        ENV
    script:
        "../../scripts/export_param.py"


rule replay_physical:
    # one job replays the canary and the full program back to back under one
    # configuration; odd repetitions run the canary first, even ones the full program
    # first (A B / B A), so drift does not favour either
    input:
        canary="results/{campaign}/param/{source}/canary",
        full="results/{campaign}/param/{source}/full",
        physical_configs=PHYSICAL.get("physical_configs", "config/physical.yaml"),
    output:
        canary=directory("results/{campaign}/physical/{source}/canary/{config}/rep{rep}"),
        full=directory("results/{campaign}/physical/{source}/full/{config}/rep{rep}"),
        prov="results/{campaign}/provenance/replay_physical/{source}/{config}/rep{rep}.json",
    params:
        backend=PHYSICAL.get("backend", "gloo"),
        warmup=PHYSICAL.get("warmup", 1),
        iters=PHYSICAL.get("iters", 3),
        timeout=PHYSICAL.get("timeout", 900),
    threads: workflow.cores
    resources:
        nodes=PHYSICAL.get("nodes", 1),
        tasks=PHYSICAL.get("nodes", 1) * PHYSICAL.get("nproc", 4),
        mpi="srun",
        runtime=60,
    log:
        "logs/{campaign}/replay_physical/{source}/{config}/rep{rep}.log",
    benchmark:
        "benchmarks/{campaign}/replay_physical/{source}/{config}/rep{rep}.tsv"
    conda:
        ENV
    script:
        "../../scripts/replay_physical.py"


rule physical_report:
    input:
        attempts=physical_attempts,
    output:
        report="results/{campaign}/physical.json",
        markdown=report("results/{campaign}/physical.md", caption="../report/physical.rst", category="Physical"),
        prov="results/{campaign}/provenance/physical_report.json",
    params:
        source=PHYSICAL_SOURCE,
    log:
        "logs/{campaign}/physical_report.log",
    benchmark:
        "benchmarks/{campaign}/physical_report.tsv"
    conda:
        ENV
    script:
        "../../scripts/physical_report.py"


rule sweep:
    output:
        ladder=directory("results/{campaign}/sweeps/{ladder}"),
        prov="results/{campaign}/provenance/sweep/{ladder}.json",
    params:
        spec=lambda wc: SWEEPS[wc.ladder],
        backend=PHYSICAL.get("backend", "gloo"),
        nproc=PHYSICAL.get("nproc", 4),
    threads: workflow.cores
    resources:
        nodes=1,
        tasks=PHYSICAL.get("nproc", 4),
        runtime=30,
    log:
        "logs/{campaign}/sweep/{ladder}.log",
    benchmark:
        "benchmarks/{campaign}/sweep/{ladder}.tsv"
    conda:
        ENV
    script:
        "../../scripts/sweep.py"
