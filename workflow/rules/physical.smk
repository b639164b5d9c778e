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
        physical_configs=PHYSICAL["physical_configs"],
        after=physical_predecessor,
    output:
        canary=directory("results/{campaign}/physical/{source}/canary/{config}/rep{rep}"),
        full=directory("results/{campaign}/physical/{source}/full/{config}/rep{rep}"),
        prov="results/{campaign}/provenance/replay_physical/{source}/{config}/rep{rep}.json",
    params:
        backend=PHYSICAL["backend"],
        warmup=PHYSICAL["warmup"],
        iters=PHYSICAL["iters"],
        timeout=PHYSICAL["timeout"],
    threads: workflow.cores
    resources:
        nodes=PHYSICAL["nodes"],
        tasks=PHYSICAL["nodes"] * PHYSICAL["nproc"],
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


rule dispatch_program:
    # the calibration program of the replayer's dispatch lateness for one configuration:
    # every consecutive step pair of the canary and the full program, repeated
    # (sim/dispatch.py, docs/simulator.md)
    input:
        canary=f"results/{{campaign}}/param/{PHYSICAL_SOURCE}/canary",
        full=f"results/{{campaign}}/param/{PHYSICAL_SOURCE}/full",
        physical_configs=PHYSICAL["physical_configs"],
    output:
        program=directory("results/{campaign}/dispatch/{config}/program"),
        prov="results/{campaign}/provenance/dispatch_program/{config}.json",
    params:
        backend=PHYSICAL["backend"],
    log:
        "logs/{campaign}/dispatch_program/{config}.log",
    benchmark:
        "benchmarks/{campaign}/dispatch_program/{config}.tsv"
    conda:
        ENV
    script:
        "../../scripts/dispatch_program.py"


rule replay_dispatch:
    # the calibration program replayed once under its configuration, a separate run: the
    # simulator twin is never calibrated on the replays it is judged on
    input:
        program="results/{campaign}/dispatch/{config}/program",
        physical_configs=PHYSICAL["physical_configs"],
    output:
        attempt=directory("results/{campaign}/dispatch/{config}/attempt"),
        prov="results/{campaign}/provenance/replay_dispatch/{config}.json",
    params:
        backend=PHYSICAL["backend"],
        warmup=PHYSICAL["warmup"],
        iters=PHYSICAL["iters"],
        timeout=PHYSICAL["timeout"],
    threads: workflow.cores
    resources:
        nodes=PHYSICAL["nodes"],
        tasks=PHYSICAL["nodes"] * PHYSICAL["nproc"],
        mpi="srun",
        runtime=30,
    log:
        "logs/{campaign}/replay_dispatch/{config}.log",
    benchmark:
        "benchmarks/{campaign}/replay_dispatch/{config}.tsv"
    conda:
        ENV
    script:
        "../../scripts/replay_dispatch.py"


rule calibrate_backends:
    # simulator configurations of the physical ones, priced from the campaign's own ladders
    # (docs/simulator.md) plus each configuration's dispatch lateness measured in its own
    # calibration replay; a configuration without evidence for an op the replayed programs
    # use is refused by name
    input:
        ladders=lambda wc: [f"results/{wc.campaign}/sweeps/{s}" for s in SWEEPS],
        dispatch=lambda wc: [
            f"results/{wc.campaign}/dispatch/{c}/attempt" for c in PHYSICAL["configs"]
        ],
        physical_configs=PHYSICAL["physical_configs"],
        canary=f"results/{{campaign}}/param/{PHYSICAL_SOURCE}/canary",
        full=f"results/{{campaign}}/param/{PHYSICAL_SOURCE}/full",
    output:
        backends="results/{campaign}/backends/calibrated.yaml",
        prov="results/{campaign}/provenance/calibrate_backends.json",
    params:
        configs=PHYSICAL["configs"],
        backend=PHYSICAL["backend"],
    log:
        "logs/{campaign}/calibrate_backends.log",
    benchmark:
        "benchmarks/{campaign}/calibrate_backends.tsv"
    conda:
        ENV
    script:
        "../../scripts/calibrate_backends.py"


rule physical_report:
    input:
        attempts=physical_attempts,
        param_attempts=param_upstream_attempts,
        backends=lambda wc: [f"results/{wc.campaign}/backends/calibrated.yaml"] if SWEEPS else [],
        canary=f"results/{{campaign}}/param/{PHYSICAL_SOURCE}/canary",
        full=f"results/{{campaign}}/param/{PHYSICAL_SOURCE}/full",
    output:
        report="results/{campaign}/physical.json",
        markdown="results/{campaign}/physical.md",
        html=report(
            "results/{campaign}/physical.html",
            caption="../report/physical.rst",
            category="Physical",
            labels={"page": "canary vs full program"},
        ),
        prov="results/{campaign}/provenance/physical_report.json",
    params:
        source=PHYSICAL_SOURCE,
        max_runtime_ratio=PHYSICAL["max_runtime_ratio"],
    log:
        "logs/{campaign}/physical_report.log",
    benchmark:
        "benchmarks/{campaign}/physical_report.tsv"
    conda:
        ENV
    script:
        "../../scripts/physical_report.py"


rule physical_gate:
    # exit 1 when a decided pair flips between canary and full program or the canary/full
    # runtime ratio exceeds its threshold; runs after the summary, which shows the verdict
    input:
        report="results/{campaign}/physical.json",
        summary="results/{campaign}/summary.md",
    output:
        verdict="results/{campaign}/physical_gate.txt",
    log:
        "logs/{campaign}/physical_gate.log",
    conda:
        ENV
    script:
        "../../scripts/physical_gate.py"


rule sweep:
    output:
        ladder=directory("results/{campaign}/sweeps/{ladder}"),
        prov="results/{campaign}/provenance/sweep/{ladder}.json",
    params:
        spec=lambda wc: SWEEPS[wc.ladder],
        backend=PHYSICAL["backend"],
        nproc=PHYSICAL["nproc"],
    threads: workflow.cores
    resources:
        nodes=1,
        tasks=PHYSICAL["nproc"],
        runtime=30,
    log:
        "logs/{campaign}/sweep/{ladder}.log",
    benchmark:
        "benchmarks/{campaign}/sweep/{ladder}.tsv"
    conda:
        ENV
    script:
        "../../scripts/sweep.py"
