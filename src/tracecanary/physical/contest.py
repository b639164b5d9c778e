"""Contested configurations: where the physical knob space holds close calls and inversions.

``knob_grid`` is the searched space (the replayer's knobs: fusion bucket sizes, chunk
counts, decomposition, per-op barriers) as a ``tracecanary.physical/v1`` document. Thread
counts are not a knob here: on CPU every rank fixes torch's intra-op threads to 1
(``environment.place_rank``), so an ``OMP_NUM_THREADS`` setting would change nothing and
look like a finding. ``contest`` takes, per
configuration, the full program's measured mean latency over interleaved repetitions (its
median and bootstrap interval, ``physical/report.py``) and its *isolated* prediction (the
simulator twin priced from the ladders alone, nccl-tests style: every op as if it ran by
itself on an idle, aligned machine), and states for every pair:

    gap_pct     |a - b| / min(a, b) of the measured medians, percent
    contested   gap_pct <= CONTEST_MARGIN_PCT (a close call on the full program)
    machine     -1 / 1 when the bootstrap intervals separate (a below / above b), else
                None (undetermined)
    isolated    -1 / 0 / 1 from the isolated predictions (ties under the ranking tolerance),
                None where a configuration has no isolated prediction (its calls lack ladders)
    inversion   machine decided, isolated not a tie, and the two disagree

and names the closest pair. Nothing is fitted: the measured side is the replays, the
isolated side the ladders; an inversion is only claimed where the machine decided the pair.
"""

from __future__ import annotations

import itertools

from tracecanary.formats.ids import PHYSICAL_CONFIG_FORMAT
from tracecanary.physical.report import decide_by_interval
from tracecanary.sim.ranking import DEFAULT_TIE_TOLERANCE, decide

CONTEST_MARGIN_PCT = 10.0


def knob_grid(
    *,
    buckets: tuple[int, ...] = (16384, 65536, 262144),
    chunks: tuple[int, ...] = (2, 4),
) -> dict:
    """The searched configurations (a ``tracecanary.physical/v1`` document): native,
    decomposed, native with op barriers, one fused configuration per bucket size, one
    chunked per chunk count."""
    configs: dict[str, dict] = {
        "native": {"description": "one direct call per op", "mode": "native", "env": {}},
        "decomposed": {
            "description": "every collective as two or more simpler ones",
            "mode": "decomposed",
            "env": {},
        },
        "native_barrier": {
            "description": "a barrier on the op's group before every op",
            "mode": "native",
            "op_barrier": True,
            "env": {},
        },
    }
    for b in buckets:
        configs[f"fused{b // 1024}k"] = {
            "description": f"consecutive ops packed into buckets of at most {b} B",
            "mode": "fused",
            "bucket_bytes": b,
            "env": {},
        }
    for k in chunks:
        configs[f"chunked{k}"] = {
            "description": f"payload cut into {k} pieces issued asynchronously",
            "mode": "chunked",
            "chunks": k,
            "env": {},
        }
    return {"format": PHYSICAL_CONFIG_FORMAT, "default": "native", "configs": configs}


def contest(
    measured: dict[str, dict],
    isolated: dict[str, float | None],
    *,
    margin_pct: float = CONTEST_MARGIN_PCT,
    tie_tolerance: float = DEFAULT_TIE_TOLERANCE,
) -> dict:
    """Pairs, contested pairs, inversions and the closest pair (see module doc).
    ``measured[name]`` holds ``mean`` (median over repetitions) and ``interval`` ([low,
    high] or None); ``isolated[name]`` the ladders-only prediction of the same metric."""
    pairs = []
    for a, b in itertools.combinations(sorted(measured), 2):
        ma, mb = measured[a]["mean"], measured[b]["mean"]
        gap = abs(ma - mb) / min(ma, mb) * 100.0
        machine = decide_by_interval(measured[a]["interval"], measured[b]["interval"])
        known = isolated.get(a) is not None and isolated.get(b) is not None
        iso = decide(isolated[a], isolated[b], tie_tolerance) if known else None
        pairs.append(
            {
                "a": a,
                "b": b,
                "gap_pct": gap,
                "contested": gap <= margin_pct,
                "machine": machine,
                "isolated": iso,
                "inversion": machine is not None and iso not in (None, 0) and iso != machine,
            }
        )
    closest = min(pairs, key=lambda p: (p["gap_pct"], p["a"], p["b"])) if pairs else None
    return {
        "margin_pct": margin_pct,
        "pairs": pairs,
        "contested": [p for p in pairs if p["contested"]],
        "inversions": [p for p in pairs if p["inversion"]],
        "closest": closest,
    }
