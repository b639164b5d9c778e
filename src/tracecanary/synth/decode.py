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
own host's clock. Host clocks differ by known offsets; ``calibration`` states them (the
merge stage consumes it). Drift is zero in the shipped set so that the calibrated
timeline is exact; tests exercise drift separately.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
    host_offset = {
        h: (0 if i == 0 else 3_217_455 * i + 91) for i, h in enumerate(dict.fromkeys(hosts))
    }
    clock_origin = 8_640_000_000_000  # a monotonic clock ~2.4 h after boot
    docs = []
    for r in range(spec.ranks):
        # a straggling rank issues its next collectives no earlier than it finished arriving
        ts = clock_origin + np.maximum.accumulate(issue + skew[:, r]) + host_offset[hosts[r]]
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
                "overlap_ns": int(overlaps_a[i]),
            }
            if ops[i] == "broadcast":
                event["root"] = 0
            events.append(event)
        docs.append(
            {
                "format": "tracecanary.trace/v1",
                "meta": {
                    "world_size": spec.ranks,
                    "source": f"tracecanary synth decode (seed {spec.seed}), rank {r} capture",
                    "clock_domains": [{"id": hosts[r], "ranks": [r], "host": hosts[r]}],
                    "notes": [
                        "synthetic decode workload: tensor-parallel inference, prefill + periodic decode steps",
                        "timestamps are on this host's monotonic clock; hosts differ by offsets stated in the calibration file",
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
        "format": "tracecanary.calibration/v1",
        "reference": hosts[0],
        "method": "synthetic: offsets known by construction",
        "clocks": [
            {
                "clock": h,
                "offset_ns": -off,
                "drift_ppb": 0,
                "anchor_ns": 0,
                "uncertainty_ns": 0 if off == 0 else 250,
            }
            for h, off in host_offset.items()
        ],
    }
    return docs, calibration
