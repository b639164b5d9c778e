rule controls:
    # the searched canary and its source replayed under each simulator ablation and under
    # seeded noise: does the canary respond to each mechanism like the source?
    input:
        unpack(source_inputs),
        canary="results/{campaign}/search/{source}/canary.json",
        backends=config["backends"],
        tolerances=config["tolerances"],
    output:
        controls="results/{campaign}/controls/{source}.json",
        markdown="results/{campaign}/controls/{source}.md",
        prov="results/{campaign}/provenance/controls/{source}.json",
    params:
        iterations=config["controls"]["iterations"],
        seed=config["controls"]["seed"],
    log:
        "logs/{campaign}/controls/{source}.log",
    benchmark:
        "benchmarks/{campaign}/controls/{source}.tsv"
    conda:
        ENV
    script:
        "../../scripts/controls.py"
