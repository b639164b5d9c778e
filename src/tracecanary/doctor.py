"""Checks of the installation and environment (``tracecanary doctor``).

Each check is a ``Check``: what was looked at, whether it is required, what was found
and, when it is missing, the command that fixes it. ``run_checks`` runs them all; it
never raises for a broken environment (a broken piece is a failed check), writes
nothing but one probe file in the work directory, removed again, and creates no
directory.

Required: the Python version and the libraries ``pyproject.toml`` declares (read from
the checkout's ``pyproject.toml`` when there is one, else from the installed package
metadata), torch's gloo backend, the ``snakemake`` executable, the SLURM executor plugin,
the package data (every schema of ``formats.ids.FORMAT_SCHEMAS`` and every shipped
default), a valid ``TRACECANARY_LIMITS`` and a writable work directory. Optional
(reported, never a failure): the ``dev``/``bench`` extras, NCCL, CUDA devices, Slurm's
``sbatch`` and Chromium (the HTML report test).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import os
import platform
import shutil
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

PACKAGE = "tracecanary"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
OPTIONAL_EXTRAS = ("dev", "bench")
SLURM_PLUGIN_MODULE = "snakemake_executor_plugin_slurm"
DEFAULT_WORKDIR = "results"

OK, MISSING, ABSENT = "ok", "MISSING", "absent (optional)"


@dataclass(frozen=True)
class Check:
    """One checked piece. ``ok`` False on a required check makes ``doctor`` exit 1."""

    group: str
    name: str
    required: bool
    ok: bool
    found: str
    fix: str | None = None

    @property
    def status(self) -> str:
        if self.ok:
            return OK
        return MISSING if self.required else ABSENT

    def as_json(self) -> dict:
        return {**dataclasses.asdict(self), "status": self.status}


def find_chromium() -> str | None:
    """The path of a Chromium-family browser on PATH, or None."""
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def declared_requirements() -> tuple[str, str | None, list[Requirement]]:
    """(where they were read, requires-python, requirements with extras markers).

    The checkout's pyproject.toml is the one home of the declared versions; an installed
    wheel has no checkout, and then the package metadata written from it is read."""
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    if pyproject.is_file():
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        if project.get("name") == PACKAGE:
            reqs = [Requirement(r) for r in project.get("dependencies", [])]
            for extra, items in sorted(project.get("optional-dependencies", {}).items()):
                reqs += [Requirement(f'{r}; extra == "{extra}"') for r in items]
            return str(pyproject), project.get("requires-python"), reqs
    meta = importlib.metadata.metadata(PACKAGE)
    reqs = [Requirement(r) for r in importlib.metadata.requires(PACKAGE) or []]
    return "installed package metadata", meta.get("Requires-Python"), reqs


def _extra_of(req: Requirement) -> str | None:
    for extra in OPTIONAL_EXTRAS:
        if req.marker is not None and req.marker.evaluate({"extra": extra}):
            if not req.marker.evaluate({"extra": ""}):
                return extra
    return None


def _installed_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_python(requires_python: str | None) -> Check:
    version = platform.python_version()
    spec = SpecifierSet(requires_python or "")
    return Check(
        "python",
        "python",
        True,
        spec.contains(version),
        f"{version} ({sys.executable}); needs {requires_python or 'any'}",
        None if spec.contains(version) else f"use a Python {requires_python}",
    )


def check_requirement(req: Requirement) -> Check:
    """Installed and within the declared specifier (extras are optional)."""
    extra = _extra_of(req)
    group = "library" if extra is None else f"extra [{extra}]"
    installed = _installed_version(req.name)
    wanted = str(req.specifier) or "any version"
    fix = f"pip install '{req.name}{req.specifier}'"
    if extra is not None:
        fix += f"  (or pip install -e '.[{extra}]')"
    if installed is None:
        return Check(group, req.name, extra is None, False, f"not installed; needs {wanted}", fix)
    try:
        ok = req.specifier.contains(Version(installed), prereleases=True)
    except InvalidVersion:
        ok = False
    return Check(
        group, req.name, extra is None, ok, f"{installed}; needs {wanted}", None if ok else fix
    )


def check_torch() -> list[Check]:
    """torch's build and its distributed backends (gloo required; NCCL, CUDA optional)."""
    if importlib.util.find_spec("torch") is None:
        fix = "pip install 'torch==2.13.0'"
        return [Check("torch", "torch.distributed gloo", True, False, "torch not importable", fix)]
    import torch
    import torch.distributed as dist

    build = f"{torch.__version__}, git {torch.version.git_version[:10]}, CUDA build {torch.version.cuda or 'none'}"
    out = [Check("torch", "torch build", True, True, build)]
    available = dist.is_available()
    gloo = available and dist.is_gloo_available()
    out.append(
        Check(
            "torch",
            "torch.distributed gloo",
            True,
            gloo,
            "available" if gloo else "not available in this build",
            None if gloo else "pip install 'torch==2.13.0' (a build with torch.distributed)",
        )
    )
    nccl = available and dist.is_nccl_available()
    out.append(
        Check(
            "torch",
            "torch.distributed NCCL",
            False,
            nccl,
            "available" if nccl else "not in this build (CPU-only torch)",
            None
            if nccl
            else "for GPU replay: a CUDA build of torch 2.13.0 from download.pytorch.org",
        )
    )
    devices = torch.cuda.device_count() if torch.cuda.is_available() else 0
    names = ", ".join(torch.cuda.get_device_name(i) for i in range(devices))
    out.append(
        Check(
            "torch",
            "CUDA devices",
            False,
            devices > 0,
            f"{devices}" + (f" ({names})" if names else ""),
            None if devices else "for GPU replay: a machine with an NVIDIA GPU and driver",
        )
    )
    return out


