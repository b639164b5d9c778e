"""What a ``tracecanary`` command sets in its own process: NumPy's BLAS loaded with one
thread, a cyclic garbage collector that does not rescan the start-up's imports, and an
exit that does not scan the command's objects once more.

``take_the_process()`` sets the first two, ``end_of_the_command()`` the third. They are
taken where the ``tracecanary`` command is the process: ``take_the_process`` first thing
in ``python -m tracecanary`` (before the command line's own imports) and again by
``cli.main`` run as the console script, ``end_of_the_command`` by ``cli.main`` when the
stage has returned; never where ``cli.main`` is called inside another program (a
workflow job, a test, a user's script), whose NumPy and collector are its own business:
the same rule as ``memory.avoid_huge_pages``. None changes a value a stage computes.

**One BLAS thread.** A NumPy wheel links OpenBLAS, which starts one thread per core when
it is loaded (at ``import numpy``) unless told otherwise. No stage of ours does BLAS work
large enough to share out (the alpha/beta fits take dot products of ladder-sized
vectors), so those threads only cost: measured on these 2-core machines, ``import numpy``
took 205 ms of CPU time with them and 107-114 ms without (median of 21 fresh processes
each), and 10-15 ms more wall time, in every command. A single-threaded BLAS also sums a
long dot product in one order on every machine, where a threaded one splits it by core
count. ``load_numpy_blas_single_threaded()`` makes the next ``import numpy`` load its
BLAS with one thread (``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS`` = 1) and puts the
environment back as it was as soon as NumPy is imported, so processes a stage starts
(torch ranks, workflow jobs) inherit the user's environment unchanged. It does nothing
where NumPy is already imported or where the user set any of those variables or
``OMP_NUM_THREADS``: their choice stands.

**The collector's threshold.** A command's start-up (NumPy, PyYAML, our modules) creates
some 40,000 container objects, nearly all of them modules' functions, classes and
tables that live as long as the process; with CPython's default youngest-generation
threshold (700 allocations) the collector scans them again and again: 55 young and 5
middle collections, 8 ms of a 200-ms replay of a small canary, to find some 500
unreachable objects.
``collect_garbage_rarely()`` raises that threshold to ``YOUNG_GENERATION_THRESHOLD``
(the older generations' stay CPython's): a small command then never collects, and a
large one still does, every 50,000 container allocations net. Large stages that build
millions of small containers already pause the collector for that block
(``compile.canary.gc_paused``).

**The exit.** When the interpreter exits it collects cyclic garbage over every object
still alive (the modules', the command's) before and while it tears the modules down.
``end_of_the_command()``, called when the stage has returned, freezes the collector's
generations (``gc.freeze``): those collections then skip every object the command made,
which dies with the process as before (atexit handlers, flushing and module teardown run
unchanged). Measured on these 2-core machines, a lossless compile of a 10-collective
trace: 189.6 ms against 153.7 ms (median of 21 fresh processes each, alternating).
"""

from __future__ import annotations

import gc
import importlib.util
import os
import sys

YOUNG_GENERATION_THRESHOLD = 50_000
SINGLE_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
USER_THREAD_VARIABLES = (*SINGLE_THREAD_VARIABLES, "OMP_NUM_THREADS")


class _NumpyWithOneThread:
    """A meta path finder that finds nothing itself: on the first search for ``numpy``
    it sets the variables, lets the other finders find NumPy, and wraps the loader so
    that the variables are removed again once NumPy's module has run (when its BLAS is
    loaded), then leaves ``sys.meta_path``."""

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001 - the finder protocol
        if name != "numpy":
            return None
        sys.meta_path.remove(self)
        for variable in SINGLE_THREAD_VARIABLES:
            os.environ[variable] = "1"
        try:
            spec = importlib.util.find_spec(name)
        except BaseException:
            _unset()
            raise
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            _unset()
            return spec
        spec.loader = _RestoringNumpyModule(spec.loader)
        return spec


class _RestoringNumpyModule:
    """NumPy's own loader, with the variables removed once its module has run."""

    def __init__(self, loader) -> None:  # noqa: ANN001 - any loader with exec_module
        self.loader = loader

    def create_module(self, spec):  # noqa: ANN001 - the loader protocol
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:  # noqa: ANN001 - the loader protocol
        try:
            self.loader.exec_module(module)
        finally:
            _unset()

    def __getattr__(self, name: str):  # get_resource_reader, is_package, ...
        return getattr(self.loader, name)


def _unset() -> None:
    for variable in SINGLE_THREAD_VARIABLES:
        os.environ.pop(variable, None)


def load_numpy_blas_single_threaded() -> bool:
    """Arrange that this process's first ``import numpy`` loads a one-thread BLAS (see the
    module's text). False, changing nothing, where NumPy is already imported or the user
    set a thread count."""
    if "numpy" in sys.modules or any(v in os.environ for v in USER_THREAD_VARIABLES):
        return False
    if not any(isinstance(finder, _NumpyWithOneThread) for finder in sys.meta_path):
        sys.meta_path.insert(0, _NumpyWithOneThread())
    return True


def collect_garbage_rarely() -> None:
    """Raise the cyclic collector's youngest-generation threshold to
    ``YOUNG_GENERATION_THRESHOLD`` (see the module's text); the older generations' stay."""
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, middle, oldest)


def take_the_process() -> None:
    """The start-up settings of this module (one BLAS thread, the collector's threshold)
    for a process that is a ``tracecanary`` command; calling it again changes nothing."""
    load_numpy_blas_single_threaded()
    collect_garbage_rarely()


def end_of_the_command() -> None:
    """The stage has returned and the process is about to exit: the exit's collections
    skip every object alive now (see the module's text)."""
    gc.freeze()
