"""A small PARAM "basic" program that exercises every op kind the replayer accepts.

Used by the tests and by docs/physical.md's measured note; written in the layout
``export-param`` produces (one file per rank, ``init`` entries first, every file
listing every entry; send/recv pairs on both files sharing the pair's occurrence).
"""

from __future__ import annotations

import json
from pathlib import Path

GAP_NS = 100_000


def sample_program(world_size: int, *, small_ops: int = 8, scale: int = 1) -> list[list[dict]]:
    """Per-rank entry lists for ``world_size >= 2`` ranks (``scale`` multiplies sizes)."""
    if world_size < 2:
        raise ValueError("the sample program needs at least 2 ranks")
    ws = world_size
    half = list(range(max(1, ws // 2)))
    sub = half if ws > 2 else [1]
    inits = [
        {"comms": "init", "pg_id": 0, "global_ranks": list(range(ws)), "world_size": ws},
        {"comms": "init", "pg_id": 1, "global_ranks": list(range(ws)), "world_size": ws},
        {"comms": "init", "pg_id": 2, "global_ranks": sub, "world_size": len(sub)},
    ]
    s = scale

    def op(comms: str, n_in: int, n_out: int, dtype: str, pg: int, **extra) -> dict:
        size = len(sub) if pg == 2 else ws
        return {
            "comms": comms,
            "in_msg_size": n_in * s,
            "out_msg_size": n_out * s,
            "dtype": dtype,
            "world_size": size,
            "pg_id": pg,
            **extra,
        }

    def p2p(n: int, dtype: str, src: int, dst: int) -> tuple:
        return ("p2p", {"in_msg_size": n * s, "out_msg_size": n * s, "dtype": dtype,
                        "src_rank": src, "dst_rank": dst})  # fmt: skip

    def common(rank: int) -> list:
        in_split = [(rank + 1) * (h + 1) * 8 * s for h in range(ws)]
        out_split = [(h + 1) * (rank + 1) * 8 * s for h in range(ws)]
        ops: list = [
            op("all_reduce", 1024, 1024, "float", 0),
            op("all_gather", 256, 256 * ws, "bfloat16", 0),
            op("reduce_scatter", 64 * ws, 64, "int", 0),
            op("all_to_all", 32 * ws, 32 * ws, "float", 0, in_split=[], out_split=[]),
            {**op("all_to_allv", 0, 0, "int", 0), "in_msg_size": sum(in_split),
             "out_msg_size": sum(out_split), "in_split": in_split, "out_split": out_split},
            op("broadcast", 100, 100, "double", 0, root=ws - 1),
            op("reduce", 77, 77, "long", 0, root=0),
            {"comms": "barrier", "world_size": ws, "pg_id": 0},
            p2p(128, "float", 0, 1),
            p2p(33, "uint8", 1, 0),
            op("all_reduce", 500, 500, "float16", 1),
            op("all_reduce", 40, 40, "int8", 2),
            op("broadcast", 10, 10, "bool", 2, root=sub[0]),
            op("all_reduce", 64, 64, "bool", 0),
        ]  # fmt: skip
        decode = {"phase": "decode"}
        ops += [op("all_reduce", 256, 256, "float", 0, **decode, weight=4.0)] * small_ops
        for _ in range(2):
            ops.append(op("all_gather", 64, 64 * ws, "float", 0, **decode))
            ops.append(op("reduce_scatter", 32 * ws, 32, "float", 0, **decode))
        return ops

    files = []
    for rank in range(ws):
        entries = [dict(e) for e in inits]
        t = 0
        for occ, item in enumerate(common(rank)):
            markers = [f"canary:{occ}"]
            if isinstance(item, tuple):
                pair = item[1]
                for kind in ("send", "recv"):
                    entries.append(
                        {"comms": kind, **pair, "use_batch": False, "world_size": 2,
                         "markers": markers, "startTime_ns": t}
                    )  # fmt: skip
                t += GAP_NS
                continue
            entry = dict(item)
            if "phase" in entry:
                markers.append(f"phase:{entry.pop('phase')}")
            if "weight" in entry:
                markers.append(f"weight:{entry.pop('weight')}")
            entries.append({**entry, "markers": markers, "startTime_ns": t})
            t += GAP_NS
        files.append(entries)
    return files


def write_program(directory: str | Path, files: list[list[dict]]) -> Path:
    """Write ``directory/<rank>.json`` for each rank's entry list."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for rank, entries in enumerate(files):
        (directory / f"{rank}.json").write_text(json.dumps(entries, indent=1), encoding="utf-8")
    return directory


def bench_program(world_size: int, *, motifs: int = 4) -> list[list[dict]]:
    """A decode-like program for comparing physical configurations (docs/physical.md):
    per motif, 16 small all_reduces (1024 float32 each, fusable), one 1 MiB all_reduce,
    one all_gather of 16 Ki floats per rank and one reduce_scatter of 64 Ki floats."""
    ws = world_size
    motif = [("all_reduce", 1024, 1024)] * 16 + [
        ("all_reduce", 1 << 18, 1 << 18),
        ("all_gather", 1 << 14, (1 << 14) * ws),
        ("reduce_scatter", (1 << 16) * ws, 1 << 16),
    ]
    entries = [{"comms": "init", "pg_id": 0, "global_ranks": list(range(ws)), "world_size": ws}]
    for occ, (comms, n_in, n_out) in enumerate(motif * motifs):
        entries.append(
            {"comms": comms, "in_msg_size": n_in, "out_msg_size": n_out, "dtype": "float",
             "world_size": ws, "pg_id": 0, "markers": [f"canary:{occ}"],
             "startTime_ns": occ * GAP_NS}
        )  # fmt: skip
    return [entries] * ws
