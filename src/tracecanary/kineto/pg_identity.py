"""Local process-group identities of calls whose group one rank's trace cannot decide.

Guarantee: two calls get the same identity only when the trace shows they ran in one
process group: gloo work of both ran on one run-loop thread (every ProcessGroupGloo owns
its own run-loop threads), joined transitively (a list-form call whose work ran on two
threads joins them; calls whose FIFO pairing was ambiguous join the threads of every
call they were ambiguous with, so a wrong pairing can only merge identities, never
split one group into two). A call with no work (send/recv, unpaired work) is an
identity of its own. Candidates are the rank's groups that every call of the identity
fits (``groups._consistent``: membership, size hints, root and peer ranks in range).
"""

from __future__ import annotations

from tracecanary.kineto.describe import Described
from tracecanary.kineto.evidence import GLOO_IDENTITY_PREFIX
from tracecanary.kineto.groups import Group, _consistent


def local_identities(
    described: list[Described], resolved: dict[int, str], groups: dict[str, Group], rank: int
) -> dict[int, tuple[str, list[str]]]:
    """``id(call)`` -> (identity, candidate group ids) for every call whose resolved
    group is ``unknown:*``."""
    unknown = [d for d in described if resolved[id(d.call)].startswith("unknown:")]
    if not unknown:
        return {}
    by_id = {id(d.call): d for d in described}
    parent: dict[object, object] = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a, b) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb, key=repr)] = min(ra, rb, key=repr)

    for d in unknown:
        node = ("call", d.index)
        find(node)
        threads = [w.thread for w in d.call.work]
        for other in d.call.ambiguous_with:
            threads += [w.thread for w in by_id[other].call.work]
        for t in threads:
            union(node, ("thread", t))
    members: dict[object, list[Described]] = {}
    threads_of: dict[object, set] = {}
    for d in unknown:
        root = find(("call", d.index))
        members.setdefault(root, []).append(d)
    for node in list(parent):
        if node[0] == "thread":
            threads_of.setdefault(find(node), set()).add(node[1])
    mine = [g for g in groups.values() if rank in g.ranks]
    out: dict[int, tuple[str, list[str]]] = {}
    for root, calls in members.items():
        tids = sorted(threads_of.get(root, set()), key=lambda t: (str(type(t[1])), t[1]))
        if tids:
            identity = GLOO_IDENTITY_PREFIX + "+".join(str(t[1]) for t in tids)
        else:
            identity = f"call:{calls[0].index}"
        candidates = [g.id for g in mine if all(_consistent(d, g, rank) for d in calls)]
        for d in calls:
            out[id(d.call)] = (identity, candidates)
    return out
