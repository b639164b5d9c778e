"""Tail-event recall is tie-aware on the source side: when more source occurrences share
the tail's lowest latency than the tail has places for, the tail list names some of them
by occurrence index, an arbitrary choice; any canary-kept occurrence of that latency fills
such a place. Strictly slower tail events must still be kept by identity."""

from __future__ import annotations

import numpy as np

from tracecanary.verify.behavior import tail_recall

# source: ids 0..4 are the slowest (1000 ns), 50 occurrences tie at 500 ns, the rest 100 ns
SOURCE_LAT = np.array([1000] * 5 + [500] * 50 + [100] * 45, dtype=np.int64)
SOURCE = (np.arange(100, dtype=np.int64), SOURCE_LAT, np.ones(100))
# top max(10, 1%) = 10 by (latency desc, id asc): the 5 slowest, then tied ids 5..9
TAIL_IDS = list(range(10))


def canary(executed_tied: list[int], slow: list[int] = (0, 1, 2, 3, 4)) -> tuple:
    """A canary executing ``slow`` (weight 1) and ``executed_tied`` (each standing for 10)
    plus one 100 ns occurrence standing for the rest (total weight 100)."""
    ids = np.array([*slow, *executed_tied, 60], dtype=np.int64)
    lat = np.array([1000] * len(slow) + [500] * len(executed_tied) + [100], dtype=np.int64)
    weights = np.array([1.0] * len(slow) + [10.0] * len(executed_tied) + [0.0])
    weights[-1] = 100 - weights.sum()
    return ids, lat, weights


def test_recall_does_not_depend_on_which_tied_occurrences_the_tail_list_names():
    named = tail_recall(SOURCE, canary([5, 6, 7, 8, 9]), TAIL_IDS)
    others = tail_recall(SOURCE, canary([40, 41, 42, 43, 44]), TAIL_IDS)
    assert named == others == 1.0


def test_each_tied_place_is_filled_at_most_once():
    assert tail_recall(SOURCE, canary([40, 41]), TAIL_IDS) == 0.7


def test_a_dropped_strictly_slower_tail_event_is_still_missed():
    assert tail_recall(SOURCE, canary([40, 41, 42, 43, 44], slow=[0, 1, 2, 3]), TAIL_IDS) == 0.9


def test_a_tied_occurrence_below_the_canary_threshold_fills_no_place():
    ids, lat, weights = canary([40, 41, 42, 43, 44])
    lat = lat.copy()
    lat[5:10] = 90  # the canary replays them faster than its own tail threshold
    assert tail_recall(SOURCE, (ids, lat, weights), TAIL_IDS) == 0.5


def test_without_a_tie_at_the_boundary_recall_is_the_share_of_named_events_kept():
    lat = np.arange(100, 0, -1, dtype=np.int64)  # all distinct
    source = (np.arange(100, dtype=np.int64), lat, np.ones(100))
    kept = np.array([0, 1, 2, 3, 4, 5, 6, 50], dtype=np.int64)
    canary_lat = (kept, lat[kept], np.array([1.0] * 7 + [93.0]))
    assert tail_recall(source, canary_lat, list(range(10))) == 0.7
