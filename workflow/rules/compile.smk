rule compile:
    input:
        unpack(source_inputs),
    output:
        canary="results/{campaign}/canary/{source}/{budget}.json",
        prov="results/{campaign}/provenance/compile/{source}/{budget}.json",
    params:
        budget="{budget}",
    log:
        "logs/{campaign}/compile/{source}/{budget}.log",
    benchmark:
        "benchmarks/{campaign}/compile/{source}/{budget}.tsv"
    conda:
        ENV
    script:
        "../../scripts/compile.py"
