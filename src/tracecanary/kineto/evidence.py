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

``meta.kineto.group_threads`` (present when some collective of a known group ran gloo
work): ``{group id: [thread id, ...]}``, the gloo run-loop threads that ran the work of
this rank's collectives in each known group. It is evidence for resolving the other
identities (a group never runs work on more than ``GLOO_THREADS_PER_GROUP`` threads,
later-created groups own later threads), and only evidence: an event's ``stream`` names
its process group (``gloo:pg:<group>``), never its thread, because gloo's run-loop
threads take a group's work in turn, so a thread-named stream would make every step look
different while the group's own FIFO order repeats.

``meta.kineto.unfilled`` (present when a non-root scatter/gather records no dtype):
``[{"seq": s, "elements": n}]``: the event carries ``dtype`` ``UNRECORDED_DTYPE`` and
``bytes`` 0 until merge takes the dtype from the other members of the same collective.
"""

from __future__ import annotations

PG_EVIDENCE_KEY = "pg_evidence"
GROUP_THREADS_KEY = "group_threads"
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


GLOO_STREAM_PREFIX = "gloo:pg:"
"""Stream of an event timed by gloo work: the process group whose work queue ran it."""


def gloo_stream(group: str) -> str:
    """The ``stream`` of a gloo-timed event of process group ``group`` (``gloo:pg:<group>``;
    an unresolved ``unknown:*`` group is renamed with the event's group at merge)."""
    return GLOO_STREAM_PREFIX + group


def is_gloo_stream(stream: str | None) -> bool:
    """True for a stream written by ``gloo_stream``."""
    return bool(stream) and stream.startswith(GLOO_STREAM_PREFIX)
