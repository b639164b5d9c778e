"""Hostile campaign configs (issue 17, defects 1 and 2), in real Snakemake runs.

A config is data: a config enabling yte evaluation is refused on its raw YAML before
Snakemake reads it; every config value that becomes a path component is an identifier;
the store stays inside the working directory; a manifest's evidence must match before
``regenerate`` or ``unpack`` runs or writes anything.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from conftest import REPO, make_tiny_campaign, run_snakemake
from hostile_campaign import bind

from tracecanary.campaign.config_check import (
    check_paths_inside,
    check_store_inside,
    refuse_evaluating_config,
)
from tracecanary.errors import InputError

pytestmark = pytest.mark.slow

# what an adversarial review put in an archive's config: run a command on the reviewer's
# machine while Snakemake reads the file
YTE_PAYLOAD = '__use_yte__: true\n_x: ?__import__("os").system("touch pwned.txt") and None\n'


@pytest.fixture
def campaign_dir(tmp_path):
    workdir = tmp_path / "lab"
    workdir.mkdir()
    make_tiny_campaign(workdir, with_alphabeta=False)
    return workdir


def _set_config(workdir, change) -> None:
    path = workdir / "config" / "tiny.yaml"
    config = yaml.safe_load(path.read_text())
    change(config)
    path.write_text(yaml.safe_dump(config))


def _outputs(run) -> str:
    return run.stdout + run.stderr


@pytest.mark.parametrize(
    ("change", "value", "key"),
    [
        (
            lambda c: c.update(physical={"sources": ["decode"], "configs": ["../../../victim"]}),
            "../../../victim",
            "['physical']['configs'][0]",
        ),
        (
            lambda c: c.update(
                physical={"sources": [{"id": "decode", "configs": ["../../../x_escape"]}]}
            ),
            "../../../x_escape",
            "['physical']['sources'][0]",
        ),
        (
            lambda c: c.update(physical={"sweeps": [{"id": "..", "collective": "all_reduce"}]}),
            "..",
            "['physical']['sweeps'][0]['id']",
        ),
        (
            lambda c: c.update(alphabeta={"external": [{"id": "../x", "path": "r.txt"}]}),
            "../x",
            "['alphabeta']['external'][0]['id']",
        ),
        (lambda c: c.update(reduce={"sources": ["../x"]}), "../x", "['reduce']['sources'][0]"),
        (lambda c: c["compile"].update(budgets=["../8us"]), "../8us", "['compile']['budgets'][0]"),
        (lambda c: c["sources"][0].update(id="../victim"), "../victim", "['sources'][0]['id']"),
        (lambda c: c.update(campaign=".."), "..", "['campaign']"),
    ],
    ids=[
        "physical-config",
        "physical-source-config",
        "sweep-id-dotdot",
        "ladder-id",
        "reduce-source",
        "budget-label",
        "source-id",
        "campaign-dotdot",
    ],
)
def test_snakemake_refuses_a_config_value_that_would_become_a_path_outside_the_campaign(
    campaign_dir, change, value, key
):
    victim = campaign_dir.parent / "victim"
    (victim / "rep1").mkdir(parents=True)
    (victim / "rep1" / "precious.txt").write_text("keep me")
    _set_config(campaign_dir, change)
    run = run_snakemake(campaign_dir, "-n")
    assert run.returncode != 0
    assert repr(value) in _outputs(run) and f"On instance{key}" in _outputs(run), _outputs(run)[
        -2000:
    ]
    assert (victim / "rep1" / "precious.txt").read_text() == "keep me"
    assert not (campaign_dir / "results").exists()


@pytest.mark.parametrize("name", ["../../../x_escape", "a.."])
def test_snakemake_refuses_a_physical_configurations_file_naming_a_configuration_unsafely(
    campaign_dir, name
):
    """The physical configurations file is checked before any job runs: a configuration
    name is the config schema's identifier (issue 41, R2)."""
    physical = yaml.safe_load((REPO / "config" / "physical.yaml").read_text())
    physical["configs"][name] = {"mode": "native", "env": {}}
    (campaign_dir / "config" / "physical.yaml").write_text(yaml.safe_dump(physical))
    _set_config(campaign_dir, lambda c: c.update(physical={"sources": ["decode"]}))
    before = sorted(p.relative_to(campaign_dir) for p in campaign_dir.rglob("*"))
    run = run_snakemake(campaign_dir, "-n")
    assert run.returncode != 0
    assert f"config/physical.yaml: field configs: {name!r} does not match" in _outputs(run), (
        _outputs(run)[-2000:]
    )
    after = sorted(p.relative_to(campaign_dir) for p in campaign_dir.rglob("*"))
    assert [p for p in after if p not in before and p.parts[0] != ".snakemake"] == []


