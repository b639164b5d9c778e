rule merge:
    input:
        unpack(get_merge_input),
    output:
        merged="results/{campaign}/merge/{source}.jsonl.gz",
        prov="results/{campaign}/provenance/merge/{source}.json",
    log:
        "logs/{campaign}/merge/{source}.log",
    benchmark:
        "benchmarks/{campaign}/merge/{source}.tsv"
    conda:
        ENV
    script:
        "../../scripts/merge.py"
