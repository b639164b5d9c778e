"""How closely the source reproduces itself: the yardstick beside the fixed tolerances.

A canary cannot be held closer to its source than the source is to itself. For every
behaviour check that compares a statistic of the simulated source (latency and
queue-wait p50/p95/p99/max/mean, the hidden share, per-phase and per-op mean and p99),
``config_intervals`` computes, per configuration, the 95% interval of that statistic
under a block bootstrap of the source's own occurrences, from the very replay the check
reads (the same statistic, the same weighted inverted-CDF quantiles).

Blocks are the source's steps (the repetitions of its structure motifs repeated at least
``MIN_BLOCKS`` times, found from the top level down: a motif repeated fewer times is split
inside each repetition; every other record one block) when there are at least
``MIN_BLOCKS`` of them (consecutive steps joined into at most ``MAX_BLOCKS`` blocks), else
``WINDOWS`` fixed windows of consecutive occurrences.
``RESAMPLES`` resamples each draw as many blocks as there are, with replacement, by a
counter-based generator (splitmix64) keyed by ``SEED``; the seed, the resample count and
the blocks are recorded in the output (``method``), so the the resample count and the blocks are recorded in the output, so the
figures are reproducible and the documents stay content-addressed. Everything is
vectorized numpy over resamples x blocks and resamples x groups of sorted positions,
never resamples x occurrences.

Where a second capture of the same program is given (``--second-capture``), the interval
is widened to hold that capture's value of the statistic (the spread between the two
captures), recorded beside it.

A check **meets the reproducibility standard** when the canary's value lies inside the
source's interval; the interval is **wider than the tolerance** when it reaches further
from the source's value than the fixed tolerance allows (the source is noisier than the
tolerance demands). Counts and the tail-event recall are not statistics of the source's
noise: they get no interval and are judged by the fixed tolerances only.
"""

from __future__ import annotations

import functools

import numpy as np

from tracecanary.factorize import sorted_distinct
from tracecanary.sim.metrics import QUANTILES

SEED = 20261205
RESAMPLES = 200
LEVEL = 0.95
MIN_BLOCKS = 20
MAX_BLOCKS = 2000  # resamples x blocks stays small on a long capture
WINDOWS = 50
DIST = ("p50", "p95", "p99", "max", "mean")


