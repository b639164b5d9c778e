"""Launch the ranks of one physical run and turn what they wrote into an attempt archive."""

from __future__ import annotations

import shutil
from pathlib import Path

from tracecanary.errors import RunFailed
from tracecanary.physical import archive
from tracecanary.physical.environment import launcher_record
from tracecanary.physical.launch import Topology, launch


def launch_and_archive(
    worker_args: list[str],
    *,
    what: str,
    topology: Topology,
    staging: Path,
    timeout_s: float,
    env: dict,
    progress,
    out,
    attempt_base: dict,
    backend: str,
    world_size: int,
    schema,
    sort_keys: list[str],
) -> dict | None:
    """Run the workers; on the assembling node return the archive document (status
    complete or failed), elsewhere None (RunFailed if this node's ranks failed). An
    interrupted run leaves no archive and no staging behind."""
    try:
        result = launch(
            worker_args, topology, staging, timeout_s=timeout_s, env=env, progress=progress
        )
    except BaseException:
        if topology.assembles:
            shutil.rmtree(staging, ignore_errors=True)
        raise
    if not topology.assembles:
        if not result.ok:
            raise RunFailed(f"{what} failed on node {topology.node_rank}: {result.reason}")
        return None
    return archive.finalize_run(
        out,
        attempt_base,
        launch=result,
        launcher_env=launcher_record(backend),
        staging=staging,
        world_size=world_size,
        schema=schema,
        sort_keys=sort_keys,
    )
