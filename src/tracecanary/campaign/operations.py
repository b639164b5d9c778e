"""What a reviewer does with a manifest: verify it, regenerate from evidence, pack it.

- ``verify_manifest``: recomputes the digest of every config file, evidence item,
  derived artifact, provenance record and store copy, checks each provenance record's
  subjects against the manifest, and recomputes the root digest. Returns the list of
  mismatches (empty = everything holds).
- ``regenerate``: lays out only the evidence and config in a fresh directory, runs the
  workflow there (recorded evidence, i.e. live captures, sweeps and physical attempt
  archives, is copied, and its rules are not allowed to run: ``--allowed-rules``) and
  compares every derived artifact bit for bit, and the recorded evidence with its
  digest.
- ``pack`` / ``unpack``: one deterministic tar.gz of manifest + config + evidence (+ the
  provenance records of recorded evidence), unpacked without trusting member paths.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from tracecanary.canonical import (
    NotRegular,
    canonical_json_bytes,
    digest_path,
    digest_regular_path,
    file_kind,
    is_snakemake_marker,
    sha256_bytes,
)
from tracecanary.errors import ClaimFailed, InputError
from tracecanary.formats.ids import MANIFEST_FORMAT
from tracecanary.limits import load_json
from tracecanary.progress import progress

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
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
        raise InputError(f"not a {MANIFEST_FORMAT} document", file=str(path), field="format")
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
    """results/<campaign>/manifest.json -> the directory the campaign ran in: the path as
    given, made absolute but never resolved (a symlink is not followed to another
    campaign)."""
    p = Path(os.path.abspath(manifest_path))
    return p.parents[2] if len(p.parents) > 2 and p.parents[1].name == "results" else Path.cwd()


def _first_symlink(root: Path, path: Path) -> Path | None:
    """The first symlink among the entries from ``root`` (exclusive) down to ``path``
    (inclusive); only ``path`` itself where it is not under ``root``; else None."""
    path = Path(os.path.abspath(path))
    root = Path(os.path.abspath(root))
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        return path if path.is_symlink() else None
    here = root
    for part in parts:
        here = here / part
        if here.is_symlink():
            return here
    return None


def campaign_root(
    manifest_path: str | os.PathLike, workdir: str | os.PathLike | None = None
) -> Path:
    """The campaign directory of ``manifest_path`` (``workdir``, else inferred), after
    refusing a manifest reached through a symlink: the manifest file itself, or
    ``results`` or ``results/<campaign>`` linked elsewhere, would vouch for another
    campaign's files (ClaimFailed, exit 1, naming the link)."""
    root = Path(workdir) if workdir else default_workdir(manifest_path)
    link = _first_symlink(root, Path(manifest_path))
    if link is not None:
        raise ClaimFailed(
            f"{link} is a symlink: a campaign is checked where it lies, never through a "
            "link to another one",
            file=str(manifest_path),
        )
    return root


def _digest_or_missing(path: Path, root: Path | None = None) -> str:
    """The digest of ``path`` as ``digest_path`` computes it, or what stands in its
    place: 'missing', or 'a FIFO' / 'a symlink' / ... for anything that is not a regular
    file or a directory of regular files (never opened, so never followed or blocked
    on). With ``root``, a symlinked directory between ``root`` and ``path`` (an item of
    this campaign read from another one) stands in its place too."""
    if root is not None:
        link = _first_symlink(root, path.parent)
        if link is not None:
            return f"a symlink at {link}, not a regular file"
    try:
        return digest_regular_path(path)
    except FileNotFoundError:
        return "missing"
    except NotRegular as err:
        inside = "" if Path(err.where) == path else f" at {err.where}"
        return f"a {err.kind}{inside}, not a regular file"


def _require_own_root(manifest: dict, file: str, error: type) -> None:
    """``error`` (naming ``root_sha256``) unless the manifest's root digest is that of its
    own content: an input refusal where a run reads it, a failed claim where pack vouches
    for it."""
    found_root = _manifest_root(manifest)
    if found_root != manifest["root_sha256"]:
        raise error(
            f"manifest root_sha256 {manifest['root_sha256']} does not match its content "
            f"({found_root})",
            file=file,
            field="root_sha256",
        )


def _manifest_root(manifest: dict) -> str:
    body = {k: v for k, v in manifest.items() if k != "root_sha256"}
    return sha256_bytes(canonical_json_bytes(body))


