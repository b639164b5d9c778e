"""The campaign config schema: every section declared, no unknown key accepted (a typo is an
error, not a silently ignored section), and defaults written once, in the schema."""

from __future__ import annotations

import copy
import re
import subprocess
import sys

import pytest
import yaml
from conftest import REPO
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

SCHEMA = str(REPO / "schemas" / "config.schema.json")
MINIMAL = {"campaign": "c", "sources": [{"id": "s", "kind": "trace", "path": "t.json"}]}


def validated(config: dict) -> dict:
    config = copy.deepcopy(config)
    validate(config, SCHEMA)  # what the Snakefile does, defaults filled in (set_default)
    return config


@pytest.mark.parametrize(
    "config",
    [
        {**MINIMAL, "serach": {"budgets": "0,8"}},
        {**MINIMAL, "search": {"budget": "0,8"}},
        {**MINIMAL, "physical": {"backnd": "gloo"}},
        {**MINIMAL, "alphabeta": {"external": [{"id": "x", "path": "x.txt", "optinal": True}]}},
        {**MINIMAL, "alphabeta": {"extrenal": []}},
    ],
    ids=["top-level", "in-search", "in-physical", "in-alphabeta-ladder", "in-alphabeta"],
)
def test_config_schema_refuses_a_misspelt_key_at_every_level(config):
    with pytest.raises(WorkflowError, match="Additional properties are not allowed"):
        validated(config)


def test_config_schema_declares_the_alphabeta_section_with_its_defaults():
    ladder = {"id": "polaris", "path": "x.txt", "world_size": 8}
    config = validated({**MINIMAL, "alphabeta": {"external": [ladder]}})
    assert config["alphabeta"]["external"] == [{**ladder, "optional": False}]
    assert validated(MINIMAL)["alphabeta"] == {"external": []}


def test_schema_fills_every_default_the_rules_read():
    config = validated(MINIMAL)
    physical = config["physical"]
    assert (physical["backend"], physical["nproc"], physical["nodes"]) == ("gloo", 4, 1)
    assert physical["physical_configs"] == "config/physical.yaml"
    # noise first: the physical report's recommended number of rounds unless told
    from tracecanary.physical.report import RECOMMENDED_REPETITIONS

    assert physical["repetitions"] == RECOMMENDED_REPETITIONS == 5
    assert config["sources"][0]["nproc"] == 4 and config["sources"][0]["steps"] == 3
    sweep = validated({**MINIMAL, "physical": {"sweeps": [{"id": "w", "collective": "x"}]}})
    assert sweep["physical"]["sweeps"][0]["max_bytes"] == "4M"


COMMAND_DEFAULTS = {"cwd": ".", "env": {}, "timeout": 600}


def test_a_command_sources_defaults_fill_command_sources_only():
    sources = [
        {"id": "t", "kind": "trace", "path": "t.json"},
        {"id": "c", "kind": "captures", "captures": ["r0.json"], "calibration": "c.json"},
        {"id": "l", "kind": "live_capture", "calibration": "c.json"},
        {"id": "k", "kind": "kineto", "traces": ["k0.json"], "same_host": True},
        {"id": "f", "kind": "flight_recorder", "dumps": ["d0.json"], "same_host": True},
        {"id": "u", "kind": "command", "command": ["python", "p.py"], "program": "p.py"},
        {"id": "v", "kind": "command", "command": ["python", "p.py"], "program": "p.py",
         "cwd": "examples", "env": {"OMP_NUM_THREADS": "1"}, "timeout": 60},
    ]  # fmt: skip
    filled = {s["id"]: s for s in validated({**MINIMAL, "sources": sources})["sources"]}
    for sid in "tclkf":  # the command defaults mean nothing to these: none is added
        assert not COMMAND_DEFAULTS.keys() & filled[sid].keys(), filled[sid]
    assert {k: filled["u"][k] for k in COMMAND_DEFAULTS} == COMMAND_DEFAULTS
    assert (filled["v"]["cwd"], filled["v"]["env"], filled["v"]["timeout"]) == (
        "examples",
        {"OMP_NUM_THREADS": "1"},
        60,
    )


def test_workflow_and_stages_repeat_no_default_of_the_schema():
    # a default written as `.get("key", literal)` in a rule or stage would be a second copy
    fallback = re.compile(r"""\.get\(\s*["'][A-Za-z_]+["']\s*,\s*[^)\s]""")
    files = sorted((REPO / "workflow" / "rules").glob("*.smk"))
    files += [REPO / "src" / "tracecanary" / "campaign" / "stages.py"]
    offenders = [
        f"{path.name}: {line.strip()}"
        for path in files
        for line in path.read_text().splitlines()
        if fallback.search(line)
    ]
    assert offenders == []


def test_workflow_refuses_a_top_level_typo_before_running_anything(tmp_path):
    config = {**MINIMAL, "serach": {"budgets": "0,8"}}
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "typo.yaml").write_text(yaml.safe_dump(config))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory"]
    cmd += [str(tmp_path), "--configfile", "config/typo.yaml", "--cores", "1", "--dry-run"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode != 0
    assert "'serach' was unexpected" in run.stderr + run.stdout
    assert not (tmp_path / "results").exists()
