"""``tracecanary.memory.release_freed_memory``: freed arrays held in the heap leave the
process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import os
    import numpy as np
    from tracecanary.memory import release_freed_memory

    def rss_mib():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    big = np.ones(16 << 17)  # 16 MiB, mapped; freeing it raises glibc's mmap threshold
    del big
    before = rss_mib()
    blocks = [np.ones(1 << 19) for _ in range(48)]  # 48 blocks of 4 MiB, from the heap
    keep = blocks[-1]
    del blocks  # all freed but the last, which holds the heap's top
    held = rss_mib() - before
    release_freed_memory()
    print(held, rss_mib() - before)
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_arrays_freed_below_the_heaps_top_are_returned_by_the_release():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True)
    held, released = map(float, out.stdout.split())
    assert held > 100  # the 47 freed 4 MiB blocks stay resident in the heap
    assert released < 20


THP_SCRIPT = textwrap.dedent(
    """
    import subprocess, sys
    from tracecanary.memory import avoid_huge_pages

    def thp_enabled(status="/proc/self/status"):
        return next(l.split()[1] for l in open(status) if l.startswith("THP_enabled:"))

    before = thp_enabled()
    took = avoid_huge_pages()
    child = subprocess.run(["cat", "/proc/self/status"], capture_output=True, text=True)
    inherited = next(l.split()[1] for l in child.stdout.splitlines() if l.startswith("THP_enabled:"))
    print(before, took, thp_enabled(), inherited)
    """
)


def _reports_thp() -> bool:
    try:
        return any(line.startswith("THP_enabled:") for line in open("/proc/self/status"))
    except OSError:
        return False


@pytest.mark.skipif(not _reports_thp(), reason="no THP_enabled in /proc/self/status (Linux >= 5.0)")
def test_a_streaming_process_opts_itself_and_its_children_out_of_huge_pages():
    out = subprocess.run(
        [sys.executable, "-c", THP_SCRIPT], capture_output=True, text=True, check=True
    )
    assert out.stdout.split()[1:] == ["True", "0", "0"]  # (before: as the parent left it)


_THP_AFTER_CLI = textwrap.dedent(
    """
    import sys
    from tracecanary.cli import main

    sys.argv = ["tracecanary", *sys.argv[1:]]
    code = main()  # the command line: this process is the command
    status = open("/proc/self/status").read().split("THP_enabled:")[1].split()[0]
    print(code, status)
    """
)


@pytest.mark.skipif(not _reports_thp(), reason="no THP_enabled in /proc/self/status (Linux >= 5.0)")
def test_ingest_run_as_the_command_opts_its_process_out_of_huge_pages(tmp_path):
    from conftest import REPO

    trace = REPO / "resources" / "decode" / "rank0.jsonl.gz"
    out = tmp_path / "t.parquet"
    argv = ["ingest", str(trace), "-o", str(out)]
    run = subprocess.run(
        [sys.executable, "-c", _THP_AFTER_CLI, *argv], capture_output=True, text=True, check=True
    )
    assert run.stdout.split() == ["0", "0"] and out.exists()


@pytest.mark.skipif(not _reports_thp(), reason="no THP_enabled in /proc/self/status (Linux >= 5.0)")
def test_ingest_called_inside_another_program_leaves_its_process_as_it_was(tmp_path, run_cli):
    """``cli.main`` with arguments (a workflow job's in-process call, a test, a user's
    script) and the library function take no process-wide policy."""
    from conftest import REPO

    from tracecanary.ingest import ingest_files

    def thp() -> str:
        return open("/proc/self/status").read().split("THP_enabled:")[1].split()[0]

    before = thp()
    trace = REPO / "resources" / "decode" / "rank0.jsonl.gz"
    code, _, _ = run_cli("ingest", trace, "-o", tmp_path / "a.parquet")
    ingest_files([str(trace)], tmp_path / "b.parquet")
    assert code == 0 and thp() == before


def test_the_workflow_ingest_jobs_take_the_process_policy():
    """A workflow job's process is the job's own (Snakemake runs each script in a fresh
    interpreter), so its ingest stages take the policy themselves."""
    import inspect

    import tracecanary.campaign.stages as stages

    for stage in (stages.ingest, stages.ingest_capture_block):
        assert "avoid_huge_pages()" in inspect.getsource(stage)
