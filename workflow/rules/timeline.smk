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


rule perfetto:
    # the same views as Chrome Trace Event JSON for Perfetto / chrome://tracing: a track per
    # rank and group, the canary's weights and tail windows as annotations, and for a
    # physical source its first canary attempt (tracecanary export-perfetto)
    input:
        unpack(perfetto_inputs),
    output:
        trace="results/{campaign}/perfetto/{source}.json",
        prov="results/{campaign}/provenance/perfetto/{source}.json",
    log:
        "logs/{campaign}/perfetto/{source}.log",
    benchmark:
        "benchmarks/{campaign}/perfetto/{source}.tsv"
    conda:
        ENV
    script:
        "../../scripts/perfetto.py"
