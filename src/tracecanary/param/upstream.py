"""``replay-param``: replay an export in upstream PARAM's ``commsTraceReplay`` and keep the
evidence in the attempt archive format ``replay-physical`` writes.

Order of events, as ``replay-physical``: everything that can be refused is refused
BEFORE any process starts (exit 2, nothing written): the export directory
(``param.program``), the ops upstream would mis-execute (``param.target``), the run
parameters, the output target, and PARAM itself (found, importable, and every
compatibility patch of ``param.compat`` applicable). Then the ranks run on the launcher
of ``replay-physical`` (``physical.launch``: one machine's ranks forked by
``physical.local_ranks``, or torchrun's static multi-node rendezvous; under SLURM through ``physical.slurm_launch``), each rank
being ``param.upstream_launcher`` (PARAM's ``main()`` with the patches applied, PARAM's
files untouched). The assembling node imports PARAM's ``replayedCommsPerf.rank<r>.json``
(``param.results``: every row joined to the export entry it replayed) and writes the
archive: ``attempt.json`` (source ``param``), ``environment.json`` (with ``param``: the
repository, commit, module and location of the PARAM that ran, and every patch applied),
``rows.parquet`` and ``launch.log``. The attempt is ``complete`` only when every rank
finished and every op the export gives a rank was replayed in every pass; otherwise
``failed`` (archive still written, exit 1).

Timing semantics differ from ``replay-physical``'s native mode and the archive says so
(``NOTES``): PARAM barriers the op's group before and after every op, so its
``latency_ns`` excludes waiting for late ranks; ours includes it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tracecanary.canonical import check_output_target
from tracecanary.errors import InputError, RunFailed
from tracecanary.param import compat
from tracecanary.param.program import load_program_dir
from tracecanary.param.results import param_record, read_param_rows
from tracecanary.param.target import UPSTREAM_TARGET, check_program_for_upstream
from tracecanary.physical import archive
from tracecanary.physical.environment import launcher_record
from tracecanary.physical.launch import Topology, launch
from tracecanary.physical.replay import (
    check_program_set,
    check_run_params,
    input_record,
    staging_dir,
)

REPLAYER_MODULE = "param_bench.train.comms.pt.commsTraceReplay"  # as PARAM's setup.py installs it
REPLAYER_FILE = Path("train/comms/pt/commsTraceReplay.py")
LAUNCHER_MODULE = "tracecanary.param.upstream_launcher"
PARAM_REPOSITORY = "facebookresearch/param"
PARAM_WARMUP_PASSES = 1  # --do-warm-up is a store_true flag defaulting to True: always one
PREFLIGHT_TIMEOUT_S = 120.0
_COMMIT = re.compile(r"\b[0-9a-f]{40}\b")
_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")

NOTES = [
    "the pre-op barrier on the op's group (commsTraceReplay.py:778) means latency_ns "
    "excludes waiting for late ranks; replay-physical's native mode includes it",
]


@dataclass(frozen=True)
class ParamInstall:
    """Where the PARAM that runs comes from: the replayer ``module``, the directory to put
    first on ``PYTHONPATH`` (a checkout given as PATH; None for an installed module),
    ``location`` (the checkout or the module's directory) and the commit, if known."""

    module: str
    pythonpath: Path | None
    location: str
    commit: str | None
    commit_source: str | None

    def record(self) -> dict:
        """``environment.json``'s ``param``."""
        return {
            "repository": PARAM_REPOSITORY,
            "commit": self.commit,
            "commit_source": self.commit_source,
            "module": self.module,
            "location": self.location,
            "target": UPSTREAM_TARGET,
            "compatibility_patches": compat.records(),
        }


def _checkout_commit(root: Path) -> tuple[str | None, str | None]:
    """The commit of a PARAM checkout: ``git`` when ``root`` is a repository's top level,
    else the 40-hex commit its SOURCE.md names (a snapshot such as ../shared's)."""
    try:
        top = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--show-toplevel", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.split()
        if len(top) == 2 and Path(top[0]).resolve() == root.resolve():
            return top[1], "git"
    except (OSError, subprocess.SubprocessError):
        pass
    source = root / "SOURCE.md"
    if source.is_file():
        found = _COMMIT.search(source.read_text(encoding="utf-8", errors="replace"))
        if found:
            return found.group(0), "SOURCE.md"
    return None, None


def resolve_param(spec: str, staging: Path, commit: str | None = None) -> ParamInstall:
    """``spec`` is a PARAM checkout (a directory holding train/comms/pt/commsTraceReplay.py,
    imported as ``param_bench`` through a link made in the empty directory ``staging``) or an importable module
    name (the replayer, or the package holding it). ``commit`` overrides what is found."""
    root = Path(spec)
    if root.is_dir():
        if not (root / REPLAYER_FILE).is_file():
            raise InputError(
                f"not a PARAM checkout: {REPLAYER_FILE} is missing", file=spec, field="--param"
            )
        link_dir = staging
        (link_dir / "param_bench").symlink_to(root.resolve(), target_is_directory=True)
        found, source = _checkout_commit(root)
        return ParamInstall(
            REPLAYER_MODULE,
            link_dir,
            str(root.resolve()),
            commit or found,
            "option" if commit else source,
        )
    if not _MODULE_NAME.match(spec):
        raise InputError("neither a directory nor a module name", file=spec, field="--param")
    module = spec if spec.endswith(".commsTraceReplay") else f"{spec}.commsTraceReplay"
    return ParamInstall(module, None, module, commit, "option" if commit else None)


_PREFLIGHT = """
import importlib, json, sys
from tracecanary.param import compat
try:
    m = importlib.import_module(sys.argv[1])
except Exception as err:
    print(json.dumps({"error": f"{type(err).__name__}: {err}"}))
else:
    print(json.dumps({"file": getattr(m, "__file__", None), "problems": compat.check(m)}))
"""


def preflight(install: ParamInstall) -> str:
    """Import the replayer in a fresh interpreter (as the ranks will) and check every patch
    applies; return the module's file. InputError naming what is missing otherwise."""
    env = _rank_env(install)
    done = subprocess.run(
        [sys.executable, "-c", _PREFLIGHT, install.module],
        capture_output=True,
        text=True,
        timeout=PREFLIGHT_TIMEOUT_S,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
    )
    lines = [x for x in done.stdout.splitlines() if x.startswith("{")]
    doc = json.loads(lines[-1]) if lines else {"error": done.stderr.strip()[-300:]}
    if "error" in doc:
        raise InputError(
            f"cannot import PARAM's replayer {install.module}: {doc['error']}"[:500],
            field="--param",
        )
    if doc["problems"]:
        raise InputError(
            "PARAM differs from 1e115ff, the compatibility patches cannot apply: "
            + "; ".join(doc["problems"]),
            file=install.location,
            field="--param",
        )
    return str(doc["file"])


def _rank_env(install: ParamInstall) -> dict[str, str]:
    if install.pythonpath is None:
        return {}
    path = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(install.pythonpath), path) if p)}


