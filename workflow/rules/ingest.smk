# Sources of kind: captures are checked one job per block of rank files (scatter.rank_files_per_job,
# docs/cluster.md): capture_set_header reads every capture's header once, each
# ingest_capture_block job runs ingest's event checks on its rank files and rewrites them as
# columnar captures, and merge (merge.smk) gathers the blocks (tracecanary.rank_blocks).


rule capture_set_header:
    input:
        captures=lambda wc: SOURCES[wc.source]["captures"],
    output:
        header="results/{campaign}/capture_blocks/{source}/header.json",
        prov="results/{campaign}/provenance/capture_set_header/{source}.json",
    log:
        "logs/{campaign}/capture_set_header/{source}.log",
    benchmark:
        "benchmarks/{campaign}/capture_set_header/{source}.tsv"
    localrule: True
    conda:
        ENV
    script:
        "../../scripts/capture_set_header.py"


rule ingest_capture_block:
    input:
        header="results/{campaign}/capture_blocks/{source}/header.json",
        captures=rank_block_files,
    output:
        block=directory("results/{campaign}/capture_blocks/{source}/block{block}"),
        prov="results/{campaign}/provenance/ingest_capture_block/{source}/block{block}.json",
    params:
        first_index=rank_block_first_index,
    wildcard_constraints:
        block="[0-9]+",
    log:
        "logs/{campaign}/ingest_capture_block/{source}/block{block}.log",
    benchmark:
        "benchmarks/{campaign}/ingest_capture_block/{source}/block{block}.tsv"
    conda:
        ENV
    script:
        "../../scripts/ingest_capture_block.py"


rule ingest:
    input:
        unpack(get_ingest_input),
    output:
        table="results/{campaign}/ingest/{source}.parquet",
        sidecar="results/{campaign}/ingest/{source}.meta.json",
        prov="results/{campaign}/provenance/ingest/{source}.json",
    log:
        "logs/{campaign}/ingest/{source}.log",
    benchmark:
        "benchmarks/{campaign}/ingest/{source}.tsv"
    conda:
        ENV
    script:
        "../../scripts/ingest.py"