def check_workflow_tools() -> list[Check]:
    snakemake = shutil.which("snakemake")
    plugin = importlib.util.find_spec(SLURM_PLUGIN_MODULE) is not None
    sbatch = shutil.which("sbatch")
    return [
        Check(
            "workflow",
            "snakemake executable",
            True,
            snakemake is not None,
            snakemake or "not on PATH",
            None if snakemake else "pip install 'snakemake>=9.20,<10' (and put its bin/ on PATH)",
        ),
        Check(
            "workflow",
            "SLURM executor plugin",
            True,
            plugin,
            "importable" if plugin else f"module {SLURM_PLUGIN_MODULE} not importable",
            None if plugin else "pip install 'snakemake-executor-plugin-slurm==2.8.0'",
        ),
        Check(
            "workflow",
            "Slurm sbatch",
            False,
            sbatch is not None,
            sbatch or "not on PATH (needed only to submit to a cluster)",
            None if sbatch else "apt-get install slurm-client (on a cluster login node)",
        ),
    ]


def check_chromium() -> Check:
    path = find_chromium()
    return Check(
        "report",
        "Chromium (HTML report test)",
        False,
        path is not None,
        path or f"none of {', '.join(CHROMIUM_NAMES)} on PATH",
        None if path else "apt-get install chromium",
    )


