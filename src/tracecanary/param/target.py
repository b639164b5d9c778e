"""Export targets: which replayer an export is written for, and what each op kind becomes.

``tracecanary`` (the default of ``export-param``): the PARAM basic format as our
replayer (``replay-physical``) reads it.

``param-1e115ff`` (``UPSTREAM_TARGET``, the default of ``replay-param``): files that
upstream PARAM's ``commsTraceReplay.py`` at commit 1e115ff, with the compatibility
layer of ``tracecanary.param.compat``, executes with the same semantics as ours. Upstream
replay is blocking: before and after every op it barriers the op's process group
(``commsTraceReplay.py:778``, ``:828``), and it keeps the group of the rank's previous op
for ops that carry no tensors (``prepComms`` returns before setting the group for a
barrier, ``:621-622``). Hence, per op kind (``COMPATIBILITY``, rendered into
docs/physical.md by ``compatibility_table_markdown``):

- send/recv are TRANSFORMED: written on an explicit two-rank process group (``pg_id``
  of an ``init`` entry holding exactly the pair), so the barriers around them cover
  only the two ranks that execute them (``:1031``, ``:1035``); on the world group a
  send that not every rank issues hangs the replay.
- reduce is REFUSED when its root is not the group's first member: upstream ignores the
  entry's root (``srcOrDst`` fixed at 0, ``:1376``) and reduces to global rank 0.
- barrier is REFUSED when, on one of its ranks, the previous op ran on another group:
  upstream would run the barrier on that group instead (``:621``).
- the other kinds are replayed as written.

``upstream_refusal`` and ``UpstreamGroups`` decide this once, for the exporter (from the
program, occurrence by occurrence) and for ``replay-param`` (from the files, rank by
rank), so both refuse the same ops with the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracecanary.errors import InputError

PARAM_COMMIT = "1e115ff"  # the upstream PARAM commit the export format and the patches follow
DEFAULT_TARGET = "tracecanary"
UPSTREAM_TARGET = f"param-{PARAM_COMMIT}"
TARGETS = (DEFAULT_TARGET, UPSTREAM_TARGET)
UPSTREAM_REPLAYER = "train/comms/pt/commsTraceReplay.py"

REPLAYED = "replayed"
TRANSFORMED = "transformed"
REFUSED = "refused"


@dataclass(frozen=True)
class OpCompatibility:
    """How one op kind fares in each replayer, and the upstream line that forces it."""

    op: str
    ours: str
    upstream: str
    why: str


COMPATIBILITY: tuple[OpCompatibility, ...] = (
    OpCompatibility(
        "all_reduce", REPLAYED, REPLAYED, "sum on the op's group (`:1378` fixes the op to sum)"
    ),
    OpCompatibility(
        "all_gather", REPLAYED, REPLAYED, "in = out / group size (`comms_utils.py:1267`)"
    ),
    OpCompatibility(
        "reduce_scatter", REPLAYED, REPLAYED, "out = in / group size (`comms_utils.py:1409`)"
    ),
    OpCompatibility(
        "all_to_all",
        REPLAYED,
        REPLAYED,
        "equal splits; the basic parser reads `in_split`/`out_split` for it too "
        "(`:1561` tests a substring of `'all_to_allv'`)",
    ),
    OpCompatibility(
        "all_to_allv",
        REPLAYED,
        REPLAYED,
        "an all_to_all with splits: each rank's own `in_split`/`out_split` (elements, group "
        "rank order) and sizes (`:1561` reads them; `pytorch_dist_backend.py:262` passes "
        "them to `all_to_all_single`)",
    ),
    OpCompatibility(
        "broadcast",
        REPLAYED,
        REPLAYED,
        "any root; needs compat patch `rooted-src` (`:800` reads a `srcOrDst` no parser sets)",
    ),
    OpCompatibility(
        "reduce",
        REPLAYED,
        "replayed if root = group's first member, else refused",
        "`:1376` fixes `srcOrDst` at 0 and `:799` copies the entry's only for broadcast; "
        "compat patch `reduce-root` makes a subgroup's first member work",
    ),
    OpCompatibility(
        "barrier",
        REPLAYED,
        "replayed if the rank's previous op ran on the same group, else refused",
        "`prepComms` returns before setting the group for a barrier (`:621-622`): it runs "
        "on the previous op's group",
    ),
    OpCompatibility(
        "send/recv",
        REPLAYED,
        TRANSFORMED,
        "written on a two-rank `pg_id`: upstream barriers the op's whole group before and "
        "after it (`:778`, `:828`) but only src and dst execute it (`:1031`, `:1035`)",
    ),
    OpCompatibility(
        "custom:*",
        REFUSED,
        REFUSED,
        "no PARAM equivalent (export refuses it, or skips and lists it with `--skip-unsupported`)",
    ),
)


def compatibility_table_markdown() -> str:
    """The op kind x replayer table of docs/physical.md (line numbers: commsTraceReplay.py
    at 1e115ff unless another file is named)."""
    lines = [
        "| op kind | our replayer (`replay-physical`) | upstream PARAM 1e115ff (`replay-param`) "
        "| why (upstream line) |",
        "|---|---|---|---|",
    ]
    for c in COMPATIBILITY:
        lines.append(f"| {c.op} | {c.ours} | {c.upstream} | {c.why} |")
    return "\n".join(lines) + "\n"


World = tuple[int, ...]


def upstream_refusal(
    op: str, members: tuple[int, ...], root: int, previous_group: World | None
) -> str | None:
    """Why upstream PARAM would mis-execute this op on a rank, None if it would not.

    ``members``: the op's group (global ranks, sorted); ``root``: global root of a
    broadcast/reduce (-1 when absent); ``previous_group``: the group upstream last set on
    this rank (None: the world group, set at the start of every pass).
    """
    if op == "reduce" and root >= 0 and root != members[0]:
        return (
            f"reduce to root {root}: upstream PARAM 1e115ff ignores a reduce's root and "
            f"reduces to global rank 0 (commsTraceReplay.py:1376); only the group's first "
            f"member ({members[0]}) is replayed faithfully"
        )
    if op == "barrier" and previous_group is not None and previous_group != members:
        return (
            f"barrier on ranks {list(members)} after an op on ranks {list(previous_group)}: "
            "upstream PARAM 1e115ff runs a barrier on the previous op's group "
            "(commsTraceReplay.py:621, prepComms sets no group for it)"
        )
    return None


class UpstreamGroups:
    """Per rank, the group upstream PARAM last set (None = the world group). A barrier does
    not change it; every other executed op sets its own group."""

    def __init__(self, world_size: int) -> None:
        self.world = tuple(range(world_size))
        self.current: dict[int, World | None] = {}

    def previous(self, rank: int) -> World | None:
        group = self.current.get(rank)
        return None if group == self.world else group

    def executed(self, rank: int, op: str, members: tuple[int, ...]) -> None:
        if op != "barrier":
            self.current[rank] = members


def check_target(target: str) -> str:
    if target not in TARGETS:
        raise InputError(
            f"unknown target {target!r} (one of {', '.join(TARGETS)})", field="--target"
        )
    return target


def check_program_for_upstream(programs) -> None:
    """Refuse (InputError naming file, entry and field) a program directory that upstream
    PARAM 1e115ff would mis-execute: what ``upstream_refusal`` refuses, and send/recv not
    on an explicit two-rank group (the ``param-1e115ff`` export writes them so)."""
    world_size = len(programs)
    for prog in programs:
        groups = UpstreamGroups(world_size)
        ops = prog.ops[prog.ops["executes"]]
        for entry, op, pg_id, root, src, dst in zip(
            ops["entry"],
            ops["op"],
            ops["pg_id"],
            ops["root"],
            ops["src_rank"],
            ops["dst_rank"],
            strict=True,
        ):
            members = tuple(prog.members(int(pg_id)))
            where = {"file": prog.path, "record": int(entry)}
            if op in ("send", "recv") and members != tuple(sorted((int(src), int(dst)))):
                raise InputError(
                    f"{op} {int(src)}->{int(dst)} on ranks {list(members)}: upstream PARAM "
                    "barriers the whole group around it while only src and dst execute it "
                    "(commsTraceReplay.py:778, :828, :1031): export with --target "
                    f"{UPSTREAM_TARGET}",
                    field="pg_id",
                    **where,
                )
            reason = upstream_refusal(str(op), members, int(root), groups.previous(prog.rank))
            if reason is not None:
                raise InputError(reason, field="root" if op == "reduce" else "comms", **where)
            groups.executed(prog.rank, str(op), members)