def check_root_digest(text: str | None) -> str | None:
    """A pinned root digest (``--expect-root``): 64 hex digits, else InputError."""
    if text is None:
        return None
    digest = text.strip().lower().removeprefix("sha256:")
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise InputError("needs a SHA-256 hex digest (64 hex digits)", field="--expect-root")
    return digest


def verify_manifest(
    manifest_path: str | os.PathLike,
    workdir: str | os.PathLike | None = None,
    expect_root: str | None = None,
) -> list[Mismatch]:
    """Every mismatch between the manifest and the files it names (see module doc).
    ``expect_root``: the root digest a reviewer pinned (published with a paper); a
    different ``root_sha256`` is a mismatch naming both. A FIFO, device, socket or
    symlink in place of any item (or inside a directory item) is a mismatch by name;
    it is never opened."""
    root = campaign_root(manifest_path, workdir)
    manifest = load_manifest(manifest_path)
    store = root / manifest["config"]["content"].get("store", "results/cas")
    problems: list[Mismatch] = []
    if expect_root is not None and manifest["root_sha256"] != expect_root:
        problems.append(
            Mismatch(
                "manifest root_sha256 (pinned by --expect-root)",
                expect_root,
                manifest["root_sha256"],
            )
        )
    root_digest = _manifest_root(manifest)
    if root_digest != manifest["root_sha256"]:
        problems.append(Mismatch("manifest root_sha256", manifest["root_sha256"], root_digest))
    matched: set[str] = set()
    for item in progress(
        manifest["config"]["files"]
        + manifest["evidence"]
        + manifest["derived"]
        + manifest["provenance"],
        desc="verify",
        unit="file",
    ):
        found = _digest_or_missing(root / item["path"], root)
        if found != item["sha256"]:
            problems.append(Mismatch(item["path"], item["sha256"], found))
        else:
            matched.add(item["path"])
    for item in manifest["derived"] + [
        e for e in manifest["evidence"] if e.get("kind") == "recorded"
    ]:
        copy = store / "sha256" / item["sha256"][:2] / item["sha256"][2:]
        found = _digest_or_missing(copy, root)
        if found != item["sha256"]:
            problems.append(Mismatch(f"store copy of {item['path']}", item["sha256"], found))
    # each provenance record must state exactly the digests the manifest lists (only
    # records whose bytes matched are read: a mismatched one is already reported)
    listed = {i["path"]: i["sha256"] for i in manifest["derived"] + manifest["evidence"]}
    for rec in manifest["provenance"]:
        path = root / rec["path"]
        if rec["path"] not in matched:
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


def _inputs_of_a_run(manifest: dict) -> list[dict]:
    """What a regeneration reads and nothing recomputes: config files, evidence and the
    provenance records of recorded evidence (path + sha256)."""
    recorded = set(_recorded_provenance(manifest))
    return (
        manifest["config"]["files"]
        + manifest["evidence"]
        + [p for p in manifest["provenance"] if p["path"] in recorded]
    )


def check_run_inputs(
    manifest: dict, root: Path, *, file: str, expect_root: str | None = None
) -> None:
    """Before anything runs on a campaign someone else sent: the manifest is
    self-consistent (and has the pinned root, if one is given: else ClaimFailed, exit 1),
    every config file, evidence item and recorded provenance record under ``root`` has
    the digest the manifest lists (InputError naming the first that does not), the effective config
    is valid with identifiers for path components and a store inside the campaign,
    no config file asks for evaluation (yte), and no command source would be run
    (``refuse_commands_to_run``)."""
    from tracecanary.campaign.config_check import check_store_inside, refuse_evaluating_config
    from tracecanary.campaign.physical_sources import refuse_renamed_physical_keys
    from tracecanary.formats.schemas import validate

    if expect_root is not None and manifest["root_sha256"] != expect_root:
        raise ClaimFailed(
            f"root_sha256: expected {expect_root} (pinned), found {manifest['root_sha256']}",
            file=file,
        )
    _require_own_root(manifest, file, InputError)
    for item in _inputs_of_a_run(manifest):
        found = _digest_or_missing(root / item["path"], root)
        if found != item["sha256"]:
            raise InputError(
                f"{item['path']} does not match the manifest: expected {item['sha256']}, "
                f"found {found}",
                file=file,
                field=item["path"],
            )
    content = manifest["config"]["content"]
    refuse_renamed_physical_keys(content, file=f"{file} (config.content)")
    validate(content, "config", file=f"{file} (config.content)")
    check_store_inside(content, file=f"{file} (config.content)")
    for item in manifest["config"]["files"]:
        refuse_evaluating_config(root / item["path"])
    refuse_commands_to_run(manifest, root, file=file)


