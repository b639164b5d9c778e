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
            labels=alphabeta_plot_labels,
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


rule stage_external:
    # an external measurement (e.g. real nccl-tests output) copied into the campaign, so the
    # manifest binds it as recorded evidence inside the campaign directory
    input:
        original=lambda wc: EXTERNAL[wc.ladder]["path"],
    output:
        staged="results/{campaign}/external/{ladder}.txt",
        prov="results/{campaign}/provenance/stage_external/{ladder}.json",
    log:
        "logs/{campaign}/stage_external/{ladder}.log",
    benchmark:
        "benchmarks/{campaign}/stage_external/{ladder}.tsv"
    conda:
        ENV
    script:
        "../../scripts/stage_external.py"
