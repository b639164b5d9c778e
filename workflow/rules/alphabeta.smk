rule alphabeta:
    input:
        unpack(get_alphabeta_input),
    output:
        fit="results/{campaign}/alphabeta/{ladder}/fit.json",
        markdown="results/{campaign}/alphabeta/{ladder}/fit.md",
        plots=report(
            directory("results/{campaign}/alphabeta/{ladder}/plots"),
            patterns=["{name}.png"],
            caption="../report/alphabeta.rst",
            category="Alpha/beta",
            subcategory="{ladder}",
        ),
        prov="results/{campaign}/provenance/alphabeta/{ladder}.json",
    params:
        world_size=lambda wc: ALPHABETA[wc.ladder].get("world_size"),
    log:
        "logs/{campaign}/alphabeta/{ladder}.log",
    benchmark:
        "benchmarks/{campaign}/alphabeta/{ladder}.tsv"
    conda:
        ENV
    script:
        "../../scripts/alphabeta.py"
