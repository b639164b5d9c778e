"""Launch cost of a physical replay on one machine: ``physical.local_ranks`` (torch imported
once, the ranks forked) beside ``torchrun --standalone`` (torch imported by torchrun and
again by every rank), the same worker replaying the same program in the same run.

Each round runs both launchers once, in alternating order (local_ranks first in odd rounds),
for 2 and 4 gloo ranks: ``python -m tracecanary.physical.worker replay`` of the physical
sample program (every op kind, ``physical.samples.sample_program``), 1 warm-up and 2 timed
passes, wall seconds from the launcher's start to its exit (``launch.launch``'s
``wall_time_ns``; the command that validates and archives around it is the same for
both and left out). Figures: the median over the rounds and its 95% percentile bootstrap
interval (``physical.report.bootstrap_interval``), the ratio of the medians."""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from bench.common import REPO, WORK, row


def _launch_once(kind: str, nproc: int, program: Path, config: Path, work: Path) -> float:
    """Wall seconds of one launch of the replay worker by ``kind`` (``local_ranks`` or
    ``torchrun``); raises when the ranks did not all finish."""
    from tracecanary.physical import launch as launcher

    staging = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=work))
    args = ["replay", "--program", str(program), "--staging", str(staging), "--backend", "gloo",
            "--warmup", "1", "--iters", "2", "--pg-timeout", "300", "--config", str(config)]  # fmt: skip
    topology = launcher.Topology(nproc=nproc)
    chosen = launcher.launcher_command if kind == "local_ranks" else launcher.torchrun_command
    original = launcher.launcher_command
    launcher.launcher_command = chosen  # the one line that picks the launcher
    try:
        result = launcher.launch(args, topology, staging, timeout_s=600, env={})
    finally:
        launcher.launcher_command = original
    if not result.ok:
        raise RuntimeError(f"{kind} launch of {nproc} ranks failed: {result.reason}")
    return result.wall_time_ns / 1e9


def run(quick: bool) -> list[dict]:
    import json

    from tracecanary.physical.config import resolve_config
    from tracecanary.physical.report import bootstrap_interval
    from tracecanary.physical.samples import sample_program, write_program

    rounds = 3 if quick else 7
    work = WORK / "launch"
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for nproc in (2, 4):
        program = write_program(Path(tempfile.mkdtemp(dir=work)) / "param", sample_program(nproc))
        config = work / "native.json"
        config.write_text(
            json.dumps(resolve_config(REPO / "config" / "physical.yaml", "native", "gloo"))
        )
        walls: dict[str, list[float]] = {"local_ranks": [], "torchrun": []}
        for r in range(rounds):
            order = ("local_ranks", "torchrun") if r % 2 == 0 else ("torchrun", "local_ranks")
            for kind in order:
                walls[kind].append(_launch_once(kind, nproc, program, config, work))
        ours, theirs = (statistics.median(walls[k]) for k in ("local_ranks", "torchrun"))
        ci_ours, ci_theirs = (bootstrap_interval(walls[k]) for k in ("local_ranks", "torchrun"))
        rows.append(
            row(
                f"physical launch, {nproc} gloo ranks (local_ranks vs torchrun)",
                round(ours, 2),
                "s",
                "torchrun --standalone",
                round(theirs, 2),
                round(ours / theirs, 2),
                "< 1",
                ours < theirs,
                notes=f"{rounds} rounds alternating; 95% bootstrap interval of the median: "
                f"local_ranks {_fmt(ci_ours)} s, torchrun {_fmt(ci_theirs)} s; samples "
                f"local_ranks {[round(w, 2) for w in walls['local_ranks']]}, "
                f"torchrun {[round(w, 2) for w in walls['torchrun']]}",
            )
        )
    return rows


def _fmt(interval: list[float] | None) -> str:
    return "n/a (too few rounds)" if interval is None else f"[{interval[0]:.2f}, {interval[1]:.2f}]"
