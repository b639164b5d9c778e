# Optional (physical.param_upstream.enabled, default off): the physical source's canary and
# full program exported for upstream PARAM (--target param-1e115ff) and replayed in it
# (tracecanary replay-param); the physical report puts both replayers side by side.
# PARAM_UPSTREAM and param_upstream_attempts are in common.smk.

rule export_param_upstream:
    input:
        unpack(get_export_input),
    output:
        param=directory("results/{campaign}/param-upstream/{source}/{program}"),
        prov="results/{campaign}/provenance/export_param_upstream/{source}/{program}.json",
    params:
        execution=lambda wc: "reduced" if wc.program == "canary" else "full",
    log:
        "logs/{campaign}/export_param_upstream/{source}/{program}.log",
    benchmark:
        "benchmarks/{campaign}/export_param_upstream/{source}/{program}.tsv"
    conda:
        ENV
    script:
        "../../scripts/export_param_upstream.py"


rule replay_param:
    # canary and full program back to back in upstream PARAM, A B / B A as replay_physical
    input:
        canary="results/{campaign}/param-upstream/{source}/canary",
        full="results/{campaign}/param-upstream/{source}/full",
    output:
        canary=directory("results/{campaign}/physical-param/{source}/canary/rep{rep}"),
        full=directory("results/{campaign}/physical-param/{source}/full/rep{rep}"),
        prov="results/{campaign}/provenance/replay_param/{source}/rep{rep}.json",
    params:
        param=PARAM_UPSTREAM["param"],
        backend=PHYSICAL["backend"],
        iters=PARAM_UPSTREAM["iters"],
        timeout=PHYSICAL["timeout"],
    threads: workflow.cores
    resources:
        nodes=PHYSICAL["nodes"],
        tasks=PHYSICAL["nodes"] * PHYSICAL["nproc"],
        mpi="srun",
        runtime=60,
    log:
        "logs/{campaign}/replay_param/{source}/rep{rep}.log",
    benchmark:
        "benchmarks/{campaign}/replay_param/{source}/rep{rep}.tsv"
    conda:
        ENV
    script:
        "../../scripts/replay_param.py"
