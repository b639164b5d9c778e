rule summary:
    input:
        unpack(summary_inputs),
    output:
        markdown=report("results/{campaign}/summary.md", caption="../report/summary.rst", category="Summary"),
        prov="results/{campaign}/provenance-summary.json",
    log:
        "logs/{campaign}/summary.log",
    benchmark:
        "benchmarks/{campaign}/summary.tsv"
    conda:
        ENV
    script:
        "../../scripts/summary.py"
