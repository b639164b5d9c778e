rule replay:
    input:
        unpack(get_replay_input),
        backends=config["backends"],
    output:
        report="results/{campaign}/replay/{source}/{which}.json",
        prov="results/{campaign}/provenance/replay/{source}/{which}.json",
    params:
        isolated=lambda wc: wc.which == "source",
    log:
        "logs/{campaign}/replay/{source}/{which}.log",
    benchmark:
        "benchmarks/{campaign}/replay/{source}/{which}.tsv"
    conda:
        ENV
    script:
        "../../scripts/replay.py"


rule compare:
    input:
        report="results/{campaign}/replay/{source}/canary.json",
    output:
        verdict="results/{campaign}/compare/{source}.json",
        markdown="results/{campaign}/compare/{source}.md",
        prov="results/{campaign}/provenance/compare/{source}.json",
    params:
        baseline=config["compare"]["baseline"],
        candidate=config["compare"]["candidate"],
        thresholds=config["compare"]["thresholds"],
    log:
        "logs/{campaign}/compare/{source}.log",
    benchmark:
        "benchmarks/{campaign}/compare/{source}.tsv"
    conda:
        ENV
    script:
        "../../scripts/compare.py"
