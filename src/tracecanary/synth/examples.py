"""Deterministic example programs for tests and benchmarks (not real captures).

``decode_like_program``: an LLM decode loop on one tensor-parallel group: each step is
``layers`` all_reduces (one per layer) plus an all_gather of the logits, with gaps,
overlap, latency and arrival skew drawn around fixed means (seeded jitter), a few
warm-up occurrences before the loop and optional rare tail windows (slow steps).

``requests_program``: nested repetition, as inference serves it: ``requests``
repetitions of [a run of prefill all_reduces, ``steps`` decode steps of ``layers``
all_reduces and an all_gather], so the compiler nests the decode-step motif inside the
request motif. Chosen steps carry tail windows (tail flag, 6x latency) or a straggler
(one member arriving 50x later than usual, no tail flag).

``random_program``: occurrences over a few groups with a signature sequence that mixes
literal stretches, runs and repeated motifs, and timing that mixes exact repeats with
jitter; measured masks and skew knowledge as requested.
"""

from __future__ import annotations

import numpy as np

from tracecanary.program import Program, make_program


def _members(groups: list[list[int]], occ_group: np.ndarray, skew: np.ndarray | None):
    sizes = np.array([len(groups[g]) for g in occ_group], dtype=np.int64)
    occ = np.repeat(np.arange(len(occ_group), dtype=np.int64), sizes)
    flat = np.concatenate([np.asarray(groups[g], dtype=np.int64) for g in range(len(groups))])
    starts = np.concatenate(([0], np.cumsum([len(g) for g in groups])[:-1]))
    within = np.arange(len(occ)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    ranks = flat[np.repeat(starts[occ_group], sizes) + within]
    if skew is None:
        skew = np.zeros(len(occ), dtype=np.int64)
    return sizes, {"occ": occ, "rank": ranks, "skew_ns": skew}


def decode_like_program(
    steps: int,
    *,
    layers: int = 32,
    world_size: int = 8,
    jitter_ns: int = 2_000,
    seed: int = 0,
    skew_known: bool = True,
    tail_every: int | None = None,
) -> Program:
    rng = np.random.default_rng(seed)
    warm = np.array(["broadcast", "all_gather", "all_reduce"], dtype=object)
    step_ops = np.array(["all_reduce"] * layers + ["all_gather"], dtype=object)
    step_bytes = np.array([1 << 20] * layers + [1 << 17], dtype=np.int64)
    ops = np.concatenate([warm, np.tile(step_ops, steps)])
    nbytes = np.concatenate([[4096, 1 << 22, 1 << 20], np.tile(step_bytes, steps)])
    n = len(ops)
    base_gap = np.concatenate([[0, 50_000, 40_000], np.tile([30_000] * layers + [200_000], steps)])
    gap = np.maximum(0, base_gap + rng.integers(-jitter_ns, jitter_ns + 1, n))
    gap[0] = 0
    overlap = np.maximum(0, 20_000 + rng.integers(-jitter_ns, jitter_ns + 1, n))
    latency = np.maximum(1, 25_000 + rng.integers(-jitter_ns, jitter_ns + 1, n))
    tail = np.zeros(n, dtype=bool)
    if tail_every:
        for s in range(tail_every // 2, steps, tail_every):
            lo = 3 + s * (layers + 1)
            latency[lo : lo + layers + 1] *= 6
            tail[lo : lo + layers + 1] = True
    groups = [list(range(world_size))]
    occ_group = np.zeros(n, dtype=np.int64)
    skew = None
    if skew_known:
        skew = np.abs(rng.integers(0, max(1, jitter_ns), n * world_size))
        skew = skew.reshape(n, world_size)
        skew[np.arange(n), rng.integers(0, world_size, n)] = 0
        skew = skew - skew.min(axis=1, keepdims=True)
        skew = skew.reshape(-1)
    sizes, members = _members(groups, occ_group, skew)
    return make_program(
        {
            "op": ops,
            "bytes": nbytes,
            "dtype": np.full(n, "bf16", dtype=object),
            "group": np.full(n, "tp0", dtype=object),
            "group_size": sizes,
            "root": np.where(ops == "broadcast", 0, -1),
            "phase": np.concatenate(
                [np.full(3, "prefill", dtype=object), np.full(n - 3, "decode", dtype=object)]
            ),
            "gap_ns": gap,
            "overlap_ns": overlap,
            "has_overlap": np.ones(n, dtype=bool),
            "latency_ns": latency,
            "has_latency": np.ones(n, dtype=bool),
            "tail": tail,
        },
        members,
        world_size=world_size,
        skew_known=skew_known,
        skew_reason=None if skew_known else "no clock calibration",
        notes=("synthetic decode-like program (tracecanary.synth.examples)",),
    )


def requests_program(
    requests: int,
    steps: int,
    *,
    layers: int = 4,
    prefill: int = 2,
    world_size: int = 4,
    jitter_ns: int = 1_000,
    seed: int = 0,
    tail_steps: tuple[tuple[int, int], ...] = (),
    straggler_steps: tuple[tuple[int, int], ...] = (),
    skew_known: bool = True,
) -> Program:
    """Occurrence ``r * (prefill + steps * (layers + 1)) + prefill + s * (layers + 1) + j``
    is position j of decode step s of request r. ``tail_steps`` / ``straggler_steps``
    name (request, step) pairs."""
    rng = np.random.default_rng(seed)
    step_len = layers + 1
    request_len = prefill + steps * step_len
    n = requests * request_len
    is_prefill = np.tile(np.arange(request_len) < prefill, requests)
    within = np.tile(np.arange(request_len) - prefill, requests)
    is_gather = ~is_prefill & (within % step_len == layers)
    ops = np.where(is_gather, "all_gather", "all_reduce").astype(object)
    nbytes = np.where(is_prefill, 1 << 24, np.where(is_gather, 1 << 17, 1 << 16))
    base_gap = np.where(is_prefill, 400_000, np.where(is_gather, 50_000, 30_000))
    gap = np.maximum(0, base_gap + rng.integers(-jitter_ns, jitter_ns + 1, n))
    gap[0] = 0
    overlap = np.maximum(0, 20_000 + rng.integers(-jitter_ns, jitter_ns + 1, n))
    latency = np.maximum(1, 25_000 + rng.integers(-jitter_ns, jitter_ns + 1, n))
    tail = np.zeros(n, dtype=bool)

    def step_range(r: int, s: int) -> slice:
        lo = r * request_len + prefill + s * step_len
        return slice(lo, lo + step_len)

    for r, s in tail_steps:
        latency[step_range(r, s)] *= 6
        tail[step_range(r, s)] = True
    skew = None
    if skew_known:
        skew = rng.integers(0, max(1, jitter_ns), (n, world_size))
        skew[np.arange(n), rng.integers(0, world_size, n)] = 0
        skew = skew - skew.min(axis=1, keepdims=True)
        for r, s in straggler_steps:
            skew[step_range(r, s).start + 1, world_size - 1] = 50 * jitter_ns
        skew = skew.reshape(-1)
    sizes, members = _members([list(range(world_size))], np.zeros(n, dtype=np.int64), skew)
    return make_program(
        {
            "op": ops,
            "bytes": nbytes,
            "dtype": np.full(n, "bf16", dtype=object),
            "group": np.full(n, "tp0", dtype=object),
            "group_size": sizes,
            "phase": np.where(is_prefill, "prefill", "decode").astype(object),
            "gap_ns": gap,
            "overlap_ns": overlap,
            "has_overlap": np.ones(n, dtype=bool),
            "latency_ns": latency,
            "has_latency": np.ones(n, dtype=bool),
            "tail": tail,
        },
        members,
        world_size=world_size,
        skew_known=skew_known,
        skew_reason=None if skew_known else "no clock calibration",
        notes=("synthetic nested request/decode program (tracecanary.synth.examples)",),
    )


def random_program(
    seed: int,
    n: int,
    *,
    world_size: int = 4,
    skew_known: bool = True,
    p_overlap: float = 0.7,
    p_latency: float = 0.7,
    jitter_ns: int = 50,
    value_choices: int = 3,
    p_tail: float = 0.02,
) -> Program:
    rng = np.random.default_rng(seed)
    groups = [list(range(world_size))]
    if world_size >= 2:
        groups.append([0, world_size - 1])
        groups.append(
            sorted(rng.choice(world_size, size=max(1, world_size // 2), replace=False).tolist())
        )
    ops = ["all_reduce", "all_gather", "broadcast", "send", "reduce_scatter"]
    n_sigs = int(rng.integers(1, 6))
    sig_op = rng.integers(0, len(ops), n_sigs)
    sig_group = rng.integers(0, len(groups), n_sigs)
    sig_bytes = rng.choice([4, 1024, 1 << 20], n_sigs)
    seq: list[int] = []
    while len(seq) < n:
        kind = rng.integers(0, 3)
        if kind == 0:
            seq.extend(rng.integers(0, n_sigs, int(rng.integers(1, 6))).tolist())
        elif kind == 1:
            seq.extend([int(rng.integers(0, n_sigs))] * int(rng.integers(2, 12)))
        else:
            body = rng.integers(0, n_sigs, int(rng.integers(1, 5))).tolist()
            seq.extend(body * int(rng.integers(2, 10)))
    sig = np.asarray(seq[:n], dtype=np.int64)
    group_names = [f"g{i}" for i in range(len(groups))]
    op = np.array([ops[sig_op[s]] for s in sig], dtype=object)
    group_idx = sig_group[sig]
    for i, g in enumerate(groups):
        if len(g) == 2 and g[0] != g[1]:
            group_names[i] = f"p2p:{g[0]}->{g[1]}"
    group = np.array([group_names[g] for g in group_idx], dtype=object)
    op = np.where(np.char.startswith(group.astype(str), "p2p:"), "send", op).astype(object)
    op = np.where(
        (op == "send") & ~np.char.startswith(group.astype(str), "p2p:"), "all_reduce", op
    ).astype(object)
    first_member = np.array([groups[g][0] for g in group_idx], dtype=np.int64)
    root = np.where(op == "broadcast", first_member, -1)

    def timing(mean: int) -> np.ndarray:
        choices = mean + rng.integers(-jitter_ns, jitter_ns + 1, value_choices)
        base = rng.choice(np.maximum(choices, 0), n)
        noisy = rng.random(n) < 0.3
        return np.where(
            noisy, np.maximum(0, base + rng.integers(-jitter_ns, jitter_ns + 1, n)), base
        )

    gap = timing(1000)
    gap[0] = 0
    skew = None
    sizes_probe = np.array([len(groups[g]) for g in group_idx])
    if skew_known:
        skew = rng.integers(0, jitter_ns + 1, int(sizes_probe.sum()))
        starts = np.cumsum(sizes_probe) - sizes_probe
        skew[starts] = 0  # the earliest member (rank order is arbitrary here)
        skew = np.where(rng.random(len(skew)) < 0.5, skew, 0)
    sizes, members = _members(groups, group_idx, skew)
    return make_program(
        {
            "op": op,
            "bytes": sig_bytes[sig],
            "dtype": np.full(n, "f32", dtype=object),
            "group": group,
            "group_size": sizes,
            "root": root,
            "phase": np.where(sig % 2 == 0, "fwd", "").astype(object),
            "gap_ns": gap,
            "overlap_ns": timing(500),
            "has_overlap": rng.random(n) < p_overlap,
            "latency_ns": timing(2000),
            "has_latency": rng.random(n) < p_latency,
            "tail": rng.random(n) < p_tail,
        },
        members,
        world_size=world_size,
        skew_known=skew_known,
        skew_reason=None if skew_known else "no clock calibration",
    )