def param_command(export_dir: Path, results: Path, *, backend: str, iters: int, ts: bool) -> list:
    """PARAM's own command line (after ``--``): basic trace, blocking replay, results."""
    args = [
        "--trace-path",
        str(export_dir.resolve()),
        "--trace-type",
        "basic",
        "--backend",
        backend,
        "--device",
        "cuda" if backend == "nccl" else "cpu",
        "--output-path",
        str(results.resolve()),
        "--num-replays",
        str(iters),
    ]
    return args + (["--use-timestamp"] if ts else [])


def _check_program(programs, export_dir: Path, topology: Topology, use_timestamps: bool) -> None:
    check_program_set(programs, export_dir, topology, use_timestamps)
    check_program_for_upstream(programs)


def replay_param(
    export_dir: str | Path,
    out: str | Path,
    *,
    param: str,
    backend: str,
    topology: Topology,
    iters: int = 5,
    use_timestamps: bool = False,
    timeout_s: float = 900.0,
    param_commit: str | None = None,
    replace: bool = False,
    progress: TextIO | None = None,
) -> dict | None:
    """Run one upstream attempt; return its attempt document (None on a non-assembling
    node). See the module docstring for what is refused, written and raised."""
    export_dir = Path(export_dir)
    out = Path(out)
    check_run_params(PARAM_WARMUP_PASSES, iters, timeout_s, topology)
    programs = load_program_dir(export_dir, backend=backend)
    _check_program(programs, export_dir, topology, use_timestamps)
    if topology.assembles:
        check_output_target(out, directory=True, replace=replace)
    links = Path(tempfile.mkdtemp(prefix="tracecanary-param-"))  # this node's PYTHONPATH link
    staging = staging_dir(out, topology)
    try:
        install = resolve_param(param, links, param_commit)
        module_file = preflight(install)
        if install.pythonpath is None:
            install = dataclasses.replace(install, location=str(Path(module_file).parent))
        staging.mkdir(parents=True, exist_ok=True)
        results = staging / "results"
        worker_args = [
            "--staging",
            str(staging.resolve()),
            "--module",
            install.module,
            "--backend",
            backend,
            "--",
            *param_command(export_dir, results, backend=backend, iters=iters, ts=use_timestamps),
        ]
        attempt_base = {
            "kind": "replay",
            "source": "param",
            "backend": backend,
            "nproc": topology.nproc,
            "nnodes": topology.nnodes,
            "world_size": len(programs),
            "warmup": PARAM_WARMUP_PASSES,
            "iters": iters,
            "use_timestamps": use_timestamps,
            "physical_config": None,
            "input": input_record(export_dir),
            "fault": None,
            "started_utc": archive.utc_now(),
        }
        result = launch(
            worker_args,
            topology,
            staging,
            timeout_s=timeout_s,
            env=_rank_env(install),
            progress=progress,
            module=LAUNCHER_MODULE,
        )
        if not topology.assembles:
            if not result.ok:
                raise RunFailed(
                    f"PARAM replay failed on node {topology.node_rank}: {result.reason}"
                )
            return None
        doc = _write_attempt(out, attempt_base, result, install, staging, programs, export_dir)
    finally:
        shutil.rmtree(links, ignore_errors=True)
        if topology.assembles:
            shutil.rmtree(staging, ignore_errors=True)
    if doc["status"] != "complete":
        raise RunFailed(
            f"PARAM replay failed: {doc['reason']} (evidence kept in {out})", file=str(out)
        )
    return doc


