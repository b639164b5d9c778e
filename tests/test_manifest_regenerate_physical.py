"""``manifest regenerate`` of a campaign with a physical source (issue 41, R1): sweeps,
dispatch calibration replays and physical replays are recorded evidence, and the
calibrated backends and physical report derived from them come back bit for bit.

Regeneration once re-ran the recorded replays: the PARAM exports and the dispatch
calibration program they read are regenerated in the fresh directory, and Snakemake runs
every job downstream of a job that runs. The fresh measurements then changed
``backends/<source>/calibrated.yaml``, the physical report, their provenance records and
the manifest (7 mismatched on this campaign, 13 on the main one)."""

from __future__ import annotations

import json

import pytest
from conftest import make_physical_campaign, run_snakemake

from tracecanary.canonical import digest_path

pytestmark = pytest.mark.slow
MANIFEST = "results/tiny/manifest.json"


def _physical_campaign(workdir):
    """One physical configuration, one repetition (a minute of real gloo collectives)."""
    make_physical_campaign(workdir, configs=["native"], repetitions=1)


def test_regenerate_keeps_recorded_replays_and_rederives_calibrated_backends_bit_for_bit(
    tmp_path, run_cli
):
    lab = tmp_path / "lab"
    lab.mkdir()
    _physical_campaign(lab)
    run = run_snakemake(lab)
    assert run.returncode == 0, run.stderr[-3000:]
    manifest = json.loads((lab / MANIFEST).read_text())
    derived = {d["path"] for d in manifest["derived"]}
    assert {
        "results/tiny/backends/decode/calibrated.yaml",
        "results/tiny/physical/decode.json",
    } <= derived
    recorded = {e["path"]: e for e in manifest["evidence"] if e.get("kind") == "recorded"}
    assert {e["rule"] for e in recorded.values()} == {
        "sweep",
        "sweep_derived",
        "replay_dispatch",
        "replay_physical",
    }

    regen = tmp_path / "regen"
    code, out, err = run_cli("manifest", "regenerate", lab / MANIFEST, "--workdir", regen)
    assert code == 0, out + err
    recorded_records = {e["provenance"]["path"] for e in recorded.values()}
    compared = len(derived) + len(manifest["provenance"]) - len(recorded_records) + 1
    last = out.strip().splitlines()[-1]
    assert last == f"{compared} regenerated, 0 mismatched, {len(recorded)} not_regenerable", out
    for path, item in recorded.items():  # the measurements laid out were never re-run
        assert digest_path(regen / path) == item["sha256"], path
        assert f"recorded evidence of rule {item['rule']} (kept, not re-run)" in out
