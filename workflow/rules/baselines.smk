rule baselines:
    # random, frequency, k-means cluster and stratified samples of the source at the
    # searched canary's executed size, each replayed and checked like the canary
    input:
        unpack(source_inputs),
        canary="results/{campaign}/search/{source}/canary.json",
        backends=config["backends"],
        tolerances=config["tolerances"],
    output:
        baselines="results/{campaign}/baselines/{source}.json",
        markdown="results/{campaign}/baselines/{source}.md",
        prov="results/{campaign}/provenance/baselines/{source}.json",
    log:
        "logs/{campaign}/baselines/{source}.log",
    benchmark:
        "benchmarks/{campaign}/baselines/{source}.tsv"
    conda:
        ENV
    script:
        "../../scripts/baselines.py"
