rule manifest:
    input:
        records=provenance_targets,
    output:
        manifest="results/{campaign}/manifest.json",
    params:
        config_files=config_files(),
    log:
        "logs/{campaign}/manifest.log",
    benchmark:
        "benchmarks/{campaign}/manifest.tsv"
    conda:
        ENV
    script:
        "../../scripts/manifest.py"
