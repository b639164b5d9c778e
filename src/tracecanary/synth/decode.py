"""Synthetic decode-workload capture set (deterministic, seeded).

What it models: tensor-parallel LLM inference over ``ranks`` ranks on hosts of
``ranks_per_host`` ranks. Each request runs a prefill (two large all_reduces per layer)
then decode steps; a decode step is two all_reduces per layer (attention and MLP
outputs), an all_gather of the vocabulary-sharded logits and a broadcast of the sampled
tokens from rank 0. Inside a step the compute gaps repeat exactly (strongly periodic);
the gap into each step is irregular (scheduler and sampling jitter, seeded). Ranks
arrive with a fixed per-rank skew pattern plus rare straggler events; a few rare tail
windows carry very high compute overlap.

Each rank's file is what that process would write: its own events, timestamps on its
own host's clock, and each event's duration (``latency_ns``, as a profiler records every
op's duration). One model places everything on the reference (true) timeline: a
collective is a rendezvous that completes on every member at the latest member's arrival
plus its transfer time (``transfer_ns``), so a member's latency is that end minus its own
arrival. Host clocks differ by known offsets (and, when ``host_drift_ppb`` is given, run
at known rates); ``calibration`` states the exact mapping back onto the reference (the
merge stage consumes it; a derived calibration is tested against it). Drift is zero in
the shipped set so that the calibrated timeline is exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracecanary.formats.ids import CALIBRATION_FORMAT, TRACE_FORMAT
from tracecanary.synth.transfer import transfer_ns

LAYERS = 16
HIDDEN = 8192
VOCAB = 128_256
DTYPE_BYTES = 2  # bfloat16


@dataclass(frozen=True)
class DecodeSpec:
    ranks: int = 4
    ranks_per_host: int = 2
    events_per_rank: int = 20_500
    requests: int = 4
    decode_batch: int = 8
    prompt_tokens: int = 2048
    seed: int = 20261130
    tail_windows: int = 6
    layers: int = LAYERS
    hidden: int = HIDDEN
    host_offsets_ns: tuple[int, ...] | None = None  # per host (default: 3.2 ms steps)
    host_drift_ppb: tuple[float, ...] | None = None  # per host clock rate error (default 0)


def _step_template(spec: DecodeSpec) -> list[dict]:
    """One decode step's collectives with their exact within-step compute gaps."""
    act = spec.decode_batch * spec.hidden * DTYPE_BYTES
    step = []
    for layer in range(spec.layers):
        step.append(
            {
                "op": "all_reduce",
                "bytes": act,
                "gap": 41_000,
                "overlap": 6_000,
                "tag": f"attn{layer}",
            }
        )
        step.append(
            {
                "op": "all_reduce",
                "bytes": act,
                "gap": 57_000,
                "overlap": 9_000,
                "tag": f"mlp{layer}",
            }
        )
    logits = spec.decode_batch * (VOCAB // spec.ranks) * DTYPE_BYTES * spec.ranks
    step.append({"op": "all_gather", "bytes": logits, "gap": 23_000, "overlap": 0, "tag": "logits"})
    step.append(
        {
            "op": "broadcast",
            "bytes": spec.decode_batch * 8,
            "gap": 15_000,
            "overlap": 0,
            "tag": "tokens",
            "dtype": "int64",
        }
    )
    return step


def build_decode(spec: DecodeSpec = DecodeSpec()) -> tuple[list[dict], dict]:
    """(one tracecanary.trace/v1 document per rank, calibration document)."""
    rng = np.random.default_rng(spec.seed)
    step = _step_template(spec)
    prefill_bytes = spec.prompt_tokens * spec.hidden * DTYPE_BYTES
    # the occurrence program (shared by all ranks)
    ops: list[str] = []
    nbytes: list[int] = []
    dtypes: list[str] = []
    phases: list[str] = []
    gaps: list[int] = []
    overlaps: list[int] = []
    prefill_len = 2 * spec.layers
    decode_steps_total = max(
        1, (spec.events_per_rank - spec.requests * prefill_len) // len(step) + 1
    )
    steps_per_request = [
        decode_steps_total // spec.requests + (1 if i < decode_steps_total % spec.requests else 0)
        for i in range(spec.requests)
    ]
    for req in range(spec.requests):
        for layer in range(spec.layers):
            for kind, gap in (("attn", 1_850_000), ("mlp", 2_400_000)):
                ops.append("all_reduce")
                nbytes.append(prefill_bytes)
                dtypes.append("bfloat16")
                phases.append("prefill")
                first = req > 0 and layer == 0 and kind == "attn"
                gaps.append(int(gap + (rng.integers(2_000_000, 9_000_000) if first else 0)))
                overlaps.append(120_000 if kind == "mlp" else 0)
        for s in range(steps_per_request[req]):
            jitter = int(rng.gamma(2.0, 9_000.0))  # irregular gap into each step
            for j, item in enumerate(step):
                ops.append(item["op"])
                nbytes.append(item["bytes"])
                dtypes.append(item.get("dtype", "bfloat16"))
                phases.append("decode")
                gaps.append(item["gap"] + (jitter if j == 0 else 0))
                overlaps.append(item["overlap"])
            del s
    n = len(ops)
    gaps_a = np.asarray(gaps, dtype=np.int64)
    overlaps_a = np.asarray(overlaps, dtype=np.int64)
    decode_idx = np.flatnonzero(np.asarray(phases) == "decode")
    # rare high-overlap tail windows: a short run of collectives with very high overlap
    starts = rng.choice(decode_idx[: -len(step)], size=spec.tail_windows, replace=False)
    for start in np.sort(starts):
        overlaps_a[start : start + 6] = rng.integers(350_000, 600_000, size=6)
    issue = np.cumsum(gaps_a)
    # per-rank arrival skew: a fixed pattern plus rare stragglers
    base_skew = np.array(
        [0, 700, 1_900, 2_600] + [400 * r for r in range(4, spec.ranks)], dtype=np.int64
    )[: spec.ranks]
    skew = np.tile(base_skew, (n, 1))
    stragglers = rng.choice(n, size=max(1, n // 1500), replace=False)
    skew[stragglers, rng.integers(0, spec.ranks, size=stragglers.size)] += rng.integers(
        20_000, 80_000, size=stragglers.size
    )
    hosts = [f"host{chr(ord('a') + r // spec.ranks_per_host)}" for r in range(spec.ranks)]
    host_names = list(dict.fromkeys(hosts))
    offsets = spec.host_offsets_ns or tuple(
        0 if i == 0 else 3_217_455 * i + 91 for i in range(len(host_names))
    )
    drifts = spec.host_drift_ppb or tuple(0.0 for _ in host_names)
    host_offset = {h: int(offsets[i]) for i, h in enumerate(host_names)}
    host_drift = {h: float(drifts[i]) for i, h in enumerate(host_names)}
    clock_origin = 8_640_000_000_000  # a monotonic clock ~2.4 h after boot
    # true (reference) arrival of every rank; a straggling rank issues its next
    # collectives no earlier than it finished arriving
    true_ts = clock_origin + np.maximum.accumulate(issue[:, None] + skew, axis=0)
    ops_a = np.asarray(ops, dtype=object)
    xfer = np.zeros(n, dtype=np.int64)
    for op in set(ops):
        at = ops_a == op
        xfer[at] = transfer_ns(op, np.asarray(nbytes, dtype=np.int64)[at], spec.ranks)
    end = true_ts.max(axis=1) + xfer  # the rendezvous completes on every member at once
    # host clock: local = true + offset + drift * (true - clock_origin) / 1e9
    docs = []
    for r in range(spec.ranks):
        h = hosts[r]
        ts = _host_clock(true_ts[:, r], host_offset[h], host_drift[h], clock_origin)
        latency = _host_clock(end, host_offset[h], host_drift[h], clock_origin) - ts
        events = []
        for i in range(n):
            event = {
                "rank": r,
                "seq": i,
                "op": ops[i],
                "bytes": nbytes[i],
                "dtype": dtypes[i],
                "group": "world",
                "phase": phases[i],
                "stream": "comm0",
                "ts_ns": int(ts[i]),
                "latency_ns": int(latency[i]),
                "overlap_ns": int(overlaps_a[i]),
            }
            if ops[i] == "broadcast":
                event["root"] = 0
            events.append(event)
        docs.append(
            {
                "format": TRACE_FORMAT,
                "meta": {
                    "world_size": spec.ranks,
                    "source": f"tracecanary synth decode (seed {spec.seed}), rank {r} capture",
                    "clock_domains": [{"id": hosts[r], "ranks": [r], "host": hosts[r]}],
                    "notes": [
                        "synthetic decode workload: tensor-parallel inference, prefill + periodic decode steps",
                        "timestamps are on this host's monotonic clock; hosts differ by offsets stated in the calibration file",
                        "latency_ns: each collective completes on every member at the latest member's arrival plus its transfer time",
                    ],
                    "workload": {
                        "kind": "decode",
                        "layers": spec.layers,
                        "hidden": spec.hidden,
                        "requests": spec.requests,
                    },
                },
                "groups": [{"id": "world", "ranks": list(range(spec.ranks))}],
                "events": events,
            }
        )
    calibration = {
        "format": CALIBRATION_FORMAT,
        "reference": hosts[0],
        "method": "synthetic: offsets known by construction",
        "clocks": [
            _true_mapping(h, off, host_drift[h], clock_origin) for h, off in host_offset.items()
        ],
    }
    return docs, calibration


def _host_clock(true_ns: np.ndarray, offset_ns: int, drift_ppb: float, origin: int) -> np.ndarray:
    """A host clock's reading of reference times (offset, and rate error ``drift_ppb``)."""
    if drift_ppb == 0:
        return true_ns + offset_ns
    return true_ns + offset_ns + np.rint(drift_ppb * (true_ns - origin) / 1e9).astype(np.int64)


def _true_mapping(host: str, offset_ns: int, drift_ppb: float, origin: int) -> dict:
    """The calibration entry mapping ``host``'s clock back onto the reference:
    local = t + c + g (t - T0) inverts to t = local - c + k (local - (T0 + c)),
    k = -g / (1 + g)."""
    if drift_ppb == 0:
        return {
            "clock": host,
            "offset_ns": -offset_ns,
            "drift_ppb": 0,
            "anchor_ns": 0,
            "uncertainty_ns": 0 if offset_ns == 0 else 250,
        }
    g = drift_ppb / 1e9
    return {
        "clock": host,
        "offset_ns": -offset_ns,
        "drift_ppb": -g / (1 + g) * 1e9,
        "anchor_ns": origin + offset_ns,
        "uncertainty_ns": 250,
    }
