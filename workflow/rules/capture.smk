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
