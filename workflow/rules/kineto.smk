# Sources of kind: kineto — per-rank PyTorch profiler traces, imported one job per block of
# rank files (scatter.rank_files_per_job, docs/cluster.md), gathered into one directory, then
# merged by merge.smk (get_merge_input in common.smk); same_host: true writes the calibration
# (for kind flight_recorder too: imported_ranks in common.smk).


rule import_kineto_block:
    input:
        traces=rank_block_files,
    output:
        imported=directory("results/{campaign}/kineto_blocks/{source}/block{block}"),
        prov="results/{campaign}/provenance/import_kineto_block/{source}/block{block}.json",
    wildcard_constraints:
        block="[0-9]+",
    log:
        "logs/{campaign}/import_kineto_block/{source}/block{block}.log",
    benchmark:
        "benchmarks/{campaign}/import_kineto_block/{source}/block{block}.tsv"
    threads: 2
    conda:
        ENV
    script:
        "../../scripts/import_kineto_block.py"


rule import_kineto_traces:
    input:
        blocks=lambda wc: rank_block_dirs(wc.source),
    output:
        imported=directory("results/{campaign}/kineto_import/{source}"),
        prov="results/{campaign}/provenance/import_kineto_traces/{source}.json",
    log:
        "logs/{campaign}/import_kineto_traces/{source}.log",
    benchmark:
        "benchmarks/{campaign}/import_kineto_traces/{source}.tsv"
    conda:
        ENV
    script:
        "../../scripts/import_kineto_traces.py"


rule same_host_calibration:
    input:
        imported=imported_ranks,
    output:
        calibration="results/{campaign}/calibration/{source}.json",
        prov="results/{campaign}/provenance/same_host_calibration/{source}.json",
    log:
        "logs/{campaign}/same_host_calibration/{source}.log",
    benchmark:
        "benchmarks/{campaign}/same_host_calibration/{source}.tsv"
    conda:
        ENV
    script:
        "../../scripts/same_host_calibration.py"
