"""Hostile archives and artifacts under ``manifest verify|unpack|sign`` (issue 17,
defect 7, the smaller archive holes, ``--expect-root`` and signed manifests).

``verify`` never opens a non-regular file: a FIFO, a symlink (to ``/dev/zero`` or to a
file with identical content) in place of an artifact, an evidence item or a store copy
is a mismatch by name, in bounded time. Runs that could hang go through a subprocess
with a timeout.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hostile_campaign import CONFIG, DERIVED, MANIFEST, bound_campaign

from tracecanary.limits import current_limits

VERIFY_SECONDS = 60  # verify of this campaign takes well under a second; a hang trips this


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("hostile") / "lab"
    bound_campaign(workdir)
    return workdir


@pytest.fixture
def campaign(pristine, tmp_path):
    """A fresh copy of the bound campaign (tests replace its files)."""
    workdir = tmp_path / "lab"
    shutil.copytree(pristine, workdir, symlinks=True)
    return workdir


def _verify(workdir, *extra):
    cmd = [sys.executable, "-m", "tracecanary", "manifest", "verify", str(workdir / MANIFEST)]
    return subprocess.run(
        [*cmd, *map(str, extra)], capture_output=True, text=True, timeout=VERIFY_SECONDS
    )


def _store_copy(workdir, rel):
    manifest = json.loads((workdir / MANIFEST).read_text())
    digest = next(i["sha256"] for i in manifest["derived"] if i["path"] == rel)
    return workdir / "results/cas/sha256" / digest[:2] / digest[2:]


def _replace_with_fifo(path):
    path.unlink()
    os.mkfifo(path)


def _replace_with_symlink(path, target):
    path.unlink()
    os.symlink(target, path)


def _replace_with_identical_symlink(path):
    twin = path.with_name(path.name + ".twin")
    twin.write_bytes(path.read_bytes())
    _replace_with_symlink(path, twin)


REPLACEMENTS = {
    "fifo": (_replace_with_fifo, "a FIFO"),
    "symlink-to-dev-zero": (lambda p: _replace_with_symlink(p, "/dev/zero"), "a symlink"),
    "symlink-identical-content": (_replace_with_identical_symlink, "a symlink"),
}


@pytest.mark.parametrize("how", sorted(REPLACEMENTS))
@pytest.mark.parametrize("what", ["derived", "evidence", "config", "store copy"])
def test_verify_reports_a_non_regular_file_in_place_of_an_item_by_name_without_opening_it(
    campaign, how, what
):
    replace, kind = REPLACEMENTS[how]
    rel = {"derived": DERIVED, "evidence": "resources/calibration.json", "config": CONFIG}.get(what)
    target = _store_copy(campaign, DERIVED) if what == "store copy" else campaign / rel
    target.chmod(0o644)
    replace(target)
    run = _verify(campaign)
    assert run.returncode == 1, run.stderr
    name = f"store copy of {DERIVED}" if what == "store copy" else rel
    assert f"MISMATCH {name}: expected" in run.stdout and kind in run.stdout, run.stdout


def test_verify_reports_a_fifo_inside_a_directory_item(tmp_path):
    from tracecanary.campaign.operations import _digest_or_missing

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("x")
    os.mkfifo(tmp_path / "d" / "pipe")
    assert _digest_or_missing(tmp_path / "d").startswith("a FIFO at ")


def test_verify_passes_on_the_untouched_campaign(campaign):
    run = _verify(campaign)
    assert run.returncode == 0, run.stdout + run.stderr


def test_expect_root_names_the_expected_and_found_root(campaign):
    root = json.loads((campaign / MANIFEST).read_text())["root_sha256"]
    assert _verify(campaign, "--expect-root", root).returncode == 0
    other = "ab" * 32
    run = _verify(campaign, "--expect-root", other)
    assert run.returncode == 1
    assert f"expected {other}, found {root}" in run.stdout
    run = _verify(campaign, "--expect-root", "not-a-digest")
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1


def test_a_consistently_rewritten_manifest_passes_verify_but_not_a_pinned_root(campaign):
    """The trust model: whoever can write an unsigned manifest can rebind it; only a
    pinned root (or a signature) tells."""
    from tracecanary.campaign.operations import _manifest_root

    original = json.loads((campaign / MANIFEST).read_text())["root_sha256"]
    (campaign / "resources" / "calibration.json").write_text('{"forged": true}\n')
    manifest = json.loads((campaign / MANIFEST).read_text())
    forged = next(e for e in manifest["evidence"] if e["path"] == "resources/calibration.json")
    from tracecanary.canonical import sha256_file

    forged["sha256"] = sha256_file(campaign / "resources" / "calibration.json")
    manifest["root_sha256"] = _manifest_root(manifest)
    (campaign / MANIFEST).write_text(json.dumps(manifest))
    # (its provenance record still names the old digest: an attacker rewrites that too)
    run = _verify(campaign, "--expect-root", original)
    assert run.returncode == 1 and f"expected {original}" in run.stdout


def _write_keys(tmp_path, name="lab"):
    key = Ed25519PrivateKey.generate()
    private = tmp_path / f"{name}.pem"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public = tmp_path / f"{name}.pub"
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


def test_a_signed_manifest_verifies_under_its_key_and_reports_the_key_id(campaign, tmp_path):
    from tracecanary.campaign.signing import key_id, load_public_key

    private, public = _write_keys(tmp_path)
    sign = subprocess.run(
        [sys.executable, "-m", "tracecanary", "manifest", "sign", str(campaign / MANIFEST),
         "--key", str(private)],
        capture_output=True, text=True, timeout=VERIFY_SECONDS,
    )  # fmt: skip
    assert sign.returncode == 0, sign.stderr
    envelope = json.loads((campaign / f"{MANIFEST}.dsse.json").read_text())
    assert envelope["payloadType"].startswith("application/vnd.tracecanary+json")
    run = _verify(campaign, "--key", public)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"signed by key {key_id(load_public_key(public))}" in run.stdout


def test_a_signature_by_another_key_or_over_other_bytes_does_not_verify(campaign, tmp_path):
    from tracecanary.campaign.signing import sign_manifest

    private, _ = _write_keys(tmp_path, "lab")
    _, stranger = _write_keys(tmp_path, "stranger")
    sign_manifest(campaign / MANIFEST, private, campaign / f"{MANIFEST}.dsse.json")
    run = _verify(campaign, "--key", stranger)
    assert run.returncode == 1 and "no signature verifies" in run.stderr
    # the manifest changed after signing (same JSON, other bytes)
    text = (campaign / MANIFEST).read_text()
    (campaign / MANIFEST).write_text(json.dumps(json.loads(text), indent=1))
    run = _verify(campaign, "--key", tmp_path / "lab.pub")
    assert run.returncode == 1 and "not this manifest's bytes" in run.stderr


def test_keygen_writes_a_private_key_only_its_owner_reads(tmp_path, run_cli):
    code, _, err = run_cli("manifest", "keygen", "-o", tmp_path / "k.pem")
    assert code == 0 and "key " in err
    assert (tmp_path / "k.pem").stat().st_mode & 0o077 == 0
    assert (tmp_path / "k.pem.pub").read_text().startswith("-----BEGIN PUBLIC KEY-----")


# ----------------------------------------------------------------------------- unpack


def _pack(campaign, tmp_path, run_cli):
    archive = tmp_path / "c.tar.gz"
    assert run_cli("manifest", "pack", campaign / MANIFEST, "-o", archive)[0] == 0
    return archive


def _rewrite_archive(src, dst, extra=(), replace=None):
    """Copy ``src`` member by member to ``dst`` (``replace``: {name: new bytes}) and
    append ``extra`` (name, bytes)."""
    replace = replace or {}
    with tarfile.open(src, "r:gz") as tin, tarfile.open(dst, "w:gz") as tout:
        for member in tin:
            if member.name in replace:
                member.size = len(replace[member.name])
                tout.addfile(member, io.BytesIO(replace[member.name]))
                continue
            tout.addfile(member, tin.extractfile(member) if member.isfile() else None)
        for name, data in extra:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tout.addfile(info, io.BytesIO(data))


def test_pack_then_unpack_gives_the_verified_campaign(campaign, tmp_path, run_cli):
    archive = _pack(campaign, tmp_path, run_cli)
    code, _, err = run_cli("manifest", "unpack", archive, "-o", tmp_path / "there")
    assert code == 0, err
    assert (tmp_path / "there" / CONFIG).read_bytes() == (campaign / CONFIG).read_bytes()


def test_unpack_refuses_a_member_name_given_twice(campaign, tmp_path, run_cli):
    archive = _pack(campaign, tmp_path, run_cli)
    twice = tmp_path / "twice.tar.gz"
    _rewrite_archive(archive, twice, [(CONFIG, b"campaign: other\n")])
    code, _, err = run_cli("manifest", "unpack", twice, "-o", tmp_path / "out")
    assert code == 2 and "appears twice" in err and CONFIG in err
    assert not (tmp_path / "out").exists()


def test_unpack_refuses_a_member_the_manifest_does_not_name(campaign, tmp_path, run_cli):
    archive = _pack(campaign, tmp_path, run_cli)
    extra = tmp_path / "extra.tar.gz"
    _rewrite_archive(archive, extra, [("Snakefile", b"rule all:\n")])
    code, _, err = run_cli("manifest", "unpack", extra, "-o", tmp_path / "out")
    assert code == 2 and "'Snakefile' is not named by the manifest" in err


def test_unpack_refuses_evidence_that_does_not_match_the_manifest(campaign, tmp_path, run_cli):
    packed = _pack(campaign, tmp_path, run_cli)
    archive = tmp_path / "changed.tar.gz"
    _rewrite_archive(packed, archive, replace={"resources/calibration.json": b"{}\n"})
    code, _, err = run_cli("manifest", "unpack", archive, "-o", tmp_path / "out")
    assert code == 2 and "resources/calibration.json does not match the manifest" in err
    assert not (tmp_path / "out").exists()


def test_unpack_refuses_more_members_than_the_cap_from_the_headers(tmp_path, run_cli, monkeypatch):
    cap = current_limits().max_archive_members
    assert cap == 100_000  # docs/limits.md: a real campaign holds a few hundred members
    monkeypatch.setenv("TRACECANARY_LIMITS", "max_archive_members=50")
    archive = tmp_path / "many.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for i in range(60):
            tar.addfile(tarfile.TarInfo(f"resources/e{i}"), io.BytesIO(b""))
    code, _, err = run_cli("manifest", "unpack", archive, "-o", tmp_path / "out")
    assert code == 2 and "max_archive_members=50" in err
    assert not (tmp_path / "out").exists()


def test_unpack_onto_a_symlinked_directory_names_the_output_not_the_archive(
    campaign, tmp_path, run_cli
):
    archive = _pack(campaign, tmp_path, run_cli)
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    code, _, err = run_cli("manifest", "unpack", archive, "-o", tmp_path / "link")
    assert code == 2
    assert "corrupt" not in err and f"{tmp_path / 'link'}: field output" in err
    assert (tmp_path / "link").is_symlink() and (tmp_path / "real").is_dir()


def test_unpack_and_regenerate_with_a_wrong_pinned_root_stop_before_anything(
    campaign, tmp_path, run_cli
):
    root = json.loads((campaign / MANIFEST).read_text())["root_sha256"]
    archive = _pack(campaign, tmp_path, run_cli)
    wrong = "cd" * 32
    code, _, err = run_cli(
        "manifest", "unpack", archive, "-o", tmp_path / "u", "--expect-root", wrong
    )
    assert code == 1 and f"expected {wrong} (pinned), found {root}" in err
    assert not (tmp_path / "u").exists()
    code, _, err = run_cli(
        "manifest", "regenerate", campaign / MANIFEST, "--workdir", tmp_path / "r",
        "--expect-root", wrong,
    )  # fmt: skip
    assert code == 1 and f"found {root}" in err and not (tmp_path / "r").exists()
    code, _, err = run_cli(
        "manifest", "unpack", archive, "-o", tmp_path / "u", "--expect-root", root
    )
    assert code == 0, err


# ------------------------------------------------- issue 41: links, keys, markers, pack


def _tree(path):
    """Every entry under ``path`` (links not followed) with its bytes or link target."""
    out = {}
    for entry in sorted(path.rglob("*")):
        rel = entry.relative_to(path).as_posix()
        if entry.is_symlink():
            out[rel] = ("link", os.readlink(entry))
        elif entry.is_file():
            out[rel] = ("file", entry.read_bytes())
        else:
            out[rel] = ("dir", None)
    return out


@pytest.fixture
def signed_pair(campaign, tmp_path):
    """Campaign A (bound, signed) and its copy B with one evidence file changed."""
    from tracecanary.campaign.signing import sign_manifest

    private, public = _write_keys(tmp_path)
    sign_manifest(campaign / MANIFEST, private, campaign / f"{MANIFEST}.dsse.json")
    other = tmp_path / "b"
    shutil.copytree(campaign, other, symlinks=True)
    (other / "resources" / "calibration.json").write_text('{"forged": true}\n')
    root = json.loads((campaign / MANIFEST).read_text())["root_sha256"]
    return campaign, other, public, root


def _link_to(path, target):
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    os.symlink(target, path)


def test_verify_refuses_a_manifest_and_envelope_symlinked_to_another_campaign(signed_pair):
    a, b, public, root = signed_pair
    for rel in (MANIFEST, f"{MANIFEST}.dsse.json"):
        _link_to(b / rel, a / rel)
    before = _tree(b)
    run = _verify(b, "--expect-root", root, "--key", public)
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"{b / MANIFEST} is a symlink" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "as pinned" not in run.stdout
    assert _tree(b) == before


def test_verify_refuses_a_results_directory_symlinked_to_another_campaign(signed_pair):
    a, b, public, root = signed_pair
    _link_to(b / "results", a / "results")
    run = _verify(b, "--expect-root", root, "--key", public)
    assert run.returncode == 1 and f"{b / 'results'} is a symlink" in run.stderr, run.stderr
    (b / "results").unlink()  # results/<campaign> linked instead
    shutil.copytree(a / "results", b / "results", symlinks=True)
    _link_to(b / "results" / "tiny", a / "results" / "tiny")
    run = _verify(b, "--expect-root", root, "--key", public)
    assert run.returncode == 1 and f"{b / 'results' / 'tiny'} is a symlink" in run.stderr


def test_verify_reports_evidence_read_through_a_symlinked_directory(signed_pair):
    a, b, public, root = signed_pair
    _link_to(b / "resources", a / "resources")  # A's (unchanged) evidence, by link
    run = _verify(b, "--expect-root", root, "--key", public)
    assert run.returncode == 1
    assert (
        "MISMATCH resources/calibration.json: expected" in run.stdout
        and f"found a symlink at {b / 'resources'}, not a regular file" in run.stdout
    ), run.stdout


def test_verify_refuses_a_symlinked_envelope(signed_pair, tmp_path):
    a, b, public, root = signed_pair
    (b / "resources" / "calibration.json").write_bytes(
        (a / "resources" / "calibration.json").read_bytes()
    )
    assert _verify(b, "--key", public).returncode == 0  # B as copied verifies on its own
    _link_to(b / f"{MANIFEST}.dsse.json", a / f"{MANIFEST}.dsse.json")
    run = _verify(b, "--key", public)
    assert run.returncode == 1 and f"{b / MANIFEST}.dsse.json: is a symlink" in run.stderr


def test_pack_refuses_a_symlinked_manifest_and_writes_nothing(signed_pair, tmp_path, run_cli):
    a, b, _, _ = signed_pair
    _link_to(b / MANIFEST, a / MANIFEST)
    code, _, err = run_cli("manifest", "pack", b / MANIFEST, "-o", tmp_path / "c.tar.gz")
    assert code == 1 and f"{b / MANIFEST} is a symlink" in err
    assert not (tmp_path / "c.tar.gz").exists()


def test_keygen_refuses_an_existing_private_key_and_keeps_it(tmp_path, run_cli):
    (tmp_path / "k.pem").write_bytes(b"the lab's key\n")
    code, _, err = run_cli("manifest", "keygen", "-o", tmp_path / "k.pem")
    assert code == 2 and f"{tmp_path / 'k.pem'}: field --output" in err
    assert "already exists" in err and "--force" in err
    assert (tmp_path / "k.pem").read_bytes() == b"the lab's key\n"
    assert not (tmp_path / "k.pem.pub").exists()
    code, _, err = run_cli("manifest", "keygen", "-o", tmp_path / "k.pem", "--force")
    assert code == 0, err
    assert (tmp_path / "k.pem").read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert (tmp_path / "k.pem").stat().st_mode & 0o077 == 0


def test_keygen_refuses_an_existing_public_key_and_writes_no_private_key(tmp_path, run_cli):
    (tmp_path / "k.pem.pub").write_bytes(b"published\n")
    code, _, err = run_cli("manifest", "keygen", "-o", tmp_path / "k.pem")
    assert code == 2 and f"{tmp_path / 'k.pem.pub'}: field --output" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.pem.pub"]
    assert (tmp_path / "k.pem.pub").read_bytes() == b"published\n"


def test_keygen_whose_public_key_cannot_be_written_writes_no_private_key(tmp_path, run_cli):
    (tmp_path / "k.pem.pub").mkdir()  # KEY.pub cannot be a file here, even with --force
    for extra in ((), ("--force",)):
        code, _, err = run_cli("manifest", "keygen", "-o", tmp_path / "k.pem", *extra)
        assert code == 2 and "k.pem.pub" in err and len(err.strip().splitlines()) == 1
        assert sorted(p.name for p in tmp_path.iterdir()) == ["k.pem.pub"]
        assert not any((tmp_path / "k.pem.pub").iterdir())


def test_keygen_refuses_a_symlink_as_the_private_key(tmp_path, run_cli):
    (tmp_path / "elsewhere").write_bytes(b"keep\n")
    os.symlink(tmp_path / "elsewhere", tmp_path / "k.pem")
    code, _, err = run_cli("manifest", "keygen", "-o", tmp_path / "k.pem", "--force")
    assert code == 2 and "not a regular file" in err
    assert (tmp_path / "elsewhere").read_bytes() == b"keep\n" and (tmp_path / "k.pem").is_symlink()
    assert not (tmp_path / "k.pem.pub").exists()


def test_tree_digest_skips_only_snakemakes_own_empty_top_level_marker(tmp_path):
    from tracecanary.canonical import digest_path, digest_regular_path

    tree = tmp_path / "sweep"
    (tree / "sub").mkdir(parents=True)
    (tree / "attempt.json").write_text("{}\n")
    plain = digest_path(tree)
    (tree / ".snakemake_timestamp").write_bytes(b"")  # what Snakemake writes
    assert digest_path(tree) == digest_regular_path(tree) == plain
    for marker, data in (
        (tree / ".snakemake_timestamp", b"not empty"),
        (tree / "sub" / ".snakemake_timestamp", b""),
        (tree / "sub" / ".snakemake_timestamp", b"payload"),
    ):
        for p in tree.rglob(".snakemake_timestamp"):
            p.write_bytes(b"")
        (tree / "sub" / ".snakemake_timestamp").unlink(missing_ok=True)
        marker.write_bytes(data)
        assert digest_path(tree) != plain, marker
        assert digest_regular_path(tree) == digest_path(tree), marker


SWEEP = "resources/sweep"


@pytest.fixture
def sweep_campaign(tmp_path):
    """The hostile campaign with a directory evidence item (Snakemake's empty marker at
    its top, a nested subdirectory), bound by a record that reads it."""
    import yaml
    from hostile_campaign import PROVENANCE, STORE, inside, make_files

    from tracecanary.campaign.manifest import build_manifest, write_manifest
    from tracecanary.campaign.provenance import statement, write_statement
    from tracecanary.canonical import write_json

    workdir = tmp_path / "lab"
    workdir.mkdir()
    make_files(workdir)
    (workdir / SWEEP / "rows").mkdir(parents=True)
    (workdir / SWEEP / "attempt.json").write_text('{"status": "complete"}\n')
    (workdir / SWEEP / "rows" / "0.json").write_text("[1, 2]\n")
    (workdir / SWEEP / ".snakemake_timestamp").write_bytes(b"")
    with inside(workdir):
        write_json(DERIVED, {"derived": True})
        record = statement(
            rule="derive", wildcards={"campaign": "tiny"}, params={},
            inputs={"sweep": SWEEP, "calibration": "resources/calibration.json"},
            outputs={"summary": DERIVED}, deterministic=True,
        )  # fmt: skip
        write_statement(PROVENANCE, record, STORE)
        config = yaml.safe_load((workdir / CONFIG).read_text())
        write_manifest(
            MANIFEST,
            build_manifest(
                campaign="tiny", config=config, config_files=[CONFIG], provenance_paths=[PROVENANCE]
            ),
        )
    assert _verify(workdir).returncode == 0
    return workdir


@pytest.mark.parametrize(
    "marker", [".snakemake_timestamp", "rows/.snakemake_timestamp"], ids=["top", "nested"]
)
def test_bytes_hidden_in_a_snakemake_timestamp_fail_verify_pack_and_unpack(
    sweep_campaign, tmp_path, run_cli, marker
):
    packed = _pack(sweep_campaign, tmp_path, run_cli)
    (sweep_campaign / SWEEP / marker).write_bytes(b"smuggled payload\n")
    run = _verify(sweep_campaign)
    assert run.returncode == 1 and f"MISMATCH {SWEEP}: expected" in run.stdout, run.stdout
    code, _, err = run_cli("manifest", "pack", sweep_campaign / MANIFEST, "-o", tmp_path / "p.tgz")
    assert code == 1 and f"{SWEEP} does not match the manifest" in err
    assert not (tmp_path / "p.tgz").exists()
    smuggled = tmp_path / "smuggled.tar.gz"
    _rewrite_archive(packed, smuggled, replace={f"{SWEEP}/{marker}": b"smuggled payload\n"},
                     extra=[] if marker.startswith(".") else [(f"{SWEEP}/{marker}", b"x\n")])  # fmt: skip
    code, _, err = run_cli("manifest", "unpack", smuggled, "-o", tmp_path / "out")
    assert code == 2 and f"{SWEEP} does not match the manifest" in err, err
    assert not (tmp_path / "out").exists()


def test_pack_refuses_evidence_changed_after_the_manifest_and_leaves_the_output(
    campaign, tmp_path, run_cli
):
    manifest = json.loads((campaign / MANIFEST).read_text())
    expected = next(e for e in manifest["evidence"] if e["path"] == "resources/calibration.json")
    (campaign / "resources" / "calibration.json").write_text("{}\n")
    (tmp_path / "c.tar.gz").write_bytes(b"an older archive\n")
    code, _, err = run_cli("manifest", "pack", campaign / MANIFEST, "-o", tmp_path / "c.tar.gz")
    assert code == 1, err
    assert "resources/calibration.json does not match the manifest: expected " in err
    assert expected["sha256"] in err and len(err.strip().splitlines()) == 1
    assert (tmp_path / "c.tar.gz").read_bytes() == b"an older archive\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "lab") == ["c.tar.gz"]


def test_pack_refuses_a_manifest_whose_root_does_not_match_its_content(campaign, tmp_path, run_cli):
    path = campaign / MANIFEST
    manifest = json.loads(path.read_text())
    manifest["campaign"] = "other"
    path.write_text(json.dumps(manifest))
    code, _, err = run_cli("manifest", "pack", path, "-o", tmp_path / "c.tar.gz")
    assert code == 1 and "root_sha256" in err and not (tmp_path / "c.tar.gz").exists()
