"""``replay-physical``: validate a PARAM program directory, launch it, keep the evidence.

Order of events: the whole directory is validated (every rank file, cross-rank
consistency) and the physical configuration resolved BEFORE any process starts, so bad
input exits 2 with nothing written. Then the workers run on the launcher (see
``launch``), and the node that assembles (standalone, or node rank 0) writes the
attempt archive (see ``archive``). A failed attempt raises ``RunFailed`` (exit 1)
after its archive is written.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import TextIO

from tracecanary.canonical import digest_path, sha256_file
from tracecanary.errors import InputError, RunFailed
from tracecanary.param.program import load_program_dir
from tracecanary.physical import archive
from tracecanary.physical.config import resolve_config
from tracecanary.physical.launch import Topology
from tracecanary.physical.rank_contract import REPLAY_ROW_SCHEMA, parse_fault
from tracecanary.physical.run import launch_and_archive

REPLAY_SORT_KEYS = ["iteration", "rank", "entry"]
EXPORT_KEYS = ("format", "execution")  # copied from export.json besides *digest / *sha256


def input_record(directory: Path) -> dict:
    """``{path, digest, export_digest?, export_fields?}`` for ``attempt.json``: the tree
    digest of the directory, the SHA-256 of its ``export.json`` when present, and that
    file's top-level string fields naming a digest (``*digest``, ``*sha256``) or saying
    what was exported (``format``, ``execution``)."""
    record: dict = {"path": str(directory), "digest": digest_path(directory)}
    export = directory / "export.json"
    if export.is_file():
        record["export_digest"] = sha256_file(export)
        try:
            doc = json.loads(export.read_text(encoding="utf-8"))
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            fields = {
                k: v
                for k, v in doc.items()
                if isinstance(v, str) and (k.endswith(("digest", "sha256")) or k in EXPORT_KEYS)
            }
            if fields:
                record["export_fields"] = dict(sorted(fields.items()))
    return record


def staging_dir(out: Path, topology: Topology) -> Path:
    """Beside the output; shared by all nodes of a multi-node run (named by its rendezvous)."""
    if topology.multi_node:
        tag = topology.rdzv_id or (topology.rdzv_endpoint or "run").replace(":", "_")
    else:
        tag = uuid.uuid4().hex[:12]
    return out.parent / f".{out.name}.staging-{tag}"


def check_run_params(warmup: int, iters: int, timeout_s: float, topology: Topology) -> None:
    if warmup < 0:
        raise InputError("must be >= 0", field="--warmup")
    if iters < 1:
        raise InputError("must be >= 1", field="--iters")
    if timeout_s <= 0:
        raise InputError("must be > 0", field="--timeout")
    if topology.nproc < 1 or topology.nnodes < 1:
        raise InputError("--nproc and --nnodes must be >= 1", field="--nproc")
    if topology.multi_node and not topology.rdzv_endpoint:
        raise InputError(
            "a multi-node run needs --rdzv-endpoint HOST:PORT", field="--rdzv-endpoint"
        )
    if topology.multi_node and topology.node_rank is None:
        raise InputError(
            "a multi-node run needs this node's rank (static rendezvous: node 0 holds rank 0 "
            "and assembles the archive)",
            field="--node-rank",
        )
    if topology.node_rank is not None and not 0 <= topology.node_rank < topology.nnodes:
        raise InputError(f"must be in [0, {topology.nnodes})", field="--node-rank")


def check_program_set(programs, program_dir, topology, use_timestamps: bool) -> None:
    """Refuse (InputError) a program set that does not fit the launch: one rank file per
    launched rank, and a start time on every executed op when replaying timestamps."""
    if topology.world_size != len(programs):
        raise InputError(
            f"{len(programs)} rank files but --nproc {topology.nproc} x --nnodes "
            f"{topology.nnodes} = {topology.world_size} ranks",
            file=str(program_dir),
        )
    if use_timestamps:
        for prog in programs:
            ops = prog.ops[prog.ops["executes"]]
            missing = ops[ops["start_time_ns"] < 0]
            if len(missing):
                raise InputError(
                    "--use-timestamps needs startTime_ns on every op",
                    file=prog.path,
                    record=int(missing["entry"].iloc[0]),
                    field="startTime_ns",
                )


def replay_physical(
    program_dir: str | Path,
    out: str | Path,
    *,
    backend: str,
    topology: Topology,
    warmup: int = 1,
    iters: int = 5,
    use_timestamps: bool = False,
    configs_path: str | Path,
    config_name: str | None = None,
    timeout_s: float = 900.0,
    fault: str | None = None,
    progress: TextIO | None = None,
) -> dict | None:
    """Run one attempt; return its attempt document (None on a non-assembling node)."""
    program_dir = Path(program_dir)
    out = Path(out)
    check_run_params(warmup, iters, timeout_s, topology)
    try:
        parse_fault(fault)
    except ValueError as err:
        raise InputError(str(err), field="--fault") from err
    programs = load_program_dir(program_dir, backend=backend)
    check_program_set(programs, program_dir, topology, use_timestamps)
    world_size = len(programs)
    config = resolve_config(configs_path, config_name, backend)
    config_record = {**config, "source": str(configs_path)}
    if backend == "nccl":
        import torch

        if not torch.cuda.is_available():
            raise InputError(
                "backend nccl needs CUDA devices, none is available", field="--backend"
            )
        if torch.cuda.device_count() < topology.nproc:
            raise InputError(
                f"--nproc {topology.nproc} > {torch.cuda.device_count()} CUDA devices",
                field="--nproc",
            )

    attempt_base = {
        "kind": "replay",
        "source": "tracecanary",
        "backend": backend,
        "nproc": topology.nproc,
        "nnodes": topology.nnodes,
        "world_size": world_size,
        "warmup": warmup,
        "iters": iters,
        "use_timestamps": use_timestamps,
        "physical_config": config_record,
        "input": input_record(program_dir),
        "fault": fault,
        "started_utc": archive.utc_now(),
    }
    staging = staging_dir(out, topology)
    staging.mkdir(parents=True, exist_ok=True)
    config_file = staging / f"config-{uuid.uuid4().hex[:12]}.json"
    config_file.write_text(json.dumps(config), encoding="utf-8")
    worker_args = [
        "replay",
        "--program",
        str(program_dir.resolve()),
        "--staging",
        str(staging.resolve()),
        "--backend",
        backend,
        "--warmup",
        str(warmup),
        "--iters",
        str(iters),
        "--pg-timeout",
        str(timeout_s),
        "--config",
        str(config_file.resolve()),
    ]
    if use_timestamps:
        worker_args.append("--use-timestamps")
    if fault:
        worker_args += ["--fault", fault]
    doc = launch_and_archive(
        worker_args,
        what="attempt",
        topology=topology,
        staging=staging,
        timeout_s=timeout_s,
        env=config["env"],
        progress=progress,
        out=out,
        attempt_base=attempt_base,
        backend=backend,
        world_size=world_size,
        schema=REPLAY_ROW_SCHEMA,
        sort_keys=REPLAY_SORT_KEYS,
    )
    if doc is None:
        return None
    if doc["status"] != "complete":
        raise RunFailed(f"attempt failed: {doc['reason']} (evidence kept in {out})", file=str(out))
    return doc
