# Sources of kind captures with `calibration: derived`: the clocks are derived from the
# captures' own happens-before order (tracecanary calibrate-clocks, docs/calibration.md).


rule calibrate_clocks:
    input:
        captures=lambda wc: SOURCES[wc.source]["captures"],
    output:
        calibration="results/{campaign}/calibration/derived/{source}.json",
        prov="results/{campaign}/provenance/calibrate_clocks/{source}.json",
    log:
        "logs/{campaign}/calibrate_clocks/{source}.log",
    benchmark:
        "benchmarks/{campaign}/calibrate_clocks/{source}.tsv"
    conda:
        ENV
    script:
        "../../scripts/calibrate_clocks.py"