def refuse_commands_to_run(manifest: dict, root: Path, *, file: str) -> None:
    """A ``kind: command`` source runs whatever command its config names: a regeneration
    runs it only if its recording is missing, so its recording must be recorded evidence
    of the manifest, for the config content and for every config file (InputError naming
    the source otherwise: nothing from someone else's campaign is run as a command)."""
    from tracecanary.limits import load_yaml

    recorded = {e["path"] for e in manifest["evidence"] if e.get("kind") == "recorded"}
    configs = [("config.content", manifest["config"]["content"])]
    configs += [(i["path"], load_yaml(root / i["path"])) for i in manifest["config"]["files"]]
    for where, config in configs:
        if not isinstance(config, dict):
            continue
        campaign = config.get("campaign", manifest["config"]["content"].get("campaign"))
        for source in config.get("sources") or []:
            if not isinstance(source, dict) or source.get("kind") != "command":
                continue
            capture = f"results/{campaign}/capture_command/{source.get('id')}"
            if capture not in recorded:
                raise InputError(
                    f"source {source.get('id')!r} runs a command (kind command) and its "
                    f"recording {capture} is not recorded evidence of the manifest: "
                    "regenerating would run the command; refused",
                    file=f"{file} ({where})",
                    field="sources",
                )


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


def _run_with_progress(cmd: list[str], cwd: Path, outputs: list[Path]):
    """``subprocess.run(cmd, capture_output=True, text=True)``, with a progress bar (on a
    terminal) counting the ``outputs`` that exist so far."""
    with progress(total=len(outputs), desc="regenerate", unit="output") as bar:
        proc = subprocess.Popen(
            cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        while True:
            try:
                out, err = proc.communicate(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                bar.update(sum(p.exists() for p in outputs) - bar.n)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _workflow_rules(snakemake: list[str], cwd: Path) -> list[str]:
    """The names of the workflow's rules (``snakemake --list-rules``)."""
    listed = subprocess.run(
        [*snakemake, "--list-rules"], cwd=cwd, capture_output=True, text=True, check=False
    )
    if listed.returncode != 0:
        last = listed.stderr.strip().splitlines()[-1:] or [str(listed.returncode)]
        raise InputError(f"the workflow's rules cannot be listed: {last[0]}", field="workdir")
    return [line.strip() for line in listed.stdout.splitlines() if line and not line[0].isspace()]


def regenerate(
    manifest_path: str | os.PathLike,
    workdir: str | os.PathLike,
    source_root: str | os.PathLike | None = None,
    cores: int = 2,
    expect_root: str | None = None,
) -> list[RegenerationRow]:
    """Re-run the workflow from the evidence alone in a fresh ``workdir`` and compare
    every derived artifact bit for bit. Before anything is copied or run,
    ``check_run_inputs`` holds for the source and then again for the copies (exit 2
    naming the first mismatch; the fresh directory is removed again)."""
    src = campaign_root(manifest_path, source_root)
    manifest = load_manifest(manifest_path)
    target = Path(workdir)
    if target.is_symlink() or (target.exists() and (not target.is_dir() or any(target.iterdir()))):
        raise InputError(
            "regeneration needs a fresh (empty or absent) directory",
            file=str(target),
            field="workdir",
        )
    # nothing is copied, and nothing runs, before the evidence is what the manifest says
    check_run_inputs(manifest, src, file=str(manifest_path), expect_root=expect_root)
    created = not target.exists()
    target.mkdir(parents=True, exist_ok=True)
    try:
        lay_out_evidence(manifest, src, target)
        check_run_inputs(manifest, target, file=str(manifest_path), expect_root=expect_root)
    except BaseException:
        if created:
            shutil.rmtree(target, ignore_errors=True)
        else:
            for child in target.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        raise
    configfile = manifest["config"]["files"][0]["path"]
    snakemake = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile")]
    snakemake += ["--directory", str(target), "--configfile", configfile]
    cmd = [*snakemake, "--cores", str(cores), "--rerun-triggers", "mtime"]
    recorded_rules = {e["rule"] for e in manifest["evidence"] if e.get("kind") == "recorded"}
    if recorded_rules:
        # a recorded rule never runs: its outputs are evidence, laid out above. Left to
        # Snakemake, a job that regenerates a recorded rule's input (the canary's PARAM
        # export, the dispatch calibration program) would make the recorded job run again
        # downstream of it, and a fresh measurement replace the bound one.
        rules = _workflow_rules(snakemake, target)
        cmd += ["--allowed-rules", *[r for r in rules if r not in recorded_rules]]
    cmd.append("--quiet")
    run = _run_with_progress(cmd, target, [target / item["path"] for item in manifest["derived"]])
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
    manifest_rel = Path(os.path.abspath(manifest_path)).relative_to(src.absolute()).as_posix()
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
        if item.get("kind") != "recorded":
            continue
        found = _digest_or_missing(target / item["path"])
        if found == item["sha256"]:
            rows.append(
                RegenerationRow(
                    item["path"],
                    "not_regenerable",
                    f"recorded evidence of rule {item['rule']} (kept, not re-run)",
                )
            )
        else:  # the run replaced a measurement: what it derived from it proves nothing
            rows.append(
                RegenerationRow(
                    item["path"],
                    "mismatched",
                    f"recorded evidence of rule {item['rule']} changed by the run: expected "
                    f"{item['sha256']}, found {found}",
                )
            )
    return rows


def _members(manifest: dict) -> list[str]:
    return sorted(
        {e["path"] for e in manifest["config"]["files"]}
        | {e["path"] for e in manifest["evidence"]}
        | set(_recorded_provenance(manifest))
    )


class _HashingReader:
    """A regular file's bytes, hashed as they are read (into an archive)."""

    def __init__(self, path: Path) -> None:
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        fd = os.open(path, flags)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise NotRegular(str(path), file_kind(st.st_mode))
        self._fh = os.fdopen(fd, "rb")
        self.st = st
        self.hasher = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self._fh.read(size)
        self.hasher.update(data)
        return data

    def close(self) -> None:
        self._fh.close()


def _member_files(root: Path, rel: str, file: str) -> list[tuple[str, Path]]:
    """(archive name, path) of every file of the manifest item ``rel``: the file, or
    every entry below the directory (a symlink, FIFO, device or socket among them, or a
    symlinked directory on the way, is a mismatch: ClaimFailed naming it)."""
    path = root / rel
    found = None
    link = _first_symlink(root, path)
    if link is not None:
        found = f"a symlink at {link}"
    elif not path.exists():
        raise InputError(f"{rel} is named by the manifest but missing", file=file, field=rel)
    elif path.is_dir():
        files = []
        for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
            for name in sorted(dirnames + filenames):
                entry = Path(dirpath) / name
                kind = file_kind(entry.lstat().st_mode)
                if kind == "file":
                    files.append((f"{rel}/{entry.relative_to(path).as_posix()}", entry))
                elif kind != "directory":
                    found = f"a {kind} at {entry}"
        if found is None:
            return files
    else:
        return [(rel, path)]
    raise ClaimFailed(
        f"{rel} does not match the manifest: found {found}, not a regular file",
        file=file,
        field=rel,
    )


def pack(manifest_path: str | os.PathLike, output: str | os.PathLike) -> int:
    """Write a deterministic tar.gz of manifest + config + evidence (+ the provenance
    records of recorded evidence); return the member count.

    Verified while packing: the manifest's root must match its content, and every item
    must have the digest the manifest lists, computed over the very bytes written into
    the archive (a file changed after ``verify`` is never packed). A mismatch is
    ClaimFailed (exit 1) naming the item; nothing is written then."""
    from tracecanary.canonical import atomic_output

    root = campaign_root(manifest_path)
    manifest = load_manifest(manifest_path)
    file = str(manifest_path)
    try:
        manifest_rel = Path(os.path.abspath(manifest_path)).relative_to(root).as_posix()
    except ValueError:
        raise InputError(
            f"manifest is not inside its campaign directory {root}", file=file
        ) from None
    _require_own_root(manifest, file, ClaimFailed)
    expected = {item["path"]: item["sha256"] for item in _inputs_of_a_run(manifest)}
    items = {rel: _member_files(root, rel, file) for rel in _members(manifest)}
    files = [(manifest_rel, Path(manifest_path))] + [f for group in items.values() for f in group]
    digests: dict[str, tuple[str, os.stat_result]] = {}
    with atomic_output(output) as tmp:
        with (
            open(tmp, "wb") as raw,
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz,
        ):
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for name, path in sorted(files):
                    try:  # never a FIFO, device or link: opened without following, then fstat
                        reader = _HashingReader(path)
                    except (NotRegular, OSError):
                        raise ClaimFailed(
                            f"{name} is not a regular file", file=file, field=name
                        ) from None
                    try:  # streamed: evidence may be large
                        info = tarfile.TarInfo(name)
                        info.size = reader.st.st_size
                        info.mtime, info.mode, info.uid, info.gid = 0, 0o644, 0, 0
                        tar.addfile(info, reader)
                    finally:
                        reader.close()
                    digests[name] = (reader.hasher.hexdigest(), reader.st)
        for rel, group in items.items():
            if len(group) == 1 and group[0][0] == rel:
                found = digests[rel][0]
            else:
                listing = {
                    name[len(rel) + 1 :]: digest
                    for name, _ in group
                    for digest, st in [digests[name]]
                    if not is_snakemake_marker(name[len(rel) + 1 :], st)
                }
                found = sha256_bytes(canonical_json_bytes(dict(sorted(listing.items()))))
            if found != expected[rel]:
                raise ClaimFailed(
                    f"{rel} does not match the manifest: expected {expected[rel]}, found "
                    f"{found} (changed since the manifest bound it); nothing packed",
                    file=file,
                    field=rel,
                )
    return len(files)


MANIFEST_MEMBER = re.compile(r"^results/[^/]+/manifest\.json$")


def _archive_manifest(tmp: Path, names: list[str], archive: str) -> tuple[str, dict]:
    """The one ``results/<campaign>/manifest.json`` among an archive's members."""
    found = [n for n in names if MANIFEST_MEMBER.match(n)]
    if len(found) != 1:
        raise InputError(
            f"a campaign archive holds exactly one results/<campaign>/manifest.json "
            f"(found {len(found)})",
            file=archive,
            field="member",
        )
    return found[0], load_manifest(tmp / found[0])


def _check_members_named(manifest: dict, manifest_rel: str, names: list[str], archive: str):
    """Every file member is the manifest or lies at or under a path the manifest lists
    for the archive (config, evidence, recorded provenance)."""
    allowed = set(_members(manifest))
    for name in names:
        if name == manifest_rel:
            continue
        parts = Path(name).parts
        if not any("/".join(parts[:i]) in allowed for i in range(1, len(parts) + 1)):
            raise InputError(
                f"member {name[:200]!r} is not named by the manifest", file=archive, field="member"
            )


def unpack(
    archive: str | os.PathLike, output: str | os.PathLike, expect_root: str | None = None
) -> int:
    """Extract ``archive`` into ``output`` (absent or empty) refusing absolute paths,
    '..', links, devices, a member name given twice, and archives over the resource
    policy (members' total size over ``max_decompressed_bytes``, more members than
    ``max_archive_members``), all checked from the member headers before anything is
    written. Before the result is renamed into place the archive's manifest must hold
    for what was extracted (``check_run_inputs``: digests of config, evidence and
    recorded provenance, no yte config) and every member must be named by it. Atomic:
    on any refusal or error ``output`` is left as it was."""
    from tracecanary.canonical import atomic_output, check_output_target
    from tracecanary.limits import current_limits

    limits = current_limits()
    target = Path(output)
    check_output_target(target, directory=True)  # a symlink, a file, a non-empty folder
    if not Path(archive).is_file():
        raise InputError("no such file", file=str(archive))
    limits.check("max_file_bytes", Path(archive).stat().st_size, file=archive)
    corrupt = (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile)
    try:
        tar = tarfile.open(archive, mode="r:gz")
    except (*corrupt, OSError) as err:
        raise InputError(f"not a campaign archive: {err}", file=str(archive)) from None
    with tar:
        total = 0
        members = []
        seen: set[str] = set()
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
                key = name.as_posix()
                if key in seen:
                    raise InputError(
                        f"archive member {member.name[:200]!r} appears twice",
                        file=str(archive),
                        field="member",
                    )
                seen.add(key)
                total += member.size
                limits.check("max_decompressed_bytes", total, what="unpacked size", file=archive)
                members.append(member)
                limits.check(
                    "max_archive_members", len(members), what="archive members", file=archive
                )
        except (*corrupt, OSError) as err:
            raise InputError(f"corrupt campaign archive: {err}", file=str(archive)) from None
        with atomic_output(target, directory=True) as tmp:
            os.chmod(tmp, 0o755)
            try:
                tar.extractall(tmp, members=members, filter="data")
            except (*corrupt, OSError) as err:
                raise InputError(f"corrupt campaign archive: {err}", file=str(archive)) from None
            names = [Path(m.name).as_posix() for m in members if m.isfile()]
            manifest_rel, manifest = _archive_manifest(tmp, names, str(archive))
            _check_members_named(manifest, manifest_rel, names, str(archive))
            check_run_inputs(
                manifest, tmp, file=f"{archive}: {manifest_rel}", expect_root=expect_root
            )
    return len(members)