def _probe_directory(path: Path) -> str | None:
    """None when a file can be created (and is removed again) in ``path``, else why not."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".tracecanary-doctor-", dir=path)
    except OSError as err:
        return f"cannot create a file in {path}: {err.strerror or err}"
    os.close(fd)
    os.unlink(probe)
    return None


def check_workdir(workdir: str | os.PathLike) -> Check:
    """The work directory is writable, or (absent) its nearest existing ancestor is a
    writable directory so it can be created. Creates nothing but a removed probe file."""
    target = Path(workdir)
    name = f"write access to {target}"
    fix = f"point --workdir at a writable directory, or make {target} one you can write"
    existing = target
    while not existing.exists() and existing != existing.parent:
        if existing.is_symlink():  # a dangling link: creating through it would surprise
            return Check("filesystem", name, True, False, f"{existing} is a dangling link", fix)
        existing = existing.parent
    if not existing.is_dir():
        what = "a file" if existing.is_file() else "not a directory"
        return Check("filesystem", name, True, False, f"{existing} is {what}", fix)
    problem = _probe_directory(existing)
    if problem:
        return Check("filesystem", name, True, False, problem, fix)
    found = (
        "writable" if existing == target else f"absent; {existing} is writable, so it can be made"
    )
    return Check("filesystem", name, True, True, found)


def check_limits() -> list[Check]:
    """The resource limits in force; an invalid TRACECANARY_LIMITS is a failed check."""
    from tracecanary.errors import InputError
    from tracecanary.limits import Limits, current_limits

    spec = os.environ.get("TRACECANARY_LIMITS")
    try:
        limits = current_limits()
    except InputError as err:
        return [
            Check(
                "limits",
                "TRACECANARY_LIMITS",
                True,
                False,
                err.message,
                "fix or unset TRACECANARY_LIMITS (docs/limits.md lists the names)",
            )
        ]
    defaults = Limits()
    out = [Check("limits", "TRACECANARY_LIMITS", True, True, spec or "unset (defaults)")]
    for field in dataclasses.fields(limits):
        value = getattr(limits, field.name)
        changed = "" if value == getattr(defaults, field.name) else " (overridden)"
        out.append(Check("limits", field.name, True, True, f"{value:,}{changed}"))
    return out


def check_package_data() -> list[Check]:
    """Every format's schema loads and every shipped default file exists."""
    from tracecanary.defaults import DEFAULT_FILES, default_file
    from tracecanary.formats.ids import FORMAT_SCHEMAS
    from tracecanary.formats.schemas import load_schema

    fix = "reinstall: pip install -e . (package data formats/schemas/*.json, defaults/*.yaml)"
    broken = []
    for name in sorted(set(FORMAT_SCHEMAS.values())):
        try:
            load_schema(name)
        except (OSError, ValueError) as err:
            broken.append(f"{name}.schema.json ({type(err).__name__})")
    schemas = Check(
        "package data",
        "schemas",
        True,
        not broken,
        f"{len(set(FORMAT_SCHEMAS.values()))} found"
        if not broken
        else "missing " + ", ".join(broken),
        None if not broken else fix,
    )
    absent = [name for name in DEFAULT_FILES if not Path(default_file(name)).is_file()]
    defaults = Check(
        "package data",
        "shipped defaults",
        True,
        not absent,
        ", ".join(DEFAULT_FILES) if not absent else "missing " + ", ".join(absent),
        None if not absent else fix,
    )
    return [schemas, defaults]


def run_checks(workdir: str | os.PathLike = DEFAULT_WORKDIR) -> list[Check]:
    """Every check, in table order (see the module doc)."""
    from tracecanary import __version__

    try:
        where, requires_python, reqs = declared_requirements()
    except (
        OSError,
        ValueError,
        InvalidRequirement,
        importlib.metadata.PackageNotFoundError,
    ) as err:
        where, requires_python, reqs = f"unreadable ({err})", None, []
    checks = [
        Check(
            "tracecanary", "tracecanary", True, True, f"{__version__}; requirements from {where}"
        ),
        check_python(requires_python),
    ]
    checks += [check_requirement(r) for r in reqs]
    checks += check_torch()
    checks += check_workflow_tools()
    checks.append(check_chromium())
    checks.append(check_workdir(workdir))
    checks += check_package_data()
    checks += check_limits()
    return checks


def render_table(checks: list[Check]) -> str:
    """A fixed-width table (group, check, status, found), then one ``fix:`` line per
    missing or absent piece."""
    header = ("group", "check", "status", "found")
    rows = [(c.group, c.name, c.status, c.found) for c in checks]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    lines = []
    for row in [header, tuple("-" * w for w in widths) + ("-----",), *rows]:
        lines.append(
            "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True))
            + "  "
            + row[3]
        )
    fixes = [c for c in checks if not c.ok and c.fix]
    if fixes:
        lines.append("")
        for c in fixes:
            label = "missing" if c.required else "optional"
            lines.append(f"{label}: {c.name}: fix: {c.fix}")
    return "\n".join(lines)


def missing_required(checks: list[Check]) -> list[Check]:
    return [c for c in checks if c.required and not c.ok]
