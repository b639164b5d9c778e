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