def _write_attempt(out, attempt_base, result, install, staging, programs, export_dir) -> dict:
    """The archive of a launched run: PARAM's rows, the environment with PARAM's record."""
    results = staging / "results"
    rows = None
    problems: list[str] = [] if result.ok else [str(result.reason)]
    if results.is_dir() and any(results.iterdir()):
        rows = read_param_rows(results, program_dir=export_dir, programs=programs)
        problems += rows.incomplete
    elif result.ok:
        problems.append("PARAM wrote no replayedCommsPerf.rank<r>.json")
    status = "failed" if problems else "complete"
    param = (
        param_record("(staging; removed after import)", rows)
        if rows is not None
        else {"results_dir": "(none written)", "result_files": {}, "notes": []}
    )
    param["notes"] = [*param["notes"], *NOTES]
    attempt = {
        **attempt_base,
        "status": status,
        "reason": ("; ".join(problems))[:1000] if problems else None,
        "wall_time_ns": result.wall_time_ns,
        "correctness": {"checked_rows": 0, "incorrect_rows": 0},
        "param": param,
    }
    environment = archive.environment_document(
        {**launcher_record(attempt_base["backend"]), "param": install.record()},
        staging,
        len(programs),
    )
    return archive.write_archive(
        out,
        attempt,
        environment=environment,
        rows=None if rows is None else rows.table,
        rows_file="rows.parquet" if status == "complete" else "partial/rows.parquet",
        log=result.log,
    )
