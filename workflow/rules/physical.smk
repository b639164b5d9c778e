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
        canary="results/{campaign}/param/{source}/canary",
        full="results/{campaign}/param/{source}/full",
        physical_configs=PHYSICAL["physical_configs"],
    output:
        program=directory("results/{campaign}/dispatch/{source}/{config}/program"),
        prov="results/{campaign}/provenance/dispatch_program/{source}/{config}.json",
    params:
        backend=PHYSICAL["backend"],
    log:
        "logs/{campaign}/dispatch_program/{source}/{config}.log",
    benchmark:
        "benchmarks/{campaign}/dispatch_program/{source}/{config}.tsv"
    conda:
        ENV
    script:
        "../../scripts/dispatch_program.py"


rule replay_dispatch:
    # the calibration program replayed once under its configuration, a separate run: the
    # simulator twin is never calibrated on the replays it is judged on
    input:
        program="results/{campaign}/dispatch/{source}/{config}/program",
        physical_configs=PHYSICAL["physical_configs"],
    output:
        attempt=directory("results/{campaign}/dispatch/{source}/{config}/attempt"),
        prov="results/{campaign}/provenance/replay_dispatch/{source}/{config}.json",
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
        "logs/{campaign}/replay_dispatch/{source}/{config}.log",
    benchmark:
        "benchmarks/{campaign}/replay_dispatch/{source}/{config}.tsv"
    conda:
        ENV
    script:
        "../../scripts/replay_dispatch.py"


rule calibrate_backends:
    # per physical source: simulator configurations of its physical ones, priced from the
    # campaign's own ladders (docs/simulator.md) plus each configuration's dispatch lateness
    # measured in its own calibration replay of this source's programs; a configuration
    # without evidence for an op the source's replayed programs use is refused by name
    input:
        ladders=lambda wc: [f"results/{wc.campaign}/sweeps/{s}" for s in SWEEPS],
        derived=lambda wc: (
            [f"results/{wc.campaign}/sweeps_derived/{wc.source}"] if DERIVED_SWEEPS else []
        ),
        dispatch=lambda wc: [
            f"results/{wc.campaign}/dispatch/{wc.source}/{c}/attempt"
            for c in physical_configs_of(wc)
        ],
        # each attempt names the calibration program it replayed, which is read (and its
        # digest checked) to price the steps: an input like any other, so it is bound and
        # exists before this job runs, even where the attempt is kept and not re-run
        dispatch_programs=lambda wc: [
            f"results/{wc.campaign}/dispatch/{wc.source}/{c}/program"
            for c in physical_configs_of(wc)
        ],
        physical_configs=PHYSICAL["physical_configs"],
        canary="results/{campaign}/param/{source}/canary",
        full="results/{campaign}/param/{source}/full",
    output:
        backends="results/{campaign}/backends/{source}/calibrated.yaml",
        prov="results/{campaign}/provenance/calibrate_backends/{source}.json",
    params:
        configs=physical_configs_of,
        backend=PHYSICAL["backend"],
    log:
        "logs/{campaign}/calibrate_backends/{source}.log",
    benchmark:
        "benchmarks/{campaign}/calibrate_backends/{source}.tsv"
    conda:
        ENV
    script:
        "../../scripts/calibrate_backends.py"


rule physical_report:
    # one report per physical source, its gate at that source's max_runtime_ratio
    input:
        attempts=physical_attempts,
        param_attempts=param_upstream_attempts,
        backends=lambda wc: (
            [f"results/{wc.campaign}/backends/{wc.source}/calibrated.yaml"] if CALIBRATED else []
        ),
        canary="results/{campaign}/param/{source}/canary",
        full="results/{campaign}/param/{source}/full",
    output:
        report="results/{campaign}/physical/{source}.json",
        markdown="results/{campaign}/physical/{source}.md",
        html=report(
            "results/{campaign}/physical/{source}.html",
            caption="../report/physical.rst",
            category="Physical",
            labels=lambda wc: {"page": "canary vs full program", "source": wc.source},
        ),
        prov="results/{campaign}/provenance/physical_report/{source}.json",
    params:
        source=lambda wc: wc.source,
        max_runtime_ratio=lambda wc: PHYSICAL_SOURCES[wc.source].max_runtime_ratio,
    log:
        "logs/{campaign}/physical_report/{source}.log",
    benchmark:
        "benchmarks/{campaign}/physical_report/{source}.tsv"
    conda:
        ENV
    script:
        "../../scripts/physical_report.py"


rule physical_gate:
    # per physical source: the verdict (pass, warning, or fail when a decided pair flips
    # between canary and full program or the canary/full runtime ratio exceeds the source's
    # threshold); runs after the summary, which shows every source's verdict. A failed
    # verdict ends the run with one line and exit 1 (the Snakefile's onsuccess)
    input:
        report="results/{campaign}/physical/{source}.json",
        summary="results/{campaign}/summary.md",
    output:
        verdict="results/{campaign}/physical_gate/{source}.txt",
    log:
        "logs/{campaign}/physical_gate/{source}.log",
    conda:
        ENV
    script:
        "../../scripts/physical_gate.py"


rule sweep_derived:
    # per physical source: the ladders its canary's and full program's replays use under its
    # configurations and SWEEPS does not cover (tracecanary derive-ladders), each swept
    # (tracecanary sweep) into the output directory beside ladders.json; evidence
    input:
        canary="results/{campaign}/param/{source}/canary",
        full="results/{campaign}/param/{source}/full",
        physical_configs=PHYSICAL["physical_configs"],
    output:
        ladders=directory("results/{campaign}/sweeps_derived/{source}"),
        prov="results/{campaign}/provenance/sweep_derived/{source}.json",
    params:
        configs=physical_configs_of,
        covered=covered_ladders(),
        backend=PHYSICAL["backend"],
        warmup=DERIVE_SWEEPS["warmup"],
        iters=DERIVE_SWEEPS["iters"],
        cycles=DERIVE_SWEEPS["cycles"],
    threads: workflow.cores
    resources:
        nodes=1,
        tasks=PHYSICAL["nproc"],
        runtime=30,
    log:
        "logs/{campaign}/sweep_derived/{source}.log",
    benchmark:
        "benchmarks/{campaign}/sweep_derived/{source}.tsv"
    conda:
        ENV
    script:
        "../../scripts/sweep_derived.py"


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
