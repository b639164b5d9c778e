"""Physical replay: PARAM "basic" programs (read by ``tracecanary.param.program``) run
through real collectives.

Modules, one job each:
    correctness    deterministic rank-dependent fills and the expected result of every op
    strategies     how one op (or a fused bucket) is carried out: native, decomposed,
                   chunked, fused
    config         named physical configurations (``config/physical.yaml``)
    rank_contract  what a rank writes (row schemas) and how it is told to fail, torch-free
    worker         the per-rank replayer and ladder runner (one process per rank)
    local_ranks    one machine's ranks forked after a single torch import
    launch         the launcher (local_ranks, or torchrun across nodes) with timeout,
                   process-group kill and staging
    replay         replay-physical: validate, launch, assemble (exit 1 on failed attempts)
    environment    versions, hosts, devices and the NCCL_*/GLOO_*/OMP_*/SLURM_* environment
    archive        the attempt archive (evidence): attempt.json, environment.json, rows
    sweep          nccl-tests-style ladders and their table
    ladders        the ladders an export's replays need (derive-ladders, rule sweep_derived)
    report         canary-vs-full physical report over attempt archives (compare-physical)
    gate_threshold the physical gate's default runtime threshold (no numpy: for options)
    samples        small PARAM programs for tests and measurements
    slurm_launch   (issue 9) one launcher per node of a SLURM job step
See docs/physical.md.
"""
