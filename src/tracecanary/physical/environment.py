"""What an attempt ran on: captured per rank (in the worker) and once (in the launcher).

``environment.json`` (schemas/environment.schema.json) = the launcher's record plus one
record per rank: host, SLURMD_NODENAME when set, device, CPU model, the rank's
NCCL_*/GLOO_*/OMP_*/SLURM_*/TORCH_NCCL_*/TORCH_DISTRIBUTED_* variables and
CUDA_VISIBLE_DEVICES, and the NCCL version the rank's torch was built with (nccl only).
"""

from __future__ import annotations

import importlib.util
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import tracecanary

if TYPE_CHECKING:  # imported inside a rank: the launcher's record reads torch's version file
    import torch

ENV_PREFIXES = ("NCCL_", "GLOO_", "OMP_", "SLURM_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_")
ENV_NAMES = ("CUDA_VISIBLE_DEVICES", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "LOCAL_WORLD_SIZE")


def captured_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The variables that can change how collectives run, sorted by name."""
    environ = os.environ if environ is None else environ
    return {k: environ[k] for k in sorted(environ) if k.startswith(ENV_PREFIXES) or k in ENV_NAMES}


def cpu_model() -> str:
    """``model name`` from /proc/cpuinfo, else platform.processor(), else "unknown"."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def nccl_version() -> str | None:
    import torch

    if not torch.cuda.is_available():
        return None
    try:
        v = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - a build without NCCL has no version to report
        return None
    return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)


def place_rank(local_rank: int, local_world_size: int) -> dict:
    """Pin this CPU rank to one core and fix torch's intra-op threads to 1, where the OS
    allows; the record says what was done. A rank is pinned only when the cores this
    process may use number at least the ranks on the node (core = allowed[local_rank]);
    with fewer cores, pinning would tie two ranks to one core while another idles, so the
    OS schedules them and ``reason`` says so."""
    import torch

    torch.set_num_threads(1)
    record = {"pinned": False, "cpu_affinity": [], "torch_threads": torch.get_num_threads()}
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError) as err:
        return {**record, "reason": f"affinity not available: {err}"}
    record["cpu_affinity"] = allowed
    if len(allowed) < local_world_size:
        return {
            **record,
            "reason": f"{local_world_size} ranks on {len(allowed)} cores: not pinned",
        }
    core = allowed[local_rank]
    try:
        os.sched_setaffinity(0, {core})
    except OSError as err:
        return {**record, "reason": f"sched_setaffinity refused: {err}"}
    return {**record, "pinned": True, "cpu_affinity": [core], "reason": None}


def rank_record(rank: int, local_rank: int, backend: str, device: torch.device) -> dict:
    """One rank's environment (called inside the worker, after device selection)."""
    import torch

    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        dev = {
            "type": "cuda",
            "index": device.index,
            "name": props.name,
            "total_memory_bytes": int(props.total_memory),
            "uuid": str(getattr(props, "uuid", "")),
        }
    else:
        dev = {"type": "cpu", "index": None, "name": cpu_model()}
    return {
        "rank": rank,
        "local_rank": local_rank,
        "host": socket.gethostname(),
        "slurmd_nodename": os.environ.get("SLURMD_NODENAME"),
        "pid": os.getpid(),
        "device": dev,
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "nccl_version": nccl_version() if backend == "nccl" else None,
        "env": captured_env(),
    }


def git_commit(path: Path | None = None) -> tuple[str | None, bool | None]:
    """``(commit, dirty)`` of the checkout holding the package, ``(None, None)`` if none."""
    where = path or Path(tracecanary.__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    return commit or None, bool(status.strip())


def installed_torch_version() -> dict:
    """``torch.__version__``, ``torch.version.cuda`` and ``git_version`` of the torch this
    interpreter imports, read from its ``torch/version.py`` alone (importing torch takes
    seconds; the ranks that do import it run this same interpreter and torch)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("torch is not installed (pip install torch==2.13.0)")
    path = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    version_spec = importlib.util.spec_from_file_location("_tracecanary_torch_version", path)
    module = importlib.util.module_from_spec(version_spec)
    version_spec.loader.exec_module(module)  # a module of constants, not torch/__init__
    return {
        "version": module.__version__,
        "cuda": getattr(module, "cuda", None),
        "git_version": getattr(module, "git_version", None),
    }


def launcher_record(backend: str) -> dict:
    """The launcher host's view: versions and platform (rank records are added later)."""
    commit, dirty = git_commit()
    return {
        "tracecanary": {"version": tracecanary.__version__, "commit": commit, "dirty": dirty},
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": installed_torch_version(),
        "backend": backend,
        "launcher_host": socket.gethostname(),
        "launcher_cpu_model": cpu_model(),
        "launcher_env": captured_env(),
    }
