"""A user's program given only as a command (`kind: command`) runs as a campaign source:
the README's example, run as written in a copy of the checkout (real Snakemake, the real
example DDP program on 2 gloo ranks), recorded under `tracecanary capture -- CMD` with the
command, directory and environment in the capture's provenance and the program hashed."""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import subprocess
import sys

import pytest
from conftest import REPO
from test_workflow_readme import copy_checkout

README = (REPO / "README.md").read_text(encoding="utf-8")
CONFIG = "config/user_program.yaml"


def readme_config_block() -> str:
    """The YAML block that follows the README's mention of ``config/user_program.yaml``."""
    after = README.split(f"`{CONFIG}`:", 1)[1]
    return after.split("```yaml\n", 1)[1].split("```", 1)[0]


def readme_command() -> list[str]:
    (line,) = [
        ln.strip() for ln in README.splitlines() if ln.startswith("snakemake ") and CONFIG in ln
    ]
    return shlex.split(line)


def test_readme_shows_the_shipped_command_source_config_as_it_is():
    assert readme_config_block() == (REPO / CONFIG).read_text(encoding="utf-8")


def test_config_schema_refuses_a_command_source_without_its_program(tmp_path):
    checkout = copy_checkout(tmp_path / "checkout")
    config = (checkout / CONFIG).read_text().replace("    program: ", "    # program: ")
    (checkout / "config" / "bad.yaml").write_text(config)
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", "--dry-run"]
    run = subprocess.run(
        [*cmd, "--configfile", "config/bad.yaml"],
        cwd=checkout, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode != 0
    assert "'program' is a required property" in run.stdout + run.stderr


@pytest.mark.slow
def test_readme_command_source_example_runs_as_written_and_records_the_command(tmp_path):
    checkout = copy_checkout(tmp_path / "checkout")
    shutil.copytree(REPO / "examples", checkout / "examples")
    argv = readme_command()
    assert argv[0] == "snakemake"
    run = subprocess.run(
        [sys.executable, "-m", *argv], cwd=checkout, capture_output=True, text=True, timeout=900
    )
    assert run.returncode == 0, run.stderr[-3000:]
    results = checkout / "results" / "user_program"
    capture = results / "capture_command" / "ddp_train"
    recorded = json.loads((capture / "capture.json").read_text())
    assert recorded["command"] == ["python", "ddp_train.py", "20", "--layers", "4"]
    assert recorded["ranks"] == 2 and recorded["merged"]["collectives"] > 0
    prov = json.loads((results / "provenance/capture_command/ddp_train.json").read_text())
    params = prov["predicate"]["parameters"]
    assert params["command"] == recorded["command"]
    assert params["cwd"] == "examples/user_programs"
    assert params["env"] == {"OMP_NUM_THREADS": "1"}
    program = checkout / "examples/user_programs/ddp_train.py"
    digest = hashlib.sha256(program.read_bytes()).hexdigest()
    assert digest in json.dumps(prov)  # the program file, bound by its digest
    assert prov["predicate"]["deterministic"] is False  # evidence, never re-run
    summary = (results / "summary.md").read_text()
    assert "| ddp_train |" in summary
    manifest = json.loads((results / "manifest.json").read_text())
    recorded_paths = {e["path"] for e in manifest["evidence"] if e.get("kind") == "recorded"}
    assert "results/user_program/capture_command/ddp_train" in recorded_paths
    # a reviewer regenerates from the evidence: the recording is kept, not re-run (the
    # program need not be there), and everything derived from it comes out bit for bit
    regen = subprocess.run(
        [sys.executable, "-m", "tracecanary", "manifest", "regenerate",
         "results/user_program/manifest.json", "--workdir", str(tmp_path / "regen")],
        cwd=checkout, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert regen.returncode == 0, regen.stdout[-2000:] + regen.stderr[-2000:]
    # a manifest whose evidence leaves the recording out would have the command run: refused
    from tracecanary.campaign.operations import _manifest_root

    manifest["evidence"] = [e for e in manifest["evidence"] if e.get("kind") != "recorded"]
    manifest["root_sha256"] = _manifest_root(manifest)
    crafted = results / "crafted.json"
    crafted.write_text(json.dumps(manifest))
    regen = subprocess.run(
        [sys.executable, "-m", "tracecanary", "manifest", "regenerate", str(crafted),
         "--workdir", str(tmp_path / "regen2")],
        cwd=checkout, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert regen.returncode == 2, regen.stdout[-2000:] + regen.stderr[-2000:]
    assert "source 'ddp_train' runs a command (kind command)" in regen.stderr
    assert not (tmp_path / "regen2").exists()
