rule verify:
    input:
        unpack(source_inputs),
        unpack(second_capture_inputs),
        canary="results/{campaign}/canary/{source}/{budget}.json",
        backends=config["backends"],
        tolerances=config["tolerances"],
    output:
        verification="results/{campaign}/verify/{source}/{budget}.json",
        prov="results/{campaign}/provenance/verify/{source}/{budget}.json",
    params:
        standard=config["verification_standard"],
    log:
        "logs/{campaign}/verify/{source}/{budget}.log",
    benchmark:
        "benchmarks/{campaign}/verify/{source}/{budget}.tsv"
    conda:
        ENV
    script:
        "../../scripts/verify.py"


rule search:
    input:
        unpack(source_inputs),
        unpack(second_capture_inputs),
        backends=config["backends"],
        tolerances=config["tolerances"],
    output:
        canary="results/{campaign}/search/{source}/canary.json",
        log="results/{campaign}/search/{source}/search.json",
        verification="results/{campaign}/search/{source}/verification.json",
        prov="results/{campaign}/provenance/search/{source}.json",
    params:
        budgets=config["search"]["budgets"],
        order=config["search"]["order"],
        standard=config["verification_standard"],
    log:
        "logs/{campaign}/search/{source}.log",
    benchmark:
        "benchmarks/{campaign}/search/{source}.tsv"
    conda:
        ENV
    script:
        "../../scripts/search.py"


rule reduce_baseline:
    input:
        unpack(source_inputs),
        backends=config["backends"],
        tolerances=config["tolerances"],
    output:
        reduced="results/{campaign}/reduce/{source}/reduced.json",
        canary="results/{campaign}/reduce/{source}/canary.json",
        verification="results/{campaign}/reduce/{source}/verification.json",
        prov="results/{campaign}/provenance/reduce_baseline/{source}.json",
    log:
        "logs/{campaign}/reduce/{source}.log",
    benchmark:
        "benchmarks/{campaign}/reduce/{source}.tsv"
    conda:
        ENV
    script:
        "../../scripts/reduce_baseline.py"


rule search_summary:
    input:
        unpack(search_summary_inputs),
    output:
        markdown="results/{campaign}/search.md",
        html=report(
            "results/{campaign}/search.html",
            caption="../report/search.rst",
            category="Canaries",
            labels={"page": "behavior search"},
        ),
        prov="results/{campaign}/provenance/search_summary.json",
    log:
        "logs/{campaign}/search_summary.log",
    benchmark:
        "benchmarks/{campaign}/search_summary.tsv"
    conda:
        ENV
    script:
        "../../scripts/search_summary.py"
