"""Pairing gloo work with the calls that issued it.

In a gloo trace the ``c10d::`` op on the calling thread only enqueues the work; the
``gloo:<algorithm>`` annotation that times it runs later on one of the group's two
``pt_gloo_runloop`` threads (collectives) or on the calling thread (send/recv). Nothing
links the two, so they are paired by order, the way gloo runs them:

- send/recv: per calling thread, first in first out among calls of the same kind whose
  recorded shapes match;
- collectives: first in first out among pending calls whose expected annotation name
  and shapes match (each process group's work queue is FIFO). A call that was pending
  together with another call of the same signature is marked ambiguous with it: the
  FIFO may have crossed two groups' queues, so neither pairing is evidence on its own.
- a synchronous call stops waiting for work when its thread issues the next call (the
  API blocked until its work finished); a list-form reduce_scatter (one ``gloo:all_reduce``
  per rank of the group) takes every matching work event until then.

Work events left over (their issuing call lies outside the profiled window, or shapes
disagree) are counted, never imported as collectives of their own.
"""

from __future__ import annotations

from collections import defaultdict

from tracecanary.kineto.calls import Ev
from tracecanary.kineto.describe import Described


def _dims_match(expected: list | None, work: Ev) -> bool:
    if expected is None:
        return True
    got = work.args.get("Input Dims")
    if not isinstance(got, list):
        return True  # no shapes recorded on the work: name alone decides
    return got == expected


def pair_work(described: list[Described], work: list[Ev]) -> int:
    """Attach gloo work events to ``described`` calls in place; return how many work
    events found no call."""
    items: list[tuple[int, int, int, object]] = []
    for k, d in enumerate(described):
        if d.work_name is not None:
            items.append((d.call.start_ns, 0, k, d))
    for k, w in enumerate(work):
        items.append((w.start_ns, 1, k, w))
    items.sort(key=lambda t: (t[0], t[1], t[2]))

    pending: list[Described] = []  # collective calls waiting for work, issue order
    p2p_pending: dict[tuple, list[Described]] = defaultdict(list)
    unpaired = 0
    for _, kind, _, obj in items:
        if kind == 0:
            d = obj
            thread = d.call.thread
            # the thread's previous synchronous calls have finished
            pending = [
                p
                for p in pending
                if not (p.call.thread == thread and (not p.is_async or p.work_many))
            ]
            if d.op in ("send", "recv"):
                p2p_pending[thread].append(d)
            else:
                pending.append(d)
            continue
        w = obj
        if w.name in ("gloo:send", "gloo:recv"):
            queue = p2p_pending.get(w.thread, [])
            match = next(
                (
                    d
                    for d in queue
                    if d.work_name == w.name and _dims_match(d.work_dims, w) and not d.call.work
                ),
                None,
            )
            if match is None:
                unpaired += 1
                continue
            match.call.work.append(w)
            queue.remove(match)
            continue
        candidates = [d for d in pending if d.work_name == w.name and _dims_match(d.work_dims, w)]
        if not candidates:
            unpaired += 1
            continue
        chosen = candidates[0]
        chosen.call.work.append(w)
        if len(candidates) > 1:
            ids = {id(c.call) for c in candidates}
            for c in candidates:
                c.call.ambiguous_with |= ids - {id(c.call)}
        if not chosen.work_many:
            pending.remove(chosen)
    return unpaired
