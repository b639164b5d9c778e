rule capture_kineto:
    output:
        capture=directory("results/{campaign}/capture/{source}"),
        prov="results/{campaign}/provenance/capture_kineto/{source}.json",
    params:
        nproc=lambda wc: SOURCES[wc.source]["nproc"],
        steps=lambda wc: SOURCES[wc.source]["steps"],
        workload=lambda wc: SOURCES[wc.source].get("workload"),  # None: the built-in probe
    log:
        "logs/{campaign}/capture_kineto/{source}.log",
    benchmark:
        "benchmarks/{campaign}/capture_kineto/{source}.tsv"
    conda:
        ENV
    script:
        "../../scripts/capture_kineto.py"


rule import_kineto:
    input:
        capture="results/{campaign}/capture/{source}",
    output:
        imported=directory("results/{campaign}/import/{source}"),
        prov="results/{campaign}/provenance/import_kineto/{source}.json",
    log:
        "logs/{campaign}/import_kineto/{source}.log",
    benchmark:
        "benchmarks/{campaign}/import_kineto/{source}.tsv"
    threads: 2
    conda:
        ENV
    script:
        "../../scripts/import_kineto.py"


rule capture_command:
    # kind command: the user's own program, run by its command under the recorder
    # (tracecanary capture -o DIR -- CMD): rank captures merged into merged.jsonl.gz; the
    # command, its directory and environment are params, the program file an input, so
    # the provenance record states and hashes them; kept as evidence like a live capture
    input:
        program=lambda wc: SOURCES[wc.source]["program"],
    output:
        capture=directory("results/{campaign}/capture_command/{source}"),
        prov="results/{campaign}/provenance/capture_command/{source}.json",
    params:
        command=lambda wc: SOURCES[wc.source]["command"],
        cwd=lambda wc: SOURCES[wc.source]["cwd"],
        env=lambda wc: SOURCES[wc.source]["env"],
        timeout=lambda wc: SOURCES[wc.source]["timeout"],
    threads: workflow.cores
    log:
        "logs/{campaign}/capture_command/{source}.log",
    benchmark:
        "benchmarks/{campaign}/capture_command/{source}.tsv"
    conda:
        ENV
    script:
        "../../scripts/capture_command.py"
