"""The op, dtype and collective vocabularies every stage agrees on, written once.

Imports nothing heavy (the CLI and every layer may import it). Other vocabularies
(Kineto spellings, PARAM and nccl-tests dtype names) map *onto* these names in the
modules that read those formats.
"""

from __future__ import annotations

import re

COLLECTIVES: tuple[str, ...] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "reduce",
)
"""The plain collectives that move data among a group's members."""
ROOTED_OPS: tuple[str, ...] = ("broadcast", "reduce")
P2P_OPS: tuple[str, ...] = ("send", "recv")

OPS: tuple[str, ...] = (*COLLECTIVES, "barrier", *P2P_OPS)
"""The plain ops of a native trace; any other op is ``custom:<name>``."""

CUSTOM_OP_PATTERN = r"custom:[A-Za-z0-9_.:/+-]+"
OP_PATTERN = "^(" + "|".join(OPS) + "|" + CUSTOM_OP_PATTERN + ")$"
"""Every valid op name: a plain op or ``custom:<name>`` (the trace schema says the same)."""
OP_RE = re.compile(OP_PATTERN)

DTYPE_BYTES: dict[str, int] = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float64": 8,
    "int8": 1,
    "uint8": 1,
    "int32": 4,
    "int64": 8,
    "bool": 1,
}
"""The canonical (torch-style) dtype names and their element sizes in bytes."""
DTYPES: tuple[str, ...] = tuple(DTYPE_BYTES)

OCCURRENCE_ORDERS: tuple[str, ...] = ("time", "canonical")
"""How a program's occurrences are ordered: ``time`` (by earliest member arrival, ties by
group then instance: the default) or ``canonical`` (a timing-independent linear extension
of the ranks' issue orders, ``tracecanary.matching.canonical_order``; gaps are signed)."""

LADDER_COLLECTIVES: tuple[str, ...] = (*COLLECTIVES, "sendrecv", "scatter", "gather")
"""The nccl-tests perf binaries' collectives, as ladders and sweeps name them (scatter and
gather price the decomposed replayer mode's broadcast and reduce; no trace op is one)."""