def test_snakemake_refuses_a_physical_configuration_the_file_does_not_define(campaign_dir):
    (campaign_dir / "config" / "physical.yaml").write_bytes(
        (REPO / "config" / "physical.yaml").read_bytes()
    )
    _set_config(
        campaign_dir,
        lambda c: c.update(
            physical={"sources": [{"id": "decode", "configs": ["native", "warp9"]}]}
        ),
    )
    run = run_snakemake(campaign_dir, "-n")
    assert run.returncode != 0
    assert "field physical.sources[0].configs[1]: physical source 'decode' replays under " \
        "configuration 'warp9', which config/physical.yaml does not define" in _outputs(run), (
        _outputs(run)[-2000:]
    )  # fmt: skip
    assert not (campaign_dir / "results").exists()


@pytest.mark.parametrize("store", ["/tmp/elsewhere-cas", "../outside-cas", "."])
def test_snakemake_refuses_a_store_outside_the_working_directory(campaign_dir, store):
    _set_config(campaign_dir, lambda c: c.update(store=store))
    run = run_snakemake(campaign_dir, "-n")
    assert run.returncode != 0
    assert "allow_external_store" in _outputs(run), _outputs(run)[-2000:]


def test_the_documented_flag_allows_an_external_store():
    check_store_inside({"store": "/srv/cas", "allow_external_store": True}, file="c")
    with pytest.raises(InputError, match="allow_external_store"):
        check_store_inside({"store": "/srv/cas"}, file="c")
    check_store_inside({"store": "results/cas"}, file="c")


def test_output_paths_must_resolve_inside_the_campaign(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    check_paths_inside(["results/c/x.json", "results/c/a/b"], "c", file="config")
    for bad in ["results/c/../d/x", "results/c", "/etc/x", "results/d/x"]:
        with pytest.raises(InputError, match="leaves results/c"):
            check_paths_inside([bad], "c", file="config")


def test_the_snakefile_refuses_a_yte_config_before_snakemake_evaluates_it(campaign_dir):
    """The default config file (``configfile:`` in the Snakefile) is checked on its raw
    YAML before Snakemake reads it: the payload never runs."""
    (campaign_dir / "config" / "config.yaml").write_text(
        (campaign_dir / "config" / "tiny.yaml").read_text() + YTE_PAYLOAD
    )
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-n", "--cores", "1"]
    run = subprocess.run(cmd, cwd=campaign_dir, capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    assert "__use_yte__" in _outputs(run) and "yte" in _outputs(run)
    assert not (campaign_dir / "pwned.txt").exists()


@pytest.mark.parametrize(
    "text",
    [
        YTE_PAYLOAD,
        "a:\n  __use_yte__: true\n",
        "__definitions__:\n  - import os\n",
        "a: !!python/object/apply:os.system [touch pwned.txt]\n",
    ],
    ids=["yte-top", "yte-nested", "yte-definitions", "python-tag"],
)
def test_a_config_that_asks_for_evaluation_is_refused(tmp_path, text):
    path = tmp_path / "config.yaml"
    path.write_text("campaign: c\n" + text)
    with pytest.raises(InputError):
        refuse_evaluating_config(path)


def test_regenerate_refuses_a_config_changed_after_the_manifest_before_anything_runs(
    campaign_dir, tmp_path, run_cli
):
    manifest_path = bind(campaign_dir)
    with open(campaign_dir / "config" / "tiny.yaml", "a") as f:
        f.write(YTE_PAYLOAD)
    regen = tmp_path / "regen"
    code, _, err = run_cli("manifest", "regenerate", manifest_path, "--workdir", regen)
    assert code == 2
    assert "config/tiny.yaml does not match the manifest" in err
    assert not regen.exists()
    assert not (campaign_dir / "pwned.txt").exists() and not (tmp_path / "pwned.txt").exists()


def test_regenerate_refuses_a_yte_config_even_in_a_consistently_rewritten_manifest(
    campaign_dir, tmp_path, run_cli
):
    with open(campaign_dir / "config" / "tiny.yaml", "a") as f:
        f.write(YTE_PAYLOAD)
    manifest_path = bind(campaign_dir)
    regen = tmp_path / "regen"
    code, _, err = run_cli("manifest", "regenerate", manifest_path, "--workdir", regen)
    assert code == 2 and "__use_yte__" in err
    assert not regen.exists()
    assert not list(tmp_path.rglob("pwned.txt"))


def test_regenerate_refuses_an_evidence_item_that_does_not_match(campaign_dir, tmp_path, run_cli):
    manifest_path = bind(campaign_dir)
    (campaign_dir / "resources" / "calibration.json").write_text("{}\n")
    code, _, err = run_cli("manifest", "regenerate", manifest_path, "--workdir", tmp_path / "regen")
    assert code == 2 and "resources/calibration.json does not match the manifest" in err


def test_unpack_refuses_an_archive_whose_config_enables_yte(campaign_dir, tmp_path, run_cli):
    with open(campaign_dir / "config" / "tiny.yaml", "a") as f:
        f.write(YTE_PAYLOAD)
    manifest_path = bind(campaign_dir)
    archive = tmp_path / "c.tar.gz"
    assert run_cli("manifest", "pack", manifest_path, "-o", archive)[0] == 0
    code, _, err = run_cli("manifest", "unpack", archive, "-o", tmp_path / "lab2")
    assert code == 2 and "__use_yte__" in err
    assert not (tmp_path / "lab2").exists()
