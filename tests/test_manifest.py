"""Manifest verify / regenerate / pack / unpack, and a reviewer's single-rule re-run."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import run_snakemake

from tracecanary.canonical import sha256_file

pytestmark = pytest.mark.slow
MANIFEST = "results/tiny/manifest.json"


@pytest.fixture
def campaign(tiny_campaign):
    return tiny_campaign


@pytest.fixture
def campaign_copy(campaign, tmp_path):
    target = tmp_path / "copy"
    shutil.copytree(campaign, target, symlinks=True)
    return target


def test_manifest_verify_passes_on_a_fresh_campaign(campaign, run_cli):
    code, out, _ = run_cli("manifest", "verify", campaign / MANIFEST)
    assert code == 0 and "every digest matches" in out


def _flip_one_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "relpath",
    [
        "resources/calibration.json",  # evidence
        "results/tiny/ingest/decode.parquet",  # derived
        "results/tiny/provenance/merge/decode.json",  # provenance record
        "config/tiny.yaml",  # config
    ],
)
def test_manifest_verify_names_the_artifact_after_one_byte_changes(campaign_copy, run_cli, relpath):
    _flip_one_byte(campaign_copy / relpath)
    code, out, _ = run_cli("manifest", "verify", campaign_copy / MANIFEST)
    assert code == 1
    assert any(line.startswith(f"MISMATCH {relpath}: expected") for line in out.splitlines()), out


def test_manifest_verify_detects_a_changed_store_copy(campaign_copy, run_cli):
    manifest = json.loads((campaign_copy / MANIFEST).read_text())
    item = next(d for d in manifest["derived"] if d["path"].endswith(".parquet"))
    store = campaign_copy / "results/cas/sha256" / item["sha256"][:2] / item["sha256"][2:]
    store.chmod(0o644)
    _flip_one_byte(store)
    code, out, _ = run_cli("manifest", "verify", campaign_copy / MANIFEST)
    assert code == 1 and f"store copy of {item['path']}" in out


def test_manifest_verify_detects_an_edited_manifest(campaign_copy, run_cli):
    path = campaign_copy / MANIFEST
    manifest = json.loads(path.read_text())
    manifest["derived"][0]["sha256"] = "0" * 64
    path.write_text(json.dumps(manifest))
    code, out, _ = run_cli("manifest", "verify", path)
    assert code == 1 and "manifest root_sha256" in out


def test_pack_unpack_elsewhere_then_regenerate_reproduces_every_derived_artifact_bit_for_bit(
    campaign, tmp_path, run_cli
):
    # one regeneration (the slowest step here) from the unpacked evidence alone: it proves
    # both that the archive carries everything needed and that every derived artifact
    # comes back bit for bit (formerly two tests regenerating the same manifest)
    assert run_cli("manifest", "pack", campaign / MANIFEST, "-o", tmp_path / "c.tar.gz")[0] == 0
    assert run_cli("manifest", "unpack", tmp_path / "c.tar.gz", "-o", tmp_path / "lab")[0] == 0
    assert not (tmp_path / "lab/results/tiny/ingest").exists()  # only evidence travels
    code, out, _ = run_cli(
        "manifest", "regenerate", tmp_path / "lab" / MANIFEST, "--workdir", tmp_path / "regen"
    )
    assert code == 0, out
    assert "mismatched" not in out.split("\n", 1)[1].rsplit("\n", 2)[0]
    assert " 0 mismatched" in out


def test_reviewer_rerun_of_one_rule_gives_the_manifest_digest(campaign_copy):
    target = "results/tiny/ingest/decode.parquet"
    manifest = json.loads((campaign_copy / MANIFEST).read_text())
    expected = next(d["sha256"] for d in manifest["derived"] if d["path"] == target)
    run = run_snakemake(campaign_copy, "--forcerun", "ingest", "--until", "ingest", target)
    assert run.returncode == 0, run.stderr[-2000:]
    assert sha256_file(campaign_copy / target) == expected
    run = run_snakemake(campaign_copy, "-f", target)
    assert run.returncode == 0 and sha256_file(campaign_copy / target) == expected


def test_a_real_campaign_archive_fits_the_member_cap_with_headroom(campaign, tmp_path, run_cli):
    import tarfile

    from tracecanary.limits import current_limits

    archive = tmp_path / "c.tar.gz"
    assert run_cli("manifest", "pack", campaign / MANIFEST, "-o", archive)[0] == 0
    with tarfile.open(archive, "r:gz") as tar:
        members = len(tar.getmembers())
    assert 0 < members * 100 <= current_limits().max_archive_members


def test_a_real_campaign_signed_and_pinned_verifies_and_reports_its_key(
    campaign_copy, tmp_path, run_cli
):
    manifest = campaign_copy / MANIFEST
    assert run_cli("manifest", "keygen", "-o", tmp_path / "lab.pem")[0] == 0
    assert run_cli("manifest", "sign", manifest, "--key", tmp_path / "lab.pem")[0] == 0
    root = json.loads(manifest.read_text())["root_sha256"]
    code, out, _ = run_cli(
        "manifest", "verify", manifest, "--key", tmp_path / "lab.pem.pub", "--expect-root", root
    )
    assert code == 0 and "signed by key " in out and f"root {root} as pinned" in out
