"""A ``tracecanary`` command loads NumPy's BLAS with one thread, leaves the environment its
children inherit as the user set it, respects a thread count the user chose, raises the
collector's youngest threshold so that a small command never collects, and freezes the
collector when its stage has returned; ``cli.main`` called inside another program leaves
that program's NumPy and collector alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import small_trace, write_doc

from tracecanary.command_process import YOUNG_GENERATION_THRESHOLD

REPO = Path(__file__).resolve().parents[1]

PROBE = """
import gc, json, os, runpy, sys
{before}
sys.argv = ["tracecanary", "compile", sys.argv[1], "--lossless", "-o", sys.argv[2]]
collections = []  # (threshold in force, generation) of each collection in the command
gc.callbacks.append(
    lambda phase, info: phase == "start"
    and collections.append((gc.get_threshold()[0], info["generation"]))
)

def as_python_m_tracecanary():
    try:
        runpy.run_module("tracecanary", run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        return stop.code

def main(*args):
    from tracecanary.cli import main
    return main(*args)

code = {call}
print(json.dumps({{
    "code": code,
    "gc_threshold": list(gc.get_threshold()),
    "frozen": gc.get_freeze_count(),
    "collections": collections,
    "numpy": "numpy" in sys.modules,
    "threads": len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else None,
    "env": {{k: v for k, v in os.environ.items() if k.endswith("_NUM_THREADS")}},
    "finders": [type(f).__name__ for f in sys.meta_path],
}}))
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    env["PYTHONPATH"] = str(REPO / "src")
    env.update(extra)
    return env


def _probe(
    tmp_path: Path, *, before: str = "", call: str = "as_python_m_tracecanary()", **env: str
) -> dict:
    """What a compile of a small trace left in its process: ``call`` runs it as ``python
    -m tracecanary`` does (default), as the console script does (``main()``) or as a
    program calling ``main(argv)``."""
    script = PROBE.format(before=before, call=call)
    trace = write_doc(small_trace(), tmp_path / "trace.json")
    out = subprocess.run(
        [sys.executable, "-c", script, str(trace), str(tmp_path / "c.json")],
        capture_output=True, text=True, env=_env(**env), check=True,
    )  # fmt: skip
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["code"] == 0 and seen["numpy"], out.stderr  # the stage ran, on NumPy
    return seen


@pytest.fixture(scope="module")
def numpy_threads_by_default() -> int:
    """Threads of a fresh process after a plain ``import numpy`` here."""
    out = subprocess.run(
        [sys.executable, "-c", "import os, numpy; print(len(os.listdir('/proc/self/task')))"],
        capture_output=True, text=True, env=_env(), check=True,
    )  # fmt: skip
    threads = int(out.stdout)
    if threads < 2:
        pytest.skip(
            "NumPy's BLAS starts no thread of its own on this machine (one core, or a "
            "single-threaded BLAS): there is nothing for the command to prevent"
        )
    return threads


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
@pytest.mark.parametrize("call", ["as_python_m_tracecanary()", "main()"])
def test_a_command_loads_numpy_with_one_blas_thread_and_restores_the_environment(
    tmp_path, numpy_threads_by_default, call
):
    seen = _probe(tmp_path, call=call)
    assert seen["threads"] == 1
    assert seen["env"] == {}  # what a stage's child processes inherit: the user's own
    assert "_NumpyWithOneThread" not in seen["finders"]


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
@pytest.mark.parametrize("variable", ["OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"])
def test_a_thread_count_the_user_set_stands(tmp_path, numpy_threads_by_default, variable):
    seen = _probe(tmp_path, **{variable: str(numpy_threads_by_default)})
    assert seen["env"] == {variable: str(numpy_threads_by_default)}
    if variable != "MKL_NUM_THREADS":  # this NumPy's BLAS is OpenBLAS: MKL's variable is moot
        assert seen["threads"] == numpy_threads_by_default


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
def test_main_inside_another_program_leaves_its_numpy_alone(tmp_path, numpy_threads_by_default):
    seen = _probe(tmp_path, call="main(sys.argv[1:])")
    assert seen["threads"] == numpy_threads_by_default
    assert seen["env"] == {} and "_NumpyWithOneThread" not in seen["finders"]


def test_numpy_already_imported_is_left_as_it_is(tmp_path):
    seen = _probe(tmp_path, before="import numpy")
    assert seen["env"] == {} and "_NumpyWithOneThread" not in seen["finders"]


def test_a_small_command_never_collects_and_keeps_the_older_thresholds(tmp_path):
    import gc

    seen = _probe(tmp_path)
    assert seen["gc_threshold"] == [YOUNG_GENERATION_THRESHOLD, *gc.get_threshold()[1:]]
    raised = [c for c in seen["collections"] if c[0] == YOUNG_GENERATION_THRESHOLD]
    assert not raised
    assert len(seen["collections"]) <= 2  # at most while importing the set-up itself


def test_main_inside_another_program_leaves_its_collector_alone(tmp_path):
    import gc

    seen = _probe(tmp_path, call="main(sys.argv[1:])")
    assert seen["gc_threshold"] == list(gc.get_threshold())
    assert len(seen["collections"]) > 10  # under the program's own threshold


@pytest.mark.parametrize("call", ["as_python_m_tracecanary()", "main()"])
def test_a_command_freezes_the_collector_when_its_stage_has_returned(tmp_path, call):
    assert _probe(tmp_path, call=call)["frozen"] > 10_000


def test_main_inside_another_program_does_not_freeze_its_collector(tmp_path):
    assert _probe(tmp_path, call="main(sys.argv[1:])")["frozen"] == 0
