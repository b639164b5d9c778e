# The gather of per-rank work (docs/cluster.md): kind captures merges the blocks
# ingest_capture_block checked (ingest.smk), kind kineto the imported ranks (kineto.smk),
# live_capture its imported ranks; inputs from get_merge_input (common.smk).


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