def source_blocks(program) -> tuple[np.ndarray, dict]:
    """(block index per occurrence of ``program``, the blocks' description)."""
    from tracecanary.compile.structure import encode_structure

    n = program.n
    sig_ids, _ = program.signatures()
    starts = _step_starts(encode_structure(sig_ids), 0) if n else []
    if len(starts) >= MIN_BLOCKS:
        # at most MAX_BLOCKS blocks, each of as many consecutive steps as that takes
        per_block = -(-len(starts) // MAX_BLOCKS)
        bounds = np.asarray(starts[::per_block], dtype=np.int64)
        kind = "steps"
    else:
        length = max(1, -(-n // WINDOWS))
        bounds = np.arange(0, n, length, dtype=np.int64)
        kind = "windows"
    block_of = np.searchsorted(bounds, np.arange(n), side="right") - 1
    return block_of, {"kind": kind, "count": int(len(bounds))}


def _step_starts(records: list[dict], start: int) -> list[int]:
    """First occurrence of every step: each repetition of a motif repeated at least
    ``MIN_BLOCKS`` times; a motif repeated fewer times is split inside each of its
    repetitions (a decode loop inside each request); every other record is one step."""
    from tracecanary.compile.structure import top_level_spans

    out: list[int] = []
    for span in top_level_spans(records, start):
        if span.motif and span.reps >= MIN_BLOCKS:
            out.extend((span.start + span.period * np.arange(span.reps)).tolist())
        elif span.motif:
            for r in range(span.reps):
                out.extend(_step_starts(list(span.body), span.start + r * span.period))
        else:
            out.append(span.start)
    return out


@functools.lru_cache(maxsize=8)
def _resample_counts(blocks: int) -> np.ndarray:
    """RESAMPLES x blocks: how often each block is drawn in each resample. Draw j of
    resample r is block ``splitmix64(SEED, r * blocks + j) mod blocks``: fixed by the seed
    alone (no generator state; numpy.random is not imported, nor what it brings)."""
    cells = np.arange(RESAMPLES * blocks, dtype=np.uint64)
    draws = (_splitmix64(cells + np.uint64(SEED)) % np.uint64(blocks)).astype(np.int64)
    rows = np.repeat(np.arange(RESAMPLES, dtype=np.int64) * blocks, blocks)
    counts = np.bincount(rows + draws, minlength=RESAMPLES * blocks).reshape(RESAMPLES, blocks)
    counts = counts.astype(np.float64)  # the products below in BLAS
    counts.flags.writeable = False  # shared by every configuration (cached)
    return counts


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 output function of ``x`` (uint64, wrapping arithmetic)."""
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _sum_over_blocks(counts: np.ndarray, per_block: np.ndarray) -> np.ndarray:
    """``counts @ per_block``: per resample, the sum over its drawn blocks (a command runs
    NumPy's BLAS on one thread: ``command_process``). A source's weights are 1 and its
    figures integers, so every sum is an integer below 2**53, exact in any order: the
    result does not depend on the BLAS kernel."""
    return counts @ per_block


def _distribution(
    values: np.ndarray,
    weights: np.ndarray,
    block: np.ndarray,
    counts: np.ndarray,
    quantiles: tuple[str, ...] = tuple(QUANTILES),
) -> dict:
    """Per resample, p50/p95/p99/max/mean of ``values`` weighted by ``weights`` x the
    count of its ``block`` in the resample (``counts``: resamples x blocks); quantiles
    are ``sim.metrics``' weighted inverted-CDF ones."""
    blocks = counts.shape[1]
    order = np.argsort(values, kind="stable")
    sorted_values = values[order].astype(np.float64)
    sorted_block, sorted_weight = block[order], weights[order]
    # max and mean from per-block figures: resamples x blocks, not x occurrences
    n = len(values)
    last, first_reversed = sorted_distinct(sorted_block[::-1], return_index=True)
    block_max = np.full(blocks, -np.inf)  # a block's largest: its last in sorted order
    block_max[last] = sorted_values[n - 1 - first_reversed]
    drawn = (counts > 0) & np.isfinite(block_max)
    out = {
        "max": np.where(drawn.any(axis=1), np.where(drawn, block_max, -np.inf).max(axis=1), np.nan)
    }
    total = _sum_over_blocks(counts, np.bincount(block, weights, minlength=blocks))
    with np.errstate(invalid="ignore", divide="ignore"):
        out["mean"] = (
            _sum_over_blocks(counts, np.bincount(block, weights * values, minlength=blocks)) / total
        )
    # quantiles in two stages, never resamples x occurrences: the sorted positions in G
    # groups of g, each resample's cumulative weight per group by one matrix product,
    # then, inside the group where a target falls, the cumulative weight position by
    # position (the first position reaching q x total: the inverted CDF, exactly)
    n = len(values)
    g = max(16, -(-n // 64))  # at most 64 groups: the product is resamples x blocks x 64
    groups = -(-n // g)
    per_group = np.bincount(
        sorted_block * groups + np.arange(n) // g, sorted_weight, minlength=blocks * groups
    ).reshape(blocks, groups)
    cumulative = _sum_over_blocks(counts, np.cumsum(per_group, axis=1))  # resamples x groups
    row_total = cumulative[:, -1]
    rows = np.arange(counts.shape[0])
    offsets = np.arange(g)
    for name in quantiles:
        target = QUANTILES[name] * row_total
        group = np.minimum((cumulative < target[:, None]).sum(axis=1), groups - 1)
        before = np.where(group > 0, cumulative[rows, np.maximum(group - 1, 0)], 0.0)
        pos = group[:, None] * g + offsets
        valid = pos < n
        pos = np.minimum(pos, n - 1)
        w = counts[rows[:, None], sorted_block[pos]] * np.where(valid, sorted_weight[pos], 0.0)
        inside = (before[:, None] + np.cumsum(w, axis=1) < target[:, None]).sum(axis=1)
        value = sorted_values[np.minimum(group * g + inside, n - 1)]
        out[name] = np.where(row_total > 0, value, np.nan)
    return out


def _interval(resampled: np.ndarray) -> list[float] | None:
    finite = resampled[np.isfinite(resampled)]
    if finite.size < 2:
        return None
    ordered = np.sort(finite)  # numpy's default (linear) percentile, without numpy.ma
    tail = (1 - LEVEL) / 2
    out = []
    for q in (tail, 1 - tail):
        at = q * (ordered.size - 1)
        below = int(np.floor(at))
        above = min(below + 1, ordered.size - 1)
        out.append(float(ordered[below] + (at - below) * (ordered[above] - ordered[below])))
    return out


def config_intervals(prep, result, block_of: np.ndarray) -> dict[str, list[float] | None]:
    """{check metric: [low, high]} of one configuration's replay of the source
    (``prep``/``result`` as ``sim.metrics.summarize`` reads them)."""
    block = block_of[prep.occ]
    blocks = int(block_of.max()) + 1 if len(block_of) else 1
    counts = _resample_counts(blocks)
    weights = prep.weight.astype(np.float64)
    out: dict[str, list[float] | None] = {}
    for family, values in (("latency", result.latency_ns), ("queue_wait", result.queue_wait_ns)):
        if not len(values):
            continue
        for name, resampled in _distribution(values, weights, block, counts).items():
            out[f"{family}.{name}"] = _interval(resampled)
    hidden = _sum_over_blocks(
        counts, np.bincount(block, result.hidden_ns * weights, minlength=blocks)
    )
    service = _sum_over_blocks(
        counts, np.bincount(block, result.service_ns * weights, minlength=blocks)
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        out["hidden.share"] = _interval(np.where(service > 0, hidden / service, np.nan))
    for kind, codes, names in (
        ("by_phase", prep.phase_code, prep.phase_names),
        ("by_op", prep.op_code, prep.op_names),
    ):
        for code, key in enumerate(names):
            mask = codes == code
            if not mask.any():
                continue
            dist = _distribution(
                result.latency_ns[mask], weights[mask], block[mask], counts, ("p99",)
            )
            label = key or "(none)"
            out[f"{kind}.{label}.mean"] = _interval(dist["mean"])
            out[f"{kind}.{label}.p99"] = _interval(dist["p99"])
    return out


def method(blocks: dict) -> dict:
    """The bootstrap's description, recorded beside its figures."""
    return {
        "method": "block bootstrap of the simulated source",
        "blocks": blocks,
        "resamples": RESAMPLES,
        "seed": SEED,
        "level": LEVEL,
    }


def annotate(check: dict, interval: list[float] | None, second: float | None = None) -> dict:
    """``check`` with its ``reproducibility``: the source's interval (widened to hold
    ``second``, the same statistic of a second capture of the same program, where one is
    given), whether the canary lies in it, and whether it is wider than the fixed
    tolerance."""
    source, canary = check["source"], check["canary"]
    allowed = check["tolerance"].get("allowed")
    if interval is None or source is None or canary is None:
        check["reproducibility"] = None
        return check
    lo, hi = interval
    if second is not None:
        lo, hi = min(lo, float(second)), max(hi, float(second))
    spread = max(abs(hi - source), abs(source - lo))
    entry = {
        "interval": [lo, hi],
        "within": bool(min(lo, source) <= canary <= max(hi, source)),
        "wider_than_tolerance": bool(allowed is not None and spread > allowed),
    }
    if source:
        entry["relative"] = [(lo - source) / abs(source), (hi - source) / abs(source)]
    if second is not None:
        entry["second_capture"] = float(second)
    check["reproducibility"] = entry
    return check
