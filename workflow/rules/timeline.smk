rule timeline:
    # per-rank lanes of the source's collectives beside the canary's executed occurrences
    input:
        unpack(source_inputs),
        canary="results/{campaign}/search/{source}/canary.json",
    output:
        plot=report(
            "results/{campaign}/timeline/{source}.png",
            caption="../report/timeline.rst",
            category="Timelines",
            labels={"source": "{source}", "view": "timeline"},
        ),
        prov="results/{campaign}/provenance/timeline/{source}.json",
    log:
        "logs/{campaign}/timeline/{source}.log",
    benchmark:
        "benchmarks/{campaign}/timeline/{source}.tsv"
    conda:
        ENV
    script:
        "../../scripts/timeline.py"
