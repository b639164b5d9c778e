"""What a single-rank Kineto import hands to ``merge`` where one rank's trace cannot
decide a field on its own, written once for the importer (writer) and the cross-rank
resolution (reader, ``tracecanary.kineto.crossrank``).

``meta.kineto.pg_evidence`` (present when some collective's group is unknown):
``{identity: {"candidates": [group id, ...], "seq": [event seq, ...],
"work_end_ns": [end of the event's gloo work on this rank's clock, or null, ...]}}``. An identity
is this rank's local name of one process group as the trace shows it (the gloo run-loop
threads that ran its work, ``gloo-threads:<tid>[+<tid>...]``, or a lone call,
``call:<trace event index>``); every listed event ran in that one process group; the
candidates are this rank's groups (``distributedInfo.pg_config``) its events fit.

``meta.kineto.unfilled`` (present when a non-root scatter/gather records no dtype):
``[{"seq": s, "elements": n}]``: the event carries ``dtype`` ``UNRECORDED_DTYPE`` and
``bytes`` 0 until merge takes the dtype from the other members of the same collective.
"""

from __future__ import annotations

PG_EVIDENCE_KEY = "pg_evidence"
UNFILLED_KEY = "unfilled"
UNRECORDED_DTYPE = "unrecorded"
"""dtype of an event whose own trace records none (filled at merge, never guessed)."""

FILLABLE_OPS = ("custom:scatter", "custom:gather")
"""Rooted collectives whose non-root members may record shapes without a dtype."""

GLOO_IDENTITY_PREFIX = "gloo-threads:"
GLOO_THREADS_PER_GROUP = 2
"""Run-loop threads one ProcessGroupGloo starts (torch 2.13 ``ProcessGroupGloo::Options``
``threads{2}``, one transport device): a rank's group never runs work on more."""


def identity_threads(identity: str) -> list[int]:
    """Thread ids named by a ``gloo-threads:`` identity (empty for other identities or
    non-numeric ids)."""
    if not identity.startswith(GLOO_IDENTITY_PREFIX):
        return []
    parts = identity[len(GLOO_IDENTITY_PREFIX) :].split("+")
    return [int(p) for p in parts] if all(p.isdigit() for p in parts) else []


def stream_threads(stream: str | None) -> list[int]:
    """Thread ids of an imported event's ``gloo:thread:<tid>[+<tid>]`` stream."""
    prefix = "gloo:thread:"
    if not stream or not stream.startswith(prefix):
        return []
    parts = stream[len(prefix) :].split("+")
    return [int(p) for p in parts] if all(p.isdigit() for p in parts) else []
