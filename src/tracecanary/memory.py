"""Handing memory the process has freed back to the operating system.

The stages allocate and free arrays of a trace's length (tens to hundreds of MiB each).
glibc's malloc serves a block below its mmap threshold from its heap, and raises that
threshold (up to 32 MiB) each time a larger mapped block is freed; freed heap blocks stay
resident until a trim. Over a pipeline in one process (the bench's child, a campaign
stage runner) that left a stage's freed arrays counted in the next stage's peak.

``release_freed_memory()`` (called before the memory-heavy stages: compile, behavior
verification, and between behavior verification's steps) trims the heap
(``malloc_trim``): the free pages anywhere in it go back to the operating system; so does
Arrow's pool's unused memory. It changes no value a stage computes and takes milliseconds.
(Fixing the mmap threshold low instead, so that every large block is its own mapping,
gave the same peaks at 10M rank events and cost a third more time in compile and verify:
every fresh mapping is page-faulted in again.) Where the C library is not glibc (no
``malloc_trim``) it does nothing.

``avoid_huge_pages()`` opts a process that streams through memory (ingest, whose every
chunk allocates and frees tens of MiB) out of transparent huge pages. Where the kernel
backs every anonymous mapping with 2 MiB pages (``transparent_hugepage/enabled`` =
always), each first touch zeroes 2 MiB and may stall for compaction; measured on these
2-core machines, a 1M-event ingest in a fresh process spent 0.8-0.9 s of system time
with them and 0.4 s without (wall 1.63-1.74 s vs 1.28-1.38 s, four alternating pairs),
with the same peak RSS. It is taken where ingest runs as its own process
(``tracecanary ingest`` run as a command, the workflow's ingest jobs), never by a library
function nor by ``cli.main`` called inside another program: it is a property of the
whole process and the processes it starts.
"""

from __future__ import annotations

import ctypes
import functools
import sys


@functools.cache
def _libc():
    """The C library if it is glibc (has ``malloc_trim``), else None. Looked up among the
    symbols the process already has (``dlopen(NULL)``), not by ``ctypes.util.find_library``,
    whose import and ``ldconfig`` run cost 15 ms of every small compile."""
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None


def release_freed_memory() -> None:
    """Return the heap's free pages to the operating system (see module doc; a no-op
    without glibc), and Arrow's default memory pool's unused memory (Arrow text columns
    are allocated there, and its allocator keeps freed pages for reuse; not imported
    for this: a process that never imported pyarrow has nothing in its pool)."""
    pa = sys.modules.get("pyarrow")
    if pa is not None:
        pa.default_memory_pool().release_unused()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


_PR_SET_THP_DISABLE = 41  # linux/prctl.h


def avoid_huge_pages() -> bool:
    """Opt this process (and the processes it starts) out of transparent huge pages
    (Linux ``prctl(PR_SET_THP_DISABLE)``; see the module doc). True where it took
    effect; elsewhere (no Linux prctl) nothing changes and it is False. Changes no
    value any stage computes."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
