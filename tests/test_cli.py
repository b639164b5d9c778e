"""The CLI itself: discovery of every stage, fast startup, help for every option with its
default, one-line errors, and every document it writes valid against its schema."""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, SHARED

from tracecanary.cli import build_parser, main
from tracecanary.formats.ids import FORMAT_SCHEMAS
from tracecanary.formats.schemas import validate
from tracecanary.formats.skeleton import skeleton
from tracecanary.formats.vocab import LADDER_COLLECTIVES

LADDER = SHARED / "nccltests_samples" / "polaris_a100_8rank_all_reduce.txt"


def _parsers() -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """(command words, parser) of every sub-command at any depth (``manifest verify``)."""
    found = []
    stack = [((), build_parser())]
    while stack:
        words, parser = stack.pop()
        for action in parser._actions:  # noqa: SLF001
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                for name, child in action.choices.items():
                    found.append(((*words, name), child))
                    stack.append(((*words, name), child))
    return sorted(found, key=lambda item: item[0])


def _arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    skip = (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)  # noqa: SLF001
    return [a for a in parser._actions if not isinstance(a, skip)]  # noqa: SLF001


def test_cli_startup_imports_no_heavy_libraries():
    """Building the parser must not import torch, numpy, pandas, pyarrow, matplotlib,
    scipy or snakemake: every `tracecanary` call would pay for stages it does not run."""
    heavy = ("torch", "numpy", "pandas", "pyarrow", "matplotlib", "snakemake", "scipy")
    code = (
        "import sys; from tracecanary.cli import build_parser; build_parser(); "
        f"print(','.join(m for m in {heavy!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert out.stdout.strip() == "", f"imported at startup: {out.stdout.strip()}"


def test_a_stage_parser_and_its_help_import_no_shutil():
    """argparse's formatter imports shutil (and zlib, bz2, lzma) to ask the terminal's
    width; ours asks it without. Run without site hooks (``-S``): a sandbox's own .pth
    files import shutil before any code of ours runs."""
    code = (
        f"import sys; sys.path.insert(0, {str(REPO / 'src')!r}); "
        "from tracecanary.cli import build_parser\n"
        "for stage in ('compile', 'replay', 'verify_behavior'):\n"
        "    build_parser(stage).format_help()\n"
        "print('shutil' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("columns", [None, "37", "250", "0", "-5", "wide"])
def test_the_help_width_is_the_one_shutil_gives(monkeypatch, columns):
    from tracecanary.cli import terminal_columns

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert terminal_columns() == shutil.get_terminal_size().columns


def test_every_command_module_registers_exactly_its_subcommand():
    import tracecanary.commands as commands

    top = {words[0] for words, _ in _parsers() if len(words) == 1}
    registered: dict[str, str] = {}
    for info in pkgutil.iter_modules(commands.__path__):
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(f"tracecanary.commands.{info.name}").register(sub)
        assert len(sub.choices) == 1, info.name
        (name,) = sub.choices
        assert name == info.name.replace("_", "-"), (info.name, name)
        registered[name] = info.name
    assert set(registered) == top
    assert len(top) >= 21


PARSERS = _parsers()
PARSER_IDS = [" ".join(words) for words, _ in PARSERS]


@pytest.mark.parametrize("words", [words for words, _ in PARSERS], ids=PARSER_IDS)
def test_help_of_every_subcommand_exits_0_with_usage(words, capsys):
    with pytest.raises(SystemExit) as done:
        main([*words, "--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: tracecanary {' '.join(words)}")


@pytest.mark.parametrize(("words", "parser"), PARSERS, ids=PARSER_IDS)
def test_every_argument_has_help_and_every_optional_value_shows_its_default(words, parser):
    formatter = parser._get_formatter()  # noqa: SLF001
    problems = []
    for action in _arguments(parser):
        name = "/".join(action.option_strings) or action.dest
        shown = formatter._expand_help(action) if action.help else ""  # noqa: SLF001
        if not shown.strip():
            problems.append(f"{name}: no help")
        elif (
            action.option_strings
            and action.nargs != 0
            and not action.required
            and "default" not in shown
        ):
            problems.append(f"{name}: help does not show the default: {shown!r}")
    assert problems == []


def test_defaults_are_shown_from_the_parser_not_rewritten_in_help(capsys):
    with pytest.raises(SystemExit):
        main(["alphabeta", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "withhold beta below this R2 (default: 0.9)" in out


def test_ladder_collective_choices_are_the_shared_vocabulary():
    parsers = dict(_parsers())
    for words in (("alphabeta",), ("sweep",)):
        action = next(a for a in _arguments(parsers[words]) if "--collective" in a.option_strings)
        assert tuple(action.choices) == LADDER_COLLECTIVES, words


def test_unknown_ladder_collective_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as done:
        main(["alphabeta", str(LADDER), "--collective", "hypercube", "-o", "fit.json"])
    assert done.value.code == 2
    assert "invalid choice: 'hypercube'" in capsys.readouterr().err


def test_missing_input_file_is_one_line_exit_2(run_cli, tmp_path):
    code, _, err = run_cli("ingest", tmp_path / "nope.json", "-o", tmp_path / "o.parquet")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no such file" in err


# --- every document the CLI writes validates against its schema ------------------------


def _run_pipeline(run_cli, work: Path) -> None:
    """Every stage that writes a document without launching processes, on small shipped or
    synthesized inputs (capture, sweeps and physical replays validate theirs in their own
    tests: test_capture, test_physical_*, test_alphabeta_sweep)."""
    shutil.copy(REPO / "resources" / "traces" / "adversarial.json", work / "t.json")

    def ok(*argv: str) -> None:
        code, _, err = run_cli(*argv)
        assert code == 0, (argv, err)

    ok("synth", "decode", "-o", "dec", "--events-per-rank", "300", "--format", "json")
    ranks = sorted(str(p) for p in (work / "dec").glob("rank*.json"))
    ok("merge", *ranks, "--calibration", "dec/calibration.json", "-o", "merged.json")
    ok("calibrate-clocks", *ranks, "-o", "derived-calibration.json")
    ok("ingest", "t.json", "-o", "t.parquet")
    ok("compile", "t.json", "--lossless", "-o", "lossless.json")
    ok("compile", "t.json", "--budget", "gap=5us,latency=5us", "-o", "bounded.json")
    ok("verify-behavior", "t.json", "lossless.json", "-o", "verification.json")
    ok("baselines", "t.json", "lossless.json", "-o", "baselines.json")
    ok("search", "t.json", "--budgets", "0,1", "-o", "searched.json", "--log", "search.json",
       "--verification", "searched-verification.json")  # fmt: skip
    ok("reduce", "t.json", "-o", "reduced.json")
    ok("expand", "searched.json", "--executed", "-o", "expanded.json")
    ok("replay", "t.json", "-o", "report.json")
    ok("compare", "report.json", "report.json", "-o", "verdict.json")
    ok("export-param", "searched.json", "-o", "param")
    if LADDER.is_file():
        ok("alphabeta", str(LADDER), "-o", "fit.json")
        ok("calibrate-backends", f"ring={LADDER}", "-o", "calibrated-backends.yaml")


def test_every_document_the_cli_writes_validates_against_its_schema(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _run_pipeline(run_cli, tmp_path)
    seen: dict[str, list[str]] = {}
    written = sorted([*tmp_path.rglob("*.json"), *tmp_path.glob("*.yaml")])
    for path in written:
        rel = str(path.relative_to(tmp_path))
        text = path.read_text(encoding="utf-8")
        doc = yaml.safe_load(text) if path.suffix == ".yaml" else json.loads(text)
        if isinstance(doc, list):  # PARAM's own per-rank trace format, not ours
            assert path.parent.name == "param" and path.stem.isdigit(), rel
            continue
        fmt = doc.get("format")
        assert fmt in FORMAT_SCHEMAS, f"{rel}: format {fmt!r} has no schema"
        schema = FORMAT_SCHEMAS[fmt]
        validate(skeleton(doc), schema, file=rel)
        seen.setdefault(schema, []).append(rel)
    expected = {
        "trace", "calibration", "ingest-meta", "canary", "verification", "search-log",
        "report", "verdict", "param-export", "baselines",
    }  # fmt: skip
    if LADDER.is_file():
        expected |= {"alphabeta", "backends"}
    assert expected <= set(seen), sorted(expected - set(seen))
