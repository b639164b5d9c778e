# Sources of kind: flight_recorder — every rank's PyTorch Flight Recorder dump of one run,
# imported together (the cross-rank checks need every dump), then merged by merge.smk
# (get_merge_input in common.smk); same_host: true writes the calibration (kineto.smk).


rule import_flight_recorder:
    input:
        dumps=lambda wc: SOURCES[wc.source]["dumps"],
    output:
        imported=directory("results/{campaign}/flight_recorder_import/{source}"),
        prov="results/{campaign}/provenance/import_flight_recorder/{source}.json",
    params:
        declare_root=lambda wc: SOURCES[wc.source].get("declare_root"),
        declare_even_all_to_all=lambda wc: SOURCES[wc.source].get("declare_even_all_to_all") is True,
    log:
        "logs/{campaign}/import_flight_recorder/{source}.log",
    benchmark:
        "benchmarks/{campaign}/import_flight_recorder/{source}.tsv"
    conda:
        ENV
    script:
        "../../scripts/import_flight_recorder.py"
