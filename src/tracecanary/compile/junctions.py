"""Junctions of a reduced execution: where a replay resumes after a skipped stretch.

A reduced canary executes a selection ``idx`` (increasing logical indices) of its
logical program. A **segment** is a maximal run of consecutive logical indices in
``idx``; a **junction** is the first executed occurrence of every segment but the first
(its logical predecessor does not execute, an earlier occurrence does). Inside a
segment the executed occurrences are the logical ones, back to back: same gaps, so the
same issue times relative to each other.

At a junction the logical gap alone does not reproduce the source: the gap is measured
from the skipped logical predecessor, and the replay's channels hold the state the
preceding *executed* stretch left, not the state the skipped stretch left in the
source. A junction therefore carries a delay ``delta_s`` added to its gap, chosen from
the program's own timing (no configuration, no service time) so that every channel the
resuming segment uses is reached no earlier, relative to the latest readiness already on
that channel, than in the source, and the most constrained channel exactly as in the
source.

Terms (times in int64 ns, the simulator's, docs/simulator.md): issue T_i = sum of gaps up
to i; ready R_i = T_i + the largest member arrival skew of i (0 when skew is unknown);
channel c(i) = (group, stream). In the logical program, the **slack** of occurrence y on
its channel is

    sigma_y = R_y - max{R_k : k < y, c(k) = c(y)}       (undefined if no such k).

In the executed program with unshifted issue times T0' (cumulative logical gaps of the
executed occurrences) and R0' = T0' + skew, let D_s be the sum of the delays of junctions
1..s (D_0 = 0), so the replay's times in segment s are T0' + D_s. For a junction starting
segment s >= 1, over the channels c the segment uses, Y_c its first occurrence on c and
P_c the latest shifted readiness max{R0'_k + D_seg(k)} of an earlier executed occurrence
on c:

    delta_s = max_c ( sigma_{Y_c} - (R0'_{Y_c} + D_{s-1} - P_c) )

over the channels where both sigma_{Y_c} and P_c are defined (delta_s = 0 where none is),
raised to -gap (the junction's logical gap) where it is lower: an occurrence is never
issued before the one preceding it. Guarantees: outside junctions every gap is the
logical one; a selection with one segment (every occurrence, a lossless or unreduced
canary) has no junction and is returned unchanged; on the channel attaining the maximum
the replay's slack equals the source's, on every other channel it is at least the
source's (clamp: at least the source's on every channel). Weights are untouched.

Cost: vectorized over occurrences; one Python step per segment (not per occurrence).
"""

from __future__ import annotations

import numpy as np

from tracecanary.grouped import Grouping
from tracecanary.program import Program

_NONE = np.iinfo(np.int64).min  # "no earlier occurrence on this channel"


def _largest_skew(program: Program) -> np.ndarray:
    """Largest member arrival skew per occurrence; 0 when skew is unknown."""
    out = np.zeros(program.n, dtype=np.int64)
    if not program.skew_known or program.member_count == 0:
        return out
    np.maximum.at(
        out,
        program.member_column("occ"),  # int32 (a view): indices
        program.member_column("skew_ns", np.int64),
    )
    return out


def _channels(program: Program) -> np.ndarray:
    """Channel code per occurrence: one code per distinct (group, stream)."""
    group, _ = program.factorized("group", sort=False)
    stream, streams = program.factorized("stream", sort=False)
    return group * max(len(streams), 1) + stream


def _previous_ready(ready: np.ndarray, channel: np.ndarray) -> np.ndarray:
    """Per occurrence, the largest ready time of an earlier occurrence on its channel
    (``_NONE`` where there is none)."""
    return Grouping.by(channel).previous_max(ready, _NONE)


def segment_starts(idx: np.ndarray) -> np.ndarray:
    """Positions in ``idx`` where a segment starts (always 0 when ``idx`` is not empty)."""
    idx = np.asarray(idx, dtype=np.int64)
    if idx.size == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.r_[True, np.diff(idx) != 1])


def junction_delays(
    logical: Program, idx: np.ndarray, largest_skew: np.ndarray | None = None
) -> np.ndarray:
    """``delta`` per executed position of ``idx`` (0 except at junctions; see the module
    doc): the executed program's gaps are ``logical gap[idx] + delta``. ``largest_skew``:
    the largest of 0 and each occurrence's member skews when ``logical``'s member table
    is left out (by default read from it; ignored when skew is unknown)."""
    idx = np.asarray(idx, dtype=np.int64)
    delays = np.zeros(idx.size, dtype=np.int64)
    starts = segment_starts(idx)
    if starts.size <= 1:
        return delays
    gap = logical.column("gap_ns", np.int64)
    if largest_skew is not None and logical.skew_known:
        skew = np.asarray(largest_skew, dtype=np.int64)
    else:
        skew = _largest_skew(logical)
    channel = _channels(logical)
    ready = np.cumsum(gap) + skew
    previous = _previous_ready(ready, channel)[idx]
    has_slack = previous != _NONE
    slack = np.zeros(idx.size, dtype=np.int64)
    np.subtract(ready[idx], previous, out=slack, where=has_slack)  # sigma, where defined

    ex_gap = gap[idx]
    ex_ready = np.cumsum(ex_gap) + skew[idx]  # R0'
    ex_channel = channel[idx]
    segment = np.zeros(idx.size, dtype=np.int64)
    segment[starts[1:]] = 1
    segment = np.cumsum(segment)
    # first executed occurrence of each channel in each segment, and each segment's
    # latest unshifted readiness per channel (segments and channels in sorted order)
    pairs = Grouping.by(segment, ex_channel)  # (segment, channel) pairs, sorted
    first_of_pair = pairs.first_positions()
    latest_segment = segment[first_of_pair]
    latest_channel = ex_channel[first_of_pair]
    latest_ready = pairs.max(ex_ready)
    latest_bounds = np.searchsorted(latest_segment, np.arange(starts.size + 1))
    first_pos = np.sort(first_of_pair)
    first_bounds = np.searchsorted(segment[first_pos], np.arange(starts.size + 1))

    channel_ready = np.full(int(channel.max()) + 1, _NONE, dtype=np.int64)  # P_c
    shift = 0  # D_{s-1}
    for s in range(starts.size):
        if s:
            at = first_pos[first_bounds[s] : first_bounds[s + 1]]
            known = channel_ready[ex_channel[at]]
            usable = has_slack[at] & (known != _NONE)
            if usable.any():
                at, known = at[usable], known[usable]
                need = slack[at] - (ex_ready[at] + shift - known)
                delta = max(int(need.max()), -int(ex_gap[starts[s]]))
                delays[starts[s]] = delta
                shift += delta
        lo, hi = latest_bounds[s], latest_bounds[s + 1]
        chans = latest_channel[lo:hi]
        channel_ready[chans] = np.maximum(channel_ready[chans], latest_ready[lo:hi] + shift)
    return delays
