"""The ladder sweeps a physical campaign needs, derived from the PARAM exports it replays.

A simulator twin (``sim/twin.py``) prices every call a replay makes by a curve keyed
(ladder collective, dtype, group size), and refuses a program whose replay uses a key with
no curve. ``derive_ladders`` reads the exported programs (``DIR/<rank>.json``, as
``op_table`` does), plans each physical configuration's calls with the twin's own rules
(``plan_steps``: fused buckets; ``_pieces``: chunked and decomposed calls), and returns one
ladder per key: that collective and dtype on that many ranks, from the smallest size the
calls use rounded down to a power of two to the largest rounded up, one rung more on each
side (nccl-tests sizes, the sweep's), factor 2. A key listed in ``covered`` (a ladder the user chose) is left out: the
user's ladder overrides the derived one. Keys with no ladder collective (a barrier) are
returned under ``not_swept`` with the reason, never silently dropped.
"""

from __future__ import annotations

from pathlib import Path

from tracecanary.formats.ids import LADDERS_FORMAT
from tracecanary.formats.vocab import LADDER_COLLECTIVES

LADDER_FACTOR = 2


def _pow2_floor(n: int) -> int:
    return 1 << (max(int(n), 1).bit_length() - 1)


def _pow2_ceil(n: int) -> int:
    n = max(int(n), 1)
    return 1 << (n - 1).bit_length()


def used_calls(program_dirs: list[str], configs: list[dict]) -> dict[tuple, dict]:
    """(ladder collective, dtype, group size) -> {min_bytes, max_bytes, configs} over every
    call the programs' replays make under each configuration (``resolve_config`` records:
    ``name``, ``mode``, ``chunks``, ``bucket_bytes``)."""
    import numpy as np

    from tracecanary.sim.costs import curve_key
    from tracecanary.sim.twin import _pieces, op_table, plan_steps

    used: dict[tuple, dict] = {}
    for program in program_dirs:
        table = op_table(program)
        ops = table["op"].to_numpy()
        nbytes = table["bytes"].to_numpy(np.int64)
        dtypes = table["dtype"].to_numpy()
        sizes = table["group_size"].to_numpy(np.int64)
        for config in configs:
            replay = {k: config[k] for k in ("mode", "chunks", "bucket_bytes") if k in config}
            for step in plan_steps(table, replay):
                h = step[0]
                total = int(nbytes[step].sum())
                for op, size in _pieces(str(ops[h]), total, int(sizes[h]), replay):
                    key = curve_key(op, str(dtypes[h]), int(sizes[h]))
                    entry = used.setdefault(
                        key, {"min_bytes": size, "max_bytes": size, "configs": set()}
                    )
                    entry["min_bytes"] = min(entry["min_bytes"], size)
                    entry["max_bytes"] = max(entry["max_bytes"], size)
                    entry["configs"].add(config["name"])
    return used


def derive_ladders(
    program_dirs: list[str],
    configs: list[dict],
    *,
    covered: set[tuple[str, str, int]] = frozenset(),
    warmup: int = 2,
    iters: int = 5,
    cycles: int = 3,
) -> dict:
    """The ``tracecanary.ladders/v1`` document: the ladders the programs' replays need
    under ``configs`` (see module doc), each a ``sweep`` specification."""
    ladders, not_swept = [], []
    for (collective, dtype, ranks), use in sorted(used_calls(program_dirs, configs).items()):
        if (collective, dtype, ranks) in covered:
            continue
        reason = (
            "no ladder collective for this op"
            if collective not in LADDER_COLLECTIVES or not dtype
            else "a one-rank group: nothing to sweep"
            if ranks < 2
            else None
        )
        if reason:
            not_swept.append(
                {"collective": collective, "dtype": dtype, "ranks": ranks, "reason": reason}
            )
            continue
        ladders.append(
            {
                "id": f"{collective}_{dtype}_{ranks}rank",
                "collective": collective,
                "dtype": dtype,
                "nproc": ranks,
                # one rung beyond each end: the curve brackets every size used, and a
                # first rung the calibration leaves out as an outlier is not a used size
                "min_bytes": max(_pow2_floor(use["min_bytes"]) // LADDER_FACTOR, 1),
                "max_bytes": _pow2_ceil(use["max_bytes"]) * LADDER_FACTOR,
                "factor": LADDER_FACTOR,
                "warmup": warmup,
                "iters": iters,
                "cycles": cycles,
                "used_bytes": [int(use["min_bytes"]), int(use["max_bytes"])],
                "used_by": sorted(use["configs"]),
            }
        )
    return {
        "format": LADDERS_FORMAT,
        "programs": [str(Path(p)) for p in program_dirs],
        "configs": [c["name"] for c in configs],
        "covered": [list(k) for k in sorted(covered)],
        "ladders": ladders,
        "not_swept": not_swept,
    }


def sweep_argv(ladder: dict, *, backend: str, output: str) -> list[str]:
    """The ``tracecanary sweep`` arguments that run one derived ladder into ``output``."""
    argv = ["sweep", "--collective", ladder["collective"], "--dtype", ladder["dtype"]]
    argv += ["--min-bytes", str(ladder["min_bytes"]), "--max-bytes", str(ladder["max_bytes"])]
    argv += ["--factor", str(ladder["factor"]), "--warmup", str(ladder["warmup"])]
    argv += ["--iters", str(ladder["iters"]), "--cycles", str(ladder["cycles"])]
    argv += ["--backend", backend, "--nproc", str(ladder["nproc"]), "--print-table"]
    return [*argv, "-o", output]
