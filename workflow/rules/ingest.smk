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
