"""A command imports what its own path needs and nothing else: ``tracecanary STAGE``
imports that stage's command module alone (the top-level help still lists every stage),
a canary is replayed without pandas, Arrow, Parquet, ingest, matching or jsonschema, a
small JSON trace is compiled and verified without pandas, Arrow or Parquet, a gate
over two JSON reports needs neither pandas, Arrow nor jsonschema, and progress bars cost no import when nothing is drawn. Behaviour checks on ``sys.modules`` of a real run in a
fresh process, not timings (bench/bench_small.py measures those)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest
from conftest import REPO, small_trace, write_doc

from tracecanary.cli import build_parser, chosen_command_module, command_module_names
from tracecanary.defaults import default_file

# runs the CLI in this process, then records its exit code and every module it imported
PROBE = """
import json, sys
from tracecanary.cli import main
try:
    code = main(sys.argv[2:])
except SystemExit as exit:
    code = exit.code
open(sys.argv[1], "w").write(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""

NOT_FOR_A_CANARY_REPLAY = (
    "pandas",  # a canary's expansion is held as numpy columns (tests/test_program_columns.py)
    "pyarrow",
    "pyarrow.parquet",  # a canary is JSON: no Parquet read or written
    "tracecanary.ingest",
    "tracecanary.matching",
    "tracecanary.parquet_io",
    "tracecanary.clocks.calibration",
    "jsonschema",  # valid documents are accepted by formats.schema_subset
    "referencing",
    "numpy.ma",  # np.unique imports it (17 ms); TextColumn.factorized counts codes instead
)

# a JSON trace of a few collectives is read as numpy columns (trace_columns) and matched,
# compiled and verified on column arrays: the Arrow and pandas imports (about 0.5 s and
# 100 MB) are paid only by a large trace or a normalized table
NOT_FOR_A_SMALL_TRACE = (
    "pandas",
    "pyarrow",
    "pyarrow.parquet",
    "tracecanary.ingest",
    "tracecanary.parquet_io",
    "jsonschema",
    "numpy.ma",
)


def modules_after(tmp_path, *argv: str) -> set[str]:
    """The modules a fresh ``tracecanary ARGV`` process has imported when it ends (stderr
    is a pipe, so no progress is drawn); the run must exit 0."""
    record = tmp_path / "modules.json"
    run = subprocess.run(
        [sys.executable, "-c", PROBE, str(record), *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0 and record.is_file(), run.stderr[-2000:]
    result = json.loads(record.read_text())
    assert result["code"] == 0, run.stderr[-2000:]
    return set(result["modules"])


def command_modules(modules: set[str]) -> set[str]:
    return {m for m in modules if m.startswith("tracecanary.commands.")}


@pytest.fixture(scope="module")
def small_inputs(tmp_path_factory):
    """(trace, canary) of a 12-occurrence trace, the canary compiled losslessly."""
    folder = tmp_path_factory.mktemp("small")
    trace = write_doc(small_trace(4), folder / "trace.json")
    canary = folder / "canary.json"
    compiled = subprocess.run(
        [sys.executable, "-m", "tracecanary", "compile", str(trace), "--lossless"]
        + ["-o", str(canary)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert compiled.returncode == 0, compiled.stderr
    return trace, canary


def test_replay_of_a_small_canary_imports_its_own_command_alone_and_no_parquet_or_matching(
    tmp_path, small_inputs
):
    _, canary = small_inputs
    backends = str(default_file("backends.yaml"))
    modules = modules_after(
        tmp_path, "replay", str(canary), "--backends", backends, "-o", str(tmp_path / "r.json")
    )
    assert command_modules(modules) == {"tracecanary.commands.replay"}
    assert not modules & set(NOT_FOR_A_CANARY_REPLAY), sorted(
        modules & set(NOT_FOR_A_CANARY_REPLAY)
    )
    assert "tqdm" not in modules


def test_isolated_replay_of_a_small_canary_imports_no_pandas(tmp_path, small_inputs):
    """The nccl-tests-style signatures and their microbenchmark program are column arrays."""
    _, canary = small_inputs
    backends = str(default_file("backends.yaml"))
    modules = modules_after(
        tmp_path, "replay", str(canary), "--backends", backends, "--isolated",
        "-o", str(tmp_path / "r.json"),
    )  # fmt: skip
    assert not modules & set(NOT_FOR_A_CANARY_REPLAY), sorted(
        modules & set(NOT_FOR_A_CANARY_REPLAY)
    )


def test_lossless_compile_of_a_small_trace_imports_its_own_command_alone(tmp_path, small_inputs):
    trace, _ = small_inputs
    modules = modules_after(
        tmp_path, "compile", str(trace), "--lossless", "-o", str(tmp_path / "c.json")
    )
    assert command_modules(modules) == {"tracecanary.commands.compile"}
    assert "tqdm" not in modules
    assert not {m for m in modules if m.startswith("tracecanary.sim")}
    assert not modules & set(NOT_FOR_A_SMALL_TRACE), sorted(modules & set(NOT_FOR_A_SMALL_TRACE))
    assert "yaml" not in modules  # a lossless compile reads no configuration


def test_verify_behavior_of_a_small_trace_imports_its_own_command_alone(tmp_path, small_inputs):
    trace, canary = small_inputs
    modules = modules_after(
        tmp_path,
        "verify-behavior",
        str(trace),
        str(canary),
        "--backends",
        str(default_file("backends.yaml")),
        "-o",
        str(tmp_path / "v.json"),
    )
    assert command_modules(modules) == {"tracecanary.commands.verify_behavior"}
    assert "tqdm" not in modules
    assert not modules & set(NOT_FOR_A_SMALL_TRACE), sorted(modules & set(NOT_FOR_A_SMALL_TRACE))


# standard-library modules a small command does without: the import of shutil with zlib,
# bz2 and lzma (argparse asks the terminal's width through it: cli.terminal_columns) and of
# tempfile with random (canonical makes its temporaries). hashlib is not among them: every
# digest is hashlib's SHA-256, whose ~3 ms load is not worth a second, hand-picked
# implementation. PyYAML (libyaml's parser) is imported where a command reads a
# configuration, and only there
NOT_AT_A_SMALL_COMMANDS_START = ("shutil", "tempfile", "random")


@pytest.mark.parametrize("stage", ["compile", "replay", "verify-behavior"])
def test_a_small_command_imports_no_shutil_or_tempfile(tmp_path, small_inputs, stage):
    """Run without site hooks (``-S``, this interpreter's search path given explicitly):
    a sandbox's .pth files import some of these before any code of ours runs."""
    trace, canary = small_inputs
    backends = ["--backends", str(default_file("backends.yaml"))]
    argv = {
        "compile": ["compile", str(trace), "--lossless"],
        "replay": ["replay", str(canary), *backends],
        "verify-behavior": ["verify-behavior", str(trace), str(canary), *backends],
    }[stage] + ["-o", str(tmp_path / "out.json")]
    record = tmp_path / "modules.json"
    run = subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path[:0] = {sys.path!r}\n" + PROBE]
        + [str(record), *argv],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0 and record.is_file(), run.stderr[-2000:]
    result = json.loads(record.read_text())
    assert result["code"] == 0, run.stderr[-2000:]
    imported = set(result["modules"]) & set(NOT_AT_A_SMALL_COMMANDS_START)
    assert not imported, sorted(imported)
    assert ("yaml" in result["modules"]) == (stage != "compile")  # read with the backends


def test_compare_of_two_replay_reports_imports_neither_pandas_nor_pyarrow(tmp_path, small_inputs):
    _, canary = small_inputs
    report = str(tmp_path / "report.json")
    backends = str(default_file("backends.yaml"))
    modules_after(tmp_path, "replay", str(canary), "--backends", backends, "-o", report)
    modules = modules_after(tmp_path, "compare", report, report, "-o", str(tmp_path / "v.json"))
    assert command_modules(modules) == {"tracecanary.commands.compare"}
    assert not {"pandas", "pyarrow", "jsonschema"} & modules


def test_export_param_of_a_small_canary_imports_neither_pandas_nor_pyarrow(tmp_path, small_inputs):
    _, canary = small_inputs
    modules = modules_after(tmp_path, "export-param", str(canary), "-o", str(tmp_path / "param"))
    assert command_modules(modules) == {"tracecanary.commands.export_param"}
    assert not {"pandas", "pyarrow", "jsonschema"} & modules, sorted(
        {"pandas", "pyarrow", "jsonschema"} & modules
    )


def test_reduce_of_a_small_trace_imports_neither_pandas_nor_numpy_ma(tmp_path, small_inputs):
    """The ddmin baseline's reduced trace is counted and written through the Program's
    column accessors (``np.unique`` would import numpy.ma: 17 ms)."""
    trace, _ = small_inputs
    backends = str(default_file("backends.yaml"))
    modules = modules_after(
        tmp_path, "reduce", str(trace), "--backends", backends, "-o", str(tmp_path / "r.json")
    )
    assert command_modules(modules) == {"tracecanary.commands.reduce"}
    assert not {"pandas", "pyarrow", "numpy.ma"} & modules, sorted(
        {"pandas", "pyarrow", "numpy.ma"} & modules
    )


def test_a_stage_help_imports_that_stage_alone(tmp_path):
    modules = modules_after(tmp_path, "verify-behavior", "--help")
    assert command_modules(modules) == {"tracecanary.commands.verify_behavior"}


def test_top_level_help_lists_every_stage_with_its_help():
    stages = next(
        action
        for action in build_parser()._actions  # noqa: SLF001
        if isinstance(action, argparse._SubParsersAction)  # noqa: SLF001
    )
    listed = {choice.dest: choice.help for choice in stages._choices_actions}  # noqa: SLF001
    assert set(listed) == {name.replace("_", "-") for name in command_module_names()}
    shown = subprocess.run(
        [sys.executable, "-m", "tracecanary", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "1000"},  # no help text wrapped
        check=True,
    ).stdout
    words = " ".join(shown.split())
    for stage, text in listed.items():
        assert " ".join([stage, *text.split()]) in words, stage


def test_unknown_stage_is_refused_with_every_stage_named(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "tracecanary", "no-such-stage"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 2
    assert "invalid choice: 'no-such-stage'" in run.stderr
    assert all(name.replace("_", "-") in run.stderr for name in command_module_names())


@pytest.mark.parametrize(
    ("argv", "module"),
    [
        (["replay", "x.json"], "replay"),
        (["verify-behavior", "a", "b"], "verify_behavior"),
        (["verify_behavior", "a", "b"], None),  # stages are spelt with dashes only
        (["--help"], None),
        (["--version"], None),
        ([], None),
        (["no-such-stage"], None),
    ],
)
def test_the_stage_module_is_chosen_from_the_first_word_only(argv, module):
    assert chosen_command_module(argv) == module


def test_the_launcher_side_of_a_physical_run_imports_no_torch():
    # torch takes seconds to import; only the ranks (and an nccl availability check) need it
    probe = """
import sys
import tracecanary.physical.replay, tracecanary.physical.sweep, tracecanary.physical.run
import tracecanary.param.results, tracecanary.param.upstream, tracecanary.param.export
from tracecanary.physical.environment import launcher_record
record = launcher_record("gloo")
print(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
print(record["torch"]["version"])
"""
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    imported, version = run.stdout.splitlines()
    assert imported == "[]"
    import torch

    assert version == torch.__version__
