rule summary:
    input:
        unpack(summary_inputs),
    output:
        markdown="results/{campaign}/summary.md",
        html=report(
            "results/{campaign}/summary.html",
            caption="../report/summary.rst",
            category="Summary",
            labels={"page": "campaign summary"},
        ),
        prov="results/{campaign}/provenance/summary.json",
    log:
        "logs/{campaign}/summary.log",
    benchmark:
        "benchmarks/{campaign}/summary.tsv"
    conda:
        ENV
    script:
        "../../scripts/summary.py"
