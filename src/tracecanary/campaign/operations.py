"""What a reviewer does with a manifest: verify it, regenerate from evidence, pack it.

- ``verify_manifest``: recomputes the digest of every config file, evidence item,
  derived artifact, provenance record and store copy, checks each provenance record's
  subjects against the manifest, and recomputes the root digest. Returns the list of
  mismatches (empty = everything holds).
- ``regenerate``: lays out only the evidence and config in a fresh directory, runs the
  workflow there (recorded evidence, i.e. live captures and physical attempt archives,
  is copied, never re-run) and compares every derived artifact bit for bit.
- ``pack`` / ``unpack``: one deterministic tar.gz of manifest + config + evidence (+ the
  provenance records of recorded evidence), unpacked without trusting member paths.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from tracecanary.canonical import canonical_json_bytes, digest_path, sha256_bytes
from tracecanary.errors import InputError
from tracecanary.limits import load_json

REPO = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Mismatch:
    artifact: str
    expected: str
    found: str

    def line(self) -> str:
        return f"{self.artifact}: expected {self.expected}, found {self.found}"


def load_manifest(path: str | os.PathLike) -> dict:
    doc = load_json(path)
    if not isinstance(doc, dict) or doc.get("format") != "tracecanary.campaign.manifest/v1":
        raise InputError("not a tracecanary.campaign.manifest/v1 document", file=str(path), field="format")
    from tracecanary.formats.schemas import validate

    validate(doc, "manifest", file=str(path))
    _check_paths(doc, str(path))
    return doc


def _check_paths(manifest: dict, file: str) -> None:
    """Every path a manifest names must stay inside the campaign directory: relative,
    without '..' (an untrusted manifest naming /dev/zero or ../../secret is refused)."""
    items = (
        [("config/files", e) for e in manifest["config"]["files"]]
        + [("evidence", e) for e in manifest["evidence"]]
        + [("derived", e) for e in manifest["derived"]]
        + [("provenance", e) for e in manifest["provenance"]]
        + [
            ("provenance", e["provenance"])
            for e in manifest["evidence"] + manifest["derived"]
            if isinstance(e.get("provenance"), dict)
        ]
    )
    store = manifest["config"]["content"].get("store", "results/cas")
    for where, item in items + [("config/content/store", {"path": store})]:
        rel = item["path"]
        if not isinstance(rel, str):
            raise InputError("path must be a string", file=file, field=where)
        parts = Path(rel).parts
        if not rel or Path(rel).is_absolute() or ".." in parts or "\x00" in rel:
            raise InputError(
                f"path {rel[:200]!r} leaves the campaign directory", file=file, field=where
            )


def default_workdir(manifest_path: str | os.PathLike) -> Path:
    """results/<campaign>/manifest.json -> the directory the campaign ran in."""
    p = Path(manifest_path).resolve()
    return p.parents[2] if len(p.parents) > 2 and p.parents[1].name == "results" else Path.cwd()


def _digest_or_missing(path: Path) -> str:
    return digest_path(path) if path.exists() else "missing"


def verify_manifest(
    manifest_path: str | os.PathLike, workdir: str | os.PathLike | None = None
) -> list[Mismatch]:
    manifest = load_manifest(manifest_path)
    root = Path(workdir) if workdir else default_workdir(manifest_path)
    store = root / manifest["config"]["content"].get("store", "results/cas")
    problems: list[Mismatch] = []
    body = {k: v for k, v in manifest.items() if k != "root_sha256"}
    root_digest = sha256_bytes(canonical_json_bytes(body))
    if root_digest != manifest["root_sha256"]:
        problems.append(Mismatch("manifest root_sha256", manifest["root_sha256"], root_digest))
    for item in (
        manifest["config"]["files"]
        + manifest["evidence"]
        + manifest["derived"]
        + manifest["provenance"]
    ):
        found = _digest_or_missing(root / item["path"])
        if found != item["sha256"]:
            problems.append(Mismatch(item["path"], item["sha256"], found))
    for item in manifest["derived"] + [
        e for e in manifest["evidence"] if e.get("kind") == "recorded"
    ]:
        copy = store / "sha256" / item["sha256"][:2] / item["sha256"][2:]
        found = _digest_or_missing(copy)
        if found != item["sha256"]:
            problems.append(Mismatch(f"store copy of {item['path']}", item["sha256"], found))
    # each provenance record must state exactly the digests the manifest lists
    listed = {i["path"]: i["sha256"] for i in manifest["derived"] + manifest["evidence"]}
    for rec in manifest["provenance"]:
        path = root / rec["path"]
        if not path.exists():
            continue
        try:
            statement = load_json(path)
            subjects = statement["subject"]
            if not isinstance(subjects, list) or not all(
                isinstance(s, dict)
                and isinstance(s.get("name"), str)
                and isinstance(s.get("digest", {}), dict)
                for s in subjects
            ):
                raise TypeError
        except (InputError, KeyError, TypeError):
            problems.append(Mismatch(rec["path"], "an in-toto statement", "unreadable"))
            continue
        for subject in subjects:
            want = listed.get(subject.get("name"))
            got = subject.get("digest", {}).get("sha256")
            if want != got:
                problems.append(
                    Mismatch(f"{rec['path']} subject {subject.get('name')}", str(want), str(got))
                )
    return problems


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, dirs_exist_ok=True)
    else:
        shutil.copy2(src, dst)


def _recorded_provenance(manifest: dict) -> list[str]:
    return sorted(
        {e["provenance"]["path"] for e in manifest["evidence"] if e.get("kind") == "recorded"}
    )


def lay_out_evidence(manifest: dict, source_root: Path, target: Path) -> None:
    """Copy config files, evidence and recorded evidence's provenance into ``target``,
    recorded items last so that they are newer than their inputs."""
    plain = [e["path"] for e in manifest["config"]["files"]] + [
        e["path"] for e in manifest["evidence"] if e.get("kind") != "recorded"
    ]
    for rel in plain:
        _copy(source_root / rel, target / rel)
    for rel in [
        e["path"] for e in manifest["evidence"] if e.get("kind") == "recorded"
    ] + _recorded_provenance(manifest):
        _copy(source_root / rel, target / rel)
        os.utime(target / rel)


@dataclass(frozen=True)
class RegenerationRow:
    path: str
    status: str  # regenerated | mismatched | not_regenerable
    detail: str


def regenerate(
    manifest_path: str | os.PathLike,
    workdir: str | os.PathLike,
    source_root: str | os.PathLike | None = None,
    cores: int = 2,
) -> list[RegenerationRow]:
    manifest = load_manifest(manifest_path)
    src = Path(source_root) if source_root else default_workdir(manifest_path)
    target = Path(workdir)
    if target.exists() and any(target.iterdir()):
        raise InputError(
            "regeneration needs a fresh (empty or absent) directory",
            file=str(target),
            field="workdir",
        )
    target.mkdir(parents=True, exist_ok=True)
    lay_out_evidence(manifest, src, target)
    configfile = manifest["config"]["files"][0]["path"]
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(target),
        "--configfile",
        configfile,
        "--cores",
        str(cores),
        "--rerun-triggers",
        "mtime",
        "--quiet",
    ]
    run = subprocess.run(cmd, cwd=target, capture_output=True, text=True)
    rows = []
    for item in manifest["derived"]:
        path = target / item["path"]
        if run.returncode != 0 and not path.exists():
            rows.append(
                RegenerationRow(
                    item["path"],
                    "not_regenerable",
                    f"workflow failed: {run.stderr.strip().splitlines()[-1] if run.stderr.strip() else run.returncode}",
                )
            )
            continue
        found = _digest_or_missing(path)
        status = "regenerated" if found == item["sha256"] else "mismatched"
        rows.append(
            RegenerationRow(
                item["path"],
                status,
                "" if status == "regenerated" else f"expected {item['sha256']}, found {found}",
            )
        )
    recorded_prov = set(_recorded_provenance(manifest))
    for item in manifest["provenance"]:
        if item["path"] in recorded_prov:
            continue
        found = _digest_or_missing(target / item["path"])
        status = "regenerated" if found == item["sha256"] else "mismatched"
        rows.append(
            RegenerationRow(
                item["path"],
                status,
                "" if status == "regenerated" else f"expected {item['sha256']}, found {found}",
            )
        )
    manifest_rel = Path(manifest_path).resolve().relative_to(src.resolve()).as_posix()
    found = _digest_or_missing(target / manifest_rel)
    expected = digest_path(manifest_path)
    rows.append(
        RegenerationRow(
            manifest_rel,
            "regenerated" if found == expected else "mismatched",
            "" if found == expected else f"expected {expected}, found {found}",
        )
    )
    for item in manifest["evidence"]:
        if item.get("kind") == "recorded":
            rows.append(
                RegenerationRow(
                    item["path"],
                    "not_regenerable",
                    f"recorded evidence of rule {item['rule']} (kept, not re-run)",
                )
            )
    return rows


def _members(manifest: dict) -> list[str]:
    return sorted(
        {e["path"] for e in manifest["config"]["files"]}
        | {e["path"] for e in manifest["evidence"]}
        | set(_recorded_provenance(manifest))
    )


def pack(manifest_path: str | os.PathLike, output: str | os.PathLike) -> int:
    """Write a deterministic tar.gz of manifest + config + evidence; return member count."""
    from tracecanary.canonical import atomic_output

    manifest = load_manifest(manifest_path)
    root = default_workdir(manifest_path)
    try:
        manifest_rel = Path(manifest_path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        raise InputError(
            f"manifest is not inside its campaign directory {root}", file=str(manifest_path)
        ) from None
    files: list[tuple[str, Path]] = [(manifest_rel, Path(manifest_path))]
    for rel in _members(manifest):
        p = root / rel
        if not p.exists():
            raise InputError(
                f"{rel} is named by the manifest but missing", file=str(manifest_path), field=rel
            )
        if p.is_dir():
            files += [
                (f"{rel}/{q.relative_to(p).as_posix()}", q)
                for q in sorted(p.rglob("*"))
                if q.is_file()
            ]
        else:
            files.append((rel, p))
    with atomic_output(output) as tmp:
        with (
            open(tmp, "wb") as raw,
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz,
        ):
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for name, path in sorted(files):
                    if not path.is_file():
                        raise InputError("not a regular file", file=str(path))
                    with open(path, "rb") as fh:  # streamed: evidence may be large
                        info = tarfile.TarInfo(name)
                        info.size = os.fstat(fh.fileno()).st_size
                        info.mtime, info.mode, info.uid, info.gid = 0, 0o644, 0, 0
                        tar.addfile(info, fh)
    return len(files)


def unpack(archive: str | os.PathLike, output: str | os.PathLike) -> int:
    """Extract ``archive`` into ``output`` (absent or empty) refusing absolute paths,
    '..', links and devices, and archives over the resource policy (members' total size
    over ``max_decompressed_bytes``, more members than ``max_events``), all checked from
    the member headers before anything is written. Atomic: on any refusal or error
    ``output`` is left as it was."""
    from tracecanary.canonical import atomic_output
    from tracecanary.limits import current_limits

    limits = current_limits()
    target = Path(output)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise InputError(
            "unpack needs a fresh (empty or absent) directory", file=str(target), field="output"
        )
    if not Path(archive).is_file():
        raise InputError("no such file", file=str(archive))
    limits.check("max_file_bytes", Path(archive).stat().st_size, file=archive)
    corrupt = (tarfile.TarError, OSError, EOFError, zlib.error)
    try:
        tar = tarfile.open(archive, mode="r:gz")
    except corrupt as err:
        raise InputError(f"not a campaign archive: {err}", file=str(archive)) from None
    with tar:
        total = 0
        members = []
        try:
            for member in tar:
                name = Path(member.name)
                unsafe = name.is_absolute() or ".." in name.parts
                if unsafe or not (member.isfile() or member.isdir()):
                    raise InputError(
                        f"unsafe archive member {member.name[:200]!r}",
                        file=str(archive),
                        field="member",
                    )
                total += member.size
                limits.check("max_decompressed_bytes", total, what="unpacked size", file=archive)
                members.append(member)
                limits.check("max_events", len(members), what="archive members", file=archive)
            with atomic_output(target, directory=True) as tmp:
                os.chmod(tmp, 0o755)
                tar.extractall(tmp, members=members, filter="data")
        except corrupt as err:
            raise InputError(f"corrupt campaign archive: {err}", file=str(archive)) from None
    return len(members)
