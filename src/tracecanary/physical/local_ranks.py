"""One machine's ranks, forked from one interpreter that imported torch once:
``python -m tracecanary.physical.local_ranks --nproc N --port P MODULE [ARGS...]``.

``physical.launch`` runs this for a single-node run instead of ``torchrun --standalone``.
Each rank is an ordinary process of its own (its own pid, memory and process group
connections), but not a fresh interpreter: importing torch takes seconds, and torchrun
pays it once for itself and once per rank. Here the parent imports torch, NumPy and
Arrow (``PRELOADED``), then forks the ranks before any thread, device or process group
exists; each rank runs ``MODULE.main(ARGS)`` with the variables torchrun would set
(``rank_environment``) and exits with its return value.

Guarantees, as torchrun's with ``--max-restarts 0``: the parent exits 0 only when every
rank did; the first rank to exit non-zero (or die by a signal) has its peers terminated
(SIGTERM, then SIGKILL after ``STOP_GRACE_S``), and every rank that failed by itself is
named on stderr as ``[local_ranks] rank : R exitcode : C`` (a signal as ``-SIG``, as
torchrun writes it; ``physical.launch`` reads these lines). The ranks stay in the
parent's process group, so the launcher's timeout reaches them all.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import time
import traceback

# what every rank module imports anyway; imported once here, before the fork
PRELOADED = ("torch", "torch.distributed", "numpy", "pyarrow", "pyarrow.parquet")
STOP_GRACE_S = 5.0
FAILURE_PREFIX = "[local_ranks] "


def rank_environment(rank: int, nproc: int, port: int) -> dict[str, str]:
    """The variables torchrun's local agent gives rank ``rank`` of a one-node run."""
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "GROUP_RANK": "0",
        "ROLE_RANK": str(rank),
        "ROLE_NAME": "default",
        "WORLD_SIZE": str(nproc),
        "LOCAL_WORLD_SIZE": str(nproc),
        "GROUP_WORLD_SIZE": "1",
        "ROLE_WORLD_SIZE": str(nproc),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
    }


def failure_line(rank: int, code: int) -> str:
    """How a failed rank is named on stderr (torchrun's ``rank : R ... exitcode : C``)."""
    return f"{FAILURE_PREFIX}rank : {rank} exitcode : {code}"


def _run_rank(entry, argv: list[str], environment: dict[str, str]) -> None:
    """In the forked child: run ``entry(argv)`` as this rank and exit with its code."""
    code = 1
    try:
        os.environ.update(environment)
        result = entry(argv)
        code = 0 if result is None else int(result)
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
    except BaseException:  # noqa: BLE001 - printed as a rank's traceback, then exit 1
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _status_code(status: int) -> int:
    """A wait status as torchrun reports it: the exit code, or minus the signal."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _stop(pids: dict[int, int]) -> None:
    """SIGTERM every rank still running, SIGKILL those alive after the grace; reap all."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + STOP_GRACE_S
        while pids and time.monotonic() < deadline:
            for pid in list(pids):
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    del pids[pid]
            time.sleep(0.05)
        if not pids:
            return


def run_ranks(module: str, argv: list[str], nproc: int, port: int) -> int:
    """Fork ``nproc`` ranks of ``module.main(argv)``; 0 when every rank returned 0."""
    for name in PRELOADED:
        importlib.import_module(name)
    entry = importlib.import_module(module).main
    if sys.modules["torch"].cuda.is_initialized():  # a forked rank could not use CUDA
        raise RuntimeError(f"importing {module} initialised CUDA before the ranks were forked")
    sys.stdout.flush()
    sys.stderr.flush()
    pids: dict[int, int] = {}
    for rank in range(nproc):
        pid = os.fork()
        if pid == 0:
            _run_rank(entry, argv, rank_environment(rank, nproc, port))
        pids[pid] = rank
    failed: dict[int, int] = {}
    while pids:
        pid, status = os.wait()
        rank = pids.pop(pid)
        code = _status_code(status)
        if code != 0:
            failed[rank] = code
            _stop(pids)
    for rank, code in sorted(failed.items()):
        print(failure_line(rank, code), file=sys.stderr, flush=True)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tracecanary.physical.local_ranks")
    parser.add_argument("--nproc", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("module", help="the rank program: a module with main(argv) -> int")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    return run_ranks(args.module, args.args, args.nproc, args.port)


if __name__ == "__main__":
    sys.exit(main())
