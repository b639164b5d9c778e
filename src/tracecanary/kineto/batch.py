"""Import several ranks' Kineto traces at once, in worker processes.

Guarantees: the documents come back in input order and are exactly what
``import_kineto_file`` returns for each file alone; with several failing inputs the
error raised is the first failing input's (input order), as in a serial import, whole
(file, record, field); ``jobs=1`` runs in this process. Each worker holds one parsed
trace at a time, so memory grows with ``jobs``, not with the number of inputs.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor

from tracecanary.errors import TraceCanaryError
from tracecanary.kineto.importer import import_kineto_file
from tracecanary.progress import progress


def default_jobs(inputs: int) -> int:
    """One worker per input, at most one per usable CPU."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(inputs, cpus))


def _import_one(path: str, rank: int | None, world_size: int | None) -> dict | TraceCanaryError:
    try:
        return import_kineto_file(path, rank=rank, world_size=world_size)
    except TraceCanaryError as err:  # returned, so the caller picks the first in order
        return err


def import_kineto_files(
    paths: list[str],
    *,
    rank: int | None = None,
    jobs: int | None = None,
    world_size: int | None = None,
) -> list[dict]:
    """``import_kineto_file`` of every path (see module docstring); a progress bar per
    file on a terminal (``tracecanary.progress``)."""
    jobs = default_jobs(len(paths)) if jobs is None else max(1, min(jobs, len(paths)))
    if jobs == 1:
        return [
            import_kineto_file(p, rank=rank, world_size=world_size)
            for p in progress(paths, desc="import", unit="file")
        ]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        done = pool.map(_import_one, paths, [rank] * len(paths), [world_size] * len(paths))
        results = list(progress(done, total=len(paths), desc="import", unit="file"))
    for result in results:
        if isinstance(result, TraceCanaryError):
            raise result
    return results
