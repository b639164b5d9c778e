"""A small bound campaign for the hostile-input tests: the tiny campaign's config and
evidence, one deterministic provenance record (so evidence, a derived artifact and its
store copy are in the manifest) and the manifest, all made by the real functions
without running the workflow."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import yaml
from conftest import make_tiny_campaign

from tracecanary.campaign.manifest import build_manifest, write_manifest
from tracecanary.campaign.provenance import statement, write_statement
from tracecanary.canonical import write_json

CONFIG = "config/tiny.yaml"
MANIFEST = "results/tiny/manifest.json"
DERIVED = "results/tiny/derived/summary.json"
PROVENANCE = "results/tiny/provenance/derive.json"
STORE = "results/cas"


@contextlib.contextmanager
def inside(path: Path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def make_files(workdir: Path) -> None:
    """Config + evidence only (what ``bind`` binds)."""
    make_tiny_campaign(workdir, with_alphabeta=False)


def bind(workdir: Path) -> Path:
    """Write the derived artifact, its provenance record and the manifest binding the
    files as they are now; return the manifest path."""
    with inside(workdir):
        write_json(DERIVED, {"derived": True})
        record = statement(
            rule="derive",
            wildcards={"campaign": "tiny"},
            params={},
            inputs={
                "calibration": "resources/calibration.json",
                "captures": [f"resources/rank{r}.jsonl.gz" for r in range(4)],
            },
            outputs={"summary": DERIVED},
            deterministic=True,
        )
        write_statement(PROVENANCE, record, STORE)
        config = yaml.safe_load(Path(CONFIG).read_text())
        manifest = build_manifest(
            campaign="tiny", config=config, config_files=[CONFIG], provenance_paths=[PROVENANCE]
        )
        write_manifest(MANIFEST, manifest)
    return workdir / MANIFEST


def bound_campaign(workdir: Path) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    make_files(workdir)
    return bind(workdir)
