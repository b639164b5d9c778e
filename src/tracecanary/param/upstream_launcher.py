"""One rank of an upstream PARAM replay: ``python -m tracecanary.param.upstream_launcher``
on the physical launcher (``tracecanary.physical.launch``), started by ``replay-param``.

``--staging S --module M -- ARGS...``: imports PARAM's replayer module ``M``, applies
the compatibility patches (``tracecanary.param.compat``) to it, and runs its ``main()``
with ``ARGS`` as its command line. PARAM's own files are never edited.

Evidence, as the tracecanary worker writes it (``tracecanary.physical.worker``):
``S/rank<r>/env.json`` first (the rank's environment plus the patches applied), then,
after PARAM's ``main()`` returned, ``done.json`` followed by a final barrier (so the
assembling node never races a slower one); on any exception ``failed.json`` with the
error, and the exception propagates (non-zero exit).

PARAM picks its world size and rank from MPI launchers' variables before torchrun's
(``comms_utils.read_comms_env_vars``: ``PMI_SIZE``/``OMPI_COMM_WORLD_SIZE``/... before
``WORLD_SIZE``; ``SLURM_NTASKS_PER_NODE`` as its local size): under ``srun`` those
describe the one launcher task per node, not the ranks. This rank therefore removes the
MPI variables and sets ``LOCAL_SIZE`` from torchrun's ``LOCAL_WORLD_SIZE`` before PARAM
reads them; the variables it changed are listed in ``env.json`` (``param_env_overrides``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import traceback
from pathlib import Path

# PARAM reads these before torchrun's RANK/WORLD_SIZE/LOCAL_RANK (comms_utils.py:293-350).
MPI_LAUNCHER_VARS = (
    "MV2_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "MV2_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
    "MPI_LOCALRANKID",
    "MV2_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALNRANKS",
    "MV2_COMM_WORLD_LOCAL_SIZE",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
)


def _write_json(path: Path, doc: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def torchrun_env_overrides(environ: dict[str, str]) -> dict[str, str | None]:
    """Variable -> new value (None = removed) so that PARAM sees torchrun's ranks."""
    changes: dict[str, str | None] = {k: None for k in MPI_LAUNCHER_VARS if k in environ}
    local_world = environ.get("LOCAL_WORLD_SIZE")
    if local_world is not None and environ.get("LOCAL_SIZE") != local_world:
        changes["LOCAL_SIZE"] = local_world
    return changes


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tracecanary.param.upstream_launcher")
    parser.add_argument("--staging", required=True)
    parser.add_argument("--module", required=True, help="PARAM's commsTraceReplay module")
    parser.add_argument("--backend", choices=("gloo", "nccl"), required=True)
    parser.add_argument("param_args", nargs=argparse.REMAINDER)
    return parser


def run(args: argparse.Namespace, stage: Path, rank: int) -> None:
    import torch
    import torch.distributed as dist

    from tracecanary.param import compat
    from tracecanary.physical.environment import rank_record

    overrides = torchrun_env_overrides(dict(os.environ))
    for key, value in overrides.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if args.backend == "nccl" else torch.device("cpu")
    record = rank_record(rank, local_rank, args.backend, device)
    record["param_env_overrides"] = overrides
    _write_json(stage / "env.json", record)  # first: the launcher finds this pid by it
    module = importlib.import_module(args.module)
    record["param_patches"] = [p["id"] for p in compat.apply(module)]
    _write_json(stage / "env.json", record)

    param_args = [a for a in args.param_args if a != "--"]
    sys.argv = [str(getattr(module, "__file__", args.module)), *param_args]
    module.main()
    _write_json(stage / "done.json", {"rank": rank})
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    rank = int(os.environ.get("RANK", "-1"))
    stage = Path(args.staging) / f"rank{rank}"
    stage.mkdir(parents=True, exist_ok=True)
    try:
        run(args, stage, rank)
    except BaseException as err:  # noqa: BLE001 - recorded as evidence, then re-raised
        _write_json(
            stage / "failed.json",
            {
                "rank": rank,
                "error": f"{type(err).__name__}: {err}"[:2000],
                "traceback": traceback.format_exc()[-4000:],
            },
        )
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
