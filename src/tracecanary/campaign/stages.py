"""What each Snakemake rule runs: one function per rule, named after the rule.

A stage takes the job (the ``snakemake`` object a ``script:`` receives) and calls the
library. Every ``scripts/<rule>.py`` is the same call, ``run_rule(snakemake)``, which looks
the stage up in ``STAGES`` by rule name (see ``tracecanary.campaign.workflow``). A stage
runs a ``tracecanary`` subcommand in this process (``cli``), or in a child process where the
subcommand spawns ranks (``cli_process``: a spawned rank must not re-import the Snakemake
script), or calls a library function that has no subcommand (summaries, manifest, timeline).
Each stage imports its library module when it runs, so a job loads only what it needs.

Guarantees: a stage reads only its job's inputs and params and writes only its outputs;
rule defaults are not repeated here (the config schema sets them, Snakemake's ``validate``
fills them in); a subcommand exit code outside a stage's accepted codes raises.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# rules whose outputs are measurements (evidence): recorded, never re-run by regeneration
RECORDED_RULES = frozenset(
    {
        "capture_kineto",
        "capture_command",
        "replay_physical",
        "replay_dispatch",
        "replay_param",
        "sweep",
        "sweep_derived",
        "stage_external",
    }
)

BEHAVIOR_FIELDS = ("skew", "overlap", "gap", "latency")  # what a compile budget bounds
DERIVED_LADDERS = "ladders.json"  # sweep_derived: what derive-ladders chose, beside the ladders


def cli(argv: list[Any], ok_codes: tuple[int, ...] = (0,)) -> int:
    """Run one ``tracecanary`` subcommand in-process; raise unless its exit code is in
    ``ok_codes`` (a gate that did not hold, exit 1, is a recorded result for the
    verification and compare rules; its one-line error is already in the rule's log)."""
    from tracecanary.cli import main  # loaded on first use; a run imports its command alone

    code = main([str(a) for a in argv])
    if code not in ok_codes:
        raise SystemExit(f"tracecanary {argv[0]} exited {code}")
    return code


def cli_process(
    argv: list[Any],
    ok_codes: tuple[int, ...] = (0,),
    *,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
) -> int:
    """Run one ``tracecanary`` subcommand in a child process (for those that spawn ranks),
    its output going to this job's log, in ``cwd`` (default: this one) with ``env`` set on
    top of this process's environment; raise unless its exit code is in ``ok_codes``."""
    cmd = [sys.executable, "-m", "tracecanary", *(str(a) for a in argv)]
    environment = {**os.environ, **env} if env else None
    code = subprocess.run(
        cmd, stdout=sys.stdout, stderr=sys.stderr, cwd=cwd, env=environment
    ).returncode
    if code not in ok_codes:
        raise SystemExit(f"tracecanary {argv[0]} exited {code}")
    return code


def capture_kineto(job) -> None:
    argv = ["capture", "--nproc", job.params.nproc, "--steps", job.params.steps]
    if job.params.workload:  # a zoo workload (tracecanary.zoo) on nproc ranks
        argv += ["--workload", job.params.workload]
    cli_process([*argv, "-o", job.output.capture])


def capture_command(job) -> None:
    """The user's command recorded (``tracecanary capture -o DIR -- CMD``), run in the
    source's ``cwd`` with its ``env``; DIR is absolute, since the command runs elsewhere."""
    argv = ["capture", "--timeout", job.params.timeout, "-o", Path(job.output.capture).resolve()]
    cli_process([*argv, "--", *job.params.command], cwd=job.params.cwd, env=dict(job.params.env))


def import_kineto(job) -> None:
    traces = sorted(str(p) for p in Path(job.input.capture).glob("rank*.json.gz"))
    cli(["import-kineto", *traces, "--jobs", job.threads, "-o", job.output.imported])


def _paths(value) -> list[str]:
    """A named input as a list of paths (Snakemake hands one path over as a string)."""
    return [value] if isinstance(value, str) else [str(v) for v in value]


def import_kineto_block(job) -> None:
    from tracecanary.rank_blocks import import_kineto_block as import_block

    import_block(_paths(job.input.traces), job.output.imported, job.threads)


def import_kineto_traces(job) -> None:
    from tracecanary.rank_blocks import gather_kineto_blocks

    gather_kineto_blocks(_paths(job.input.blocks), job.output.imported)


def import_flight_recorder(job) -> None:
    root = job.params.declare_root
    declared = [] if root is None else ["--declare-root", root]
    if job.params.declare_even_all_to_all:
        declared.append("--declare-even-all-to-all")
    cli(["import-flight-recorder", *_paths(job.input.dumps), *declared, "-o", job.output.imported])


def capture_set_header(job) -> None:
    from tracecanary.rank_blocks import write_capture_set_header

    write_capture_set_header(_paths(job.input.captures), job.output.header)


def ingest_capture_block(job) -> None:
    from tracecanary.memory import avoid_huge_pages
    from tracecanary.rank_blocks import check_capture_block

    avoid_huge_pages()  # the job's own process streams through memory (tracecanary.memory)

    captures = _paths(job.input.captures)
    checked = check_capture_block(
        job.input.header, captures, job.params.first_index, job.output.block
    )
    # where the job ran: on a cluster, the Slurm node (docs/cluster.md)
    node = os.environ.get("SLURMD_NODENAME") or platform.node()
    print(f"ingest_capture_block: {checked} rank file(s) checked on node {node}")


def same_host_calibration(job) -> None:
    from tracecanary.kineto.sources import write_same_host_calibration

    write_same_host_calibration(job.input.imported, job.output.calibration)


def calibrate_clocks(job) -> None:
    from tracecanary.canonical import write_json
    from tracecanary.clocks.derive import calibrate_captures

    write_json(job.output.calibration, calibrate_captures(list(job.input.captures)))


def merge(job) -> None:
    from tracecanary.merge import merge_captures

    blocks = getattr(job.input, "capture_blocks", None)
    if blocks is not None:  # kind captures: the blocks ingest_capture_block checked
        from tracecanary.rank_blocks import merge_capture_blocks

        merge_capture_blocks(_paths(blocks), job.output.merged, job.input.calibration)
        return
    captures = job.input.captures
    if isinstance(captures, str):
        path = Path(captures)  # a live capture's imported ranks, or one capture file
        captures = sorted(str(p) for p in path.glob("rank*.json")) if path.is_dir() else [captures]
    merge_captures(list(captures), job.output.merged, job.input.calibration)


def ingest(job) -> None:
    from tracecanary.ingest import ingest_files
    from tracecanary.memory import avoid_huge_pages

    avoid_huge_pages()  # the job's own process streams through memory (tracecanary.memory)

    trace = Path(job.input.trace)
    if trace.is_dir():  # kind command: the recorded run's merged trace (capture -- CMD)
        from tracecanary.autorecord.run import MERGED_NAME

        trace = trace / MERGED_NAME
    ingest_files([str(trace)], job.output.table)


def compile(job) -> None:  # noqa: A001 - named after its rule
    budget = job.wildcards.budget
    if budget == "lossless":
        mode = ["--lossless"]
    else:
        mode = ["--budget", ",".join(f"{field}={budget}" for field in BEHAVIOR_FIELDS)]
    cli(["compile", job.input.table, *mode, "-o", job.output.canary])


def _second_capture(job) -> list[str]:
    """``--second-capture TABLE`` where the source names a second capture of its program."""
    second = getattr(job.input, "second_capture", None)  # an input only where configured
    return ["--second-capture", second] if second else []


def _verify_behavior(job, canary: str, output: str, standard: str | None = None) -> int:
    # a rejected canary (exit 1) is a recorded result, not a failed job
    argv = ["verify-behavior", job.input.table, canary, "--backends", job.input.backends]
    argv += ["--standard", standard, *_second_capture(job)] if standard else []
    return cli([*argv, "--tolerances", job.input.tolerances, "-o", output], ok_codes=(0, 1))


def verify(job) -> None:
    _verify_behavior(job, job.input.canary, job.output.verification, job.params.standard)


def search(job) -> None:
    cli(
        [
            "search",
            job.input.table,
            "--budgets",
            job.params.budgets,
            "--order",
            job.params.order,
            "--backends",
            job.input.backends,
            "--tolerances",
            job.input.tolerances,
            "-o",
            job.output.canary,
            "--log",
            job.output.log,
            "--verification",
            job.output.verification,
            "--standard",
            job.params.standard,
            *_second_capture(job),
        ]
    )


def reduce_baseline(job) -> None:
    cli(["reduce", job.input.table, "--backends", job.input.backends, "-o", job.output.reduced])
    cli(["compile", job.output.reduced, "--lossless", "-o", job.output.canary])
    # the verification is expected to reject it: that rejection is the result
    _verify_behavior(job, job.output.canary, job.output.verification)


def baselines(job) -> None:
    argv = ["baselines", job.input.table, job.input.canary, "--backends", job.input.backends]
    argv += ["--tolerances", job.input.tolerances, "--markdown", job.output.markdown]
    cli([*argv, "-o", job.output.baselines])


def controls(job) -> None:
    argv = ["controls", job.input.table, job.input.canary, "--backends", job.input.backends]
    argv += ["--tolerances", job.input.tolerances, "--markdown", job.output.markdown]
    argv += ["--iterations", str(job.params.iterations), "--seed", str(job.params.seed)]
    cli([*argv, "-o", job.output.controls])


def search_summary(job) -> None:
    from tracecanary.campaign.summary import write_search_summary

    write_search_summary(
        job.output.markdown,
        list(job.input.logs),
        list(job.input.verifications),
        list(job.input.baselines),
        list(job.input.sidecars),
        list(job.input.canaries),
        sampling_baselines=list(job.input.sampling_baselines),
        html=job.output.html,
    )


def replay(job) -> None:
    argv = ["replay", job.input.program, "--backends", job.input.backends]
    cli([*argv, *(["--isolated"] if job.params.isolated else []), "-o", job.output.report])


def compare(job) -> None:
    cli(
        [
            "compare",
            job.input.report,
            job.input.report,
            "--config",
            f"{job.params.baseline}:{job.params.candidate}",
            "--threshold",
            job.params.thresholds,
            "-o",
            job.output.verdict,
            "--markdown",
            job.output.markdown,
        ],
        ok_codes=(0, 1),  # a tripped gate is the verdict, recorded
    )


def timeline(job) -> None:
    from tracecanary.campaign.timeline import write_timeline

    write_timeline(job.input.table, job.input.canary, job.output.plot, source=job.wildcards.source)


def perfetto(job) -> None:
    argv = ["export-perfetto", job.input.table, job.input.canary]
    if getattr(job.input, "attempt", None):
        argv += ["--attempt", job.input.attempt]
    cli([*argv, "--label", job.wildcards.source, "-o", job.output.trace])


def export_param(job) -> None:
    argv = ["export-param", job.input.program, "--execution", job.params.execution]
    cli([*argv, "-o", job.output.param])


def _replay_physical_one(job, program_dir: str, attempt: str) -> None:
    args = [
        "replay-physical",
        program_dir,
        "--backend",
        job.params.backend,
        "--nproc",
        job.resources.tasks // job.resources.nodes,
        "--physical-config",
        job.wildcards.config,
        "--physical-configs",
        job.input.physical_configs,
        "--warmup",
        job.params.warmup,
        "--iters",
        job.params.iters,
        "--timeout",
        job.params.timeout,
        "-o",
        attempt,
    ]
    _run_attempt(job, args)


def _run_attempt(job, args: list) -> None:
    """Run a rank-spawning subcommand (replay-physical, replay-param) for this job.

    Exit 1 = the attempt failed (a rank died, hung, or data was wrong): its archive is kept
    as evidence and the physical report excludes it; anything else is an error of this job."""
    if os.environ.get("SLURM_JOB_ID") and job.resources.nodes > 1:
        # inside a multi-node allocation: one launcher task per node, torchrun rendezvous on
        # the first node
        nodes = job.resources.nodes
        cmd = [job.resources.mpi, f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1"]
        cmd += [sys.executable, "-m", "tracecanary.physical.slurm_launch", *map(str, args)]
        code = subprocess.run(cmd, stdout=sys.stdout, stderr=sys.stderr).returncode
        if code not in (0, 1):
            raise SystemExit(f"{args[0]} exited {code}")
        return
    cli_process(args, ok_codes=(0, 1))


def replay_physical(job) -> None:
    """The canary and the full program back to back under one configuration; odd
    repetitions run the canary first, even ones the full program first (A B / B A), so
    drift does not favour either."""
    order = [(job.input.canary, job.output.canary), (job.input.full, job.output.full)]
    if int(job.wildcards.rep) % 2 == 0:
        order.reverse()
    for program_dir, attempt in order:
        _replay_physical_one(job, program_dir, attempt)


def export_param_upstream(job) -> None:
    from tracecanary.param.target import UPSTREAM_TARGET

    argv = ["export-param", job.input.program, "--execution", job.params.execution]
    cli([*argv, "--target", UPSTREAM_TARGET, "-o", job.output.param])


def replay_param(job) -> None:
    """The canary and the full program in upstream PARAM, A B / B A as replay_physical."""
    order = [(job.input.canary, job.output.canary), (job.input.full, job.output.full)]
    if int(job.wildcards.rep) % 2 == 0:
        order.reverse()
    for program_dir, attempt in order:
        nproc = job.resources.tasks // job.resources.nodes
        args = ["replay-param", program_dir, "--param", job.params.param]
        args += ["--backend", job.params.backend, "--nproc", nproc, "--iters", job.params.iters]
        args += ["--timeout", job.params.timeout, "-o", attempt]
        _run_attempt(job, args)


def physical_report(job) -> None:
    from tracecanary.campaign.html import write_markdown_page
    from tracecanary.physical.report import write_physical

    backends = list(getattr(job.input, "backends", []))
    write_physical(
        job.output.report,
        job.output.markdown,
        list(job.input.attempts),
        job.params.source,
        param_attempts=list(getattr(job.input, "param_attempts", [])),
        backends=backends[0] if backends else None,
        programs={"canary": job.input.canary, "full": job.input.full},
        max_runtime_ratio=job.params.max_runtime_ratio,
    )
    write_markdown_page(job.output.html, Path(job.output.markdown).read_text(encoding="utf-8"))


def calibrate_backends(job) -> None:
    ladders = list(job.input.ladders)
    for derived in getattr(job.input, "derived", []):  # sweep_derived: one folder per ladder
        doc = json.loads((Path(derived) / DERIVED_LADDERS).read_text(encoding="utf-8"))
        ladders += [str(Path(derived) / ladder["id"]) for ladder in doc["ladders"]]
    argv = ["calibrate-backends", *ladders]
    argv += ["--physical-configs", job.input.physical_configs, "--backend", job.params.backend]
    argv += [x for name in job.params.configs for x in ("--config", name)]
    argv += ["--program", job.input.canary, "--program", job.input.full]
    for name, attempt in zip(job.params.configs, job.input.dispatch, strict=True):
        argv += ["--dispatch", f"{name}={attempt}"]
    cli([*argv, "-o", job.output.backends])


def dispatch_program(job) -> None:
    """The configuration's dispatch calibration program (sim/dispatch.py)."""
    argv = ["dispatch-program", job.input.canary, job.input.full]
    argv += ["--config", job.wildcards.config, "--physical-configs", job.input.physical_configs]
    cli([*argv, "--backend", job.params.backend, "--force", "-o", job.output.program])


def replay_dispatch(job) -> None:
    """The calibration program replayed once under its configuration: a separate run,
    never one of the replays the simulator twin is judged on."""
    _replay_physical_one(job, job.input.program, job.output.attempt)


def physical_gate(job) -> None:
    """The physical report's gate verdict, written whatever it is, and shown in the log; a
    failed gate ends the run with its one line and exit 1 once every job has run
    (``campaign/physical_gate.py``, the Snakefile's ``onsuccess``)."""
    from tracecanary.campaign.physical_gate import write_verdict

    subject = f"source {job.wildcards.source}"
    for line in write_verdict(job.input.report, job.output.verdict, subject):
        print(line)


def sweep(job) -> None:
    spec = job.params.spec  # every field has its default from the config schema
    argv = ["sweep", "--collective", spec["collective"]]
    argv += ["--min-bytes", spec["min_bytes"], "--max-bytes", spec["max_bytes"]]
    argv += ["--factor", spec["factor"], "--warmup", spec["warmup"], "--iters", spec["iters"]]
    argv += ["--cycles", spec["cycles"], "--dtype", spec["dtype"], "--backend", job.params.backend]
    argv += ["--nproc", job.params.nproc, "--print-table", "-o", job.output.ladder]
    cli_process(argv, ok_codes=(0, 1))  # 1: a data-check failure, kept (alpha/beta drops those)


def sweep_derived(job) -> None:
    """derive-ladders over the source's two exports, then each ladder swept into the
    output folder (a data-check failure, exit 1, is kept as sweep keeps it)."""
    from tracecanary.physical.ladders import sweep_argv

    out = Path(job.output.ladders)
    out.mkdir(parents=True, exist_ok=True)
    argv = ["derive-ladders", job.input.canary, job.input.full, "--backend", job.params.backend]
    argv += ["--physical-configs", job.input.physical_configs]
    argv += [x for name in job.params.configs for x in ("--config", name)]
    argv += [x for key in job.params.covered for x in ("--covered", key)]
    argv += ["--warmup", job.params.warmup, "--iters", job.params.iters]
    cli([*argv, "--cycles", job.params.cycles, "-o", out / DERIVED_LADDERS])
    doc = json.loads((out / DERIVED_LADDERS).read_text(encoding="utf-8"))
    for ladder in doc["ladders"]:
        target = str(out / ladder["id"])
        cli_process(sweep_argv(ladder, backend=job.params.backend, output=target), ok_codes=(0, 1))


def stage_external(job) -> None:
    shutil.copyfile(job.input.original, job.output.staged)


def alphabeta(job) -> None:
    argv = ["alphabeta", job.input.ladder, "-o", job.output.fit]
    argv += ["--markdown", job.output.markdown, "--plot-dir", job.output.plots]
    if job.params.world_size:
        argv += ["--world-size", job.params.world_size]
    cli(argv)


def manifest(job) -> None:
    from tracecanary.campaign.manifest import build_manifest, write_manifest

    doc = build_manifest(
        campaign=job.wildcards.campaign,
        config=dict(job.config),
        config_files=list(job.params.config_files),
        provenance_paths=list(job.input.records),
    )
    write_manifest(job.output.manifest, doc)


def summary(job) -> None:
    from tracecanary.campaign.summary import write_campaign_summary

    write_campaign_summary(
        job.output.markdown,
        campaign=job.wildcards.campaign,
        manifest_path=job.input.manifest,
        sidecars=list(job.input.sidecars),
        search_logs=list(job.input.search_logs),
        canaries=list(job.input.canaries),
        source_reports=list(job.input.source_reports),
        baselines=list(job.input.baselines),
        physical=list(job.input.physical),
        alphabeta_fits=list(job.input.alphabeta_fits),
        verifications=list(job.input.verifications),
        verdicts=list(job.input.verdicts),
        timelines=list(job.input.timelines),
        perfetto=list(job.input.perfetto),
        sampling_baselines=list(job.input.sampling_baselines),
        controls=list(job.input.controls),
        captures=list(job.input.captures),
        html=job.output.html,
    )


STAGES: dict[str, Callable[[Any], None]] = {
    stage.__name__: stage
    for stage in (
        capture_kineto,
        capture_command,
        import_kineto,
        import_kineto_block,
        import_kineto_traces,
        import_flight_recorder,
        capture_set_header,
        ingest_capture_block,
        same_host_calibration,
        calibrate_clocks,
        merge,
        ingest,
        compile,
        verify,
        search,
        reduce_baseline,
        baselines,
        controls,
        search_summary,
        replay,
        compare,
        timeline,
        perfetto,
        export_param,
        replay_physical,
        export_param_upstream,
        replay_param,
        physical_report,
        calibrate_backends,
        dispatch_program,
        replay_dispatch,
        physical_gate,
        sweep,
        sweep_derived,
        stage_external,
        alphabeta,
        manifest,
        summary,
    )
}
