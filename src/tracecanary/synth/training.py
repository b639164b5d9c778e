"""Synthetic training-workload trace (deterministic, seeded, streamed to disk).

What it models: one LLM training job over ``R = tp * pp * dp`` ranks (Megatron-style
layout: tensor-parallel index fastest, then data-parallel, then pipeline stage, so a
tensor-parallel group is ``tp`` consecutive ranks and a stage is a contiguous block of
``tp * dp`` ranks). Each step runs a GPipe-style schedule of ``microbatches``
microbatches over the ``pp`` stages:

- forward of a microbatch on a stage: ``recv`` of the activation from the previous
  stage (point-to-point, stage > 0), then per layer the sequence-parallel tensor
  collectives ``all_gather`` / ``reduce_scatter`` (attention in/out, MLP in/out) in the
  stage's tensor-parallel group with compute gaps between them, then ``send`` of the
  activation to the next stage (stage < pp - 1);
- backward: ``recv`` of the gradient from the next stage, the layers in reverse (each
  tensor collective's backward is its dual), ``send`` of the gradient to the previous
  stage;
- during the last microbatch's backward the data-parallel gradient buckets are
  all-reduced over the data-parallel group (fp32 buckets, DDP-style), overlapping the
  remaining backward compute (``overlap_ns`` measured); the last buckets are exposed;
- at the end of the step a 4-byte ``all_reduce`` over the world (loss / grad-norm
  scalar), whose arrival differs by stage (the pipeline flush).

Timing: every event carries ``ts_ns`` on one cluster clock (PTP-disciplined; one clock
domain, so arrival skew is known). Inside a step the compute gaps repeat exactly per
stage (strongly periodic); the gap into each step is irregular (data loading jitter,
seeded gamma); every rank has a fixed arrival offset pattern plus per-event noise of
at most ``NOISE_NS``; rare straggler windows delay one rank from its first event of one
microbatch to the end of the step; rare tail windows give a run of ``TAIL_RUN`` tensor collectives of
one stage very high compute overlap (far above 3x the median, the ingest's tail rule).

Each event records its duration (``latency_ns``, as a profiler records every op's), from
the same model that places the arrivals: a collective completes on every member at its
last member's arrival plus its transfer time (``tracecanary.synth.transfer``); a send and
its recv complete together at the later arrival plus the transfer.

Streaming: the file is written step by step; for each step the events of every rank
are built as numpy arrays (one row per rank event) and turned into JSON Lines text by
pyarrow compute kernels, so no per-event Python object exists and memory is bounded by
one step (``R`` x events per rank per step). Output: the JSON Lines form of
``tracecanary.trace/v1`` (header line, then one canonical JSON event per line, keys
sorted, in rank-major order per step, so each rank's ``seq`` increases in file order);
``.gz`` is gzip with a fixed header (mtime 0, no name). Same arguments, same bytes.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracecanary.canonical import atomic_output, canonical_json_bytes
from tracecanary.errors import InputError
from tracecanary.formats.ids import TRACE_FORMAT as FORMAT
from tracecanary.synth.transfer import transfer_ns

CLOCK_ORIGIN_NS = 8_640_000_000_000  # a monotonic clock ~2.4 h after boot
NOISE_NS = 200  # per-event issue noise, well below the smallest compute gap
TAIL_RUN = 6
STRAGGLER_MAX_NS = 400_000
MAX_RANKS = 65_536

# op / dtype / phase / stream vocabularies (codes index these tables)
OPS = ("all_gather", "reduce_scatter", "send", "recv", "all_reduce")
AG, RS, SEND, RECV, AR = range(5)
DTYPES = ("bfloat16", "float32")
PHASES = ("forward", "backward", "optimizer")
FWD, BWD, OPT = range(3)
STREAMS = ("tp", "pp", "dp")
# group kinds of a template event
G_TP, G_DP, G_PP, G_WORLD = range(4)


@dataclass(frozen=True)
class TrainingSpec:
    """Shape of the synthetic job; sizes in bytes, times in ns."""

    tp: int
    pp: int
    dp: int
    steps: int
    seed: int = 20261201
    microbatches: int = 8
    layers_per_stage: int = 2
    buckets: int = 6
    seq_len: int = 2048
    hidden: int = 4096
    bucket_bytes: int = 25 * 1024 * 1024
    ranks_per_host: int = 8

    @property
    def ranks(self) -> int:
        return self.tp * self.pp * self.dp


def check_spec(spec: TrainingSpec) -> None:
    """Refuse shapes the generator cannot build (InputError, exit 2)."""
    for name in ("tp", "pp", "dp", "steps", "microbatches", "layers_per_stage", "buckets"):
        if getattr(spec, name) < 1:
            raise InputError(f"--{name.replace('_', '-')} must be >= 1", field=name)
    if spec.ranks > MAX_RANKS:
        raise InputError(f"tp x pp x dp = {spec.ranks} ranks, over {MAX_RANKS}", field="ranks")
    if spec.buckets > spec.layers_per_stage * len(_FWD_LAYER):
        raise InputError("more gradient buckets than backward tensor collectives", field="buckets")


@dataclass(frozen=True)
class _Template:
    """One stage's events of one step, in issue order (columns of equal length)."""

    op: np.ndarray  # int8 code into OPS
    nbytes: np.ndarray  # int64
    dtype: np.ndarray  # int8 code into DTYPES
    kind: np.ndarray  # int8 group kind
    peer_delta: np.ndarray  # int8: +1 next stage, -1 previous stage, 0 none
    phase: np.ndarray  # int8
    stream: np.ndarray  # int8
    offset_ns: np.ndarray  # int64 issue time relative to the step start (strictly increasing)
    overlap_ns: np.ndarray  # int64
    microbatch: np.ndarray  # int64 (M for the end-of-step collective)
    end_ns: int  # when this stage's step ends (before the world all_reduce)


# compute gaps (ns) before each tensor collective of one layer, forward; backward is 2x
_FWD_LAYER = (
    (AG, 25_000, 45_000),  # layernorm, then gather the sequence-parallel input
    (RS, 420_000, 35_000),  # attention compute, then scatter its output
    (AG, 30_000, 45_000),
    (RS, 560_000, 35_000),  # MLP compute
)
# a gradient bucket's all_reduce overlaps the next backward compute, at most this much
BUCKET_OVERLAP_NS = 80_000
_P2P_GAP_NS = 15_000


def _stage_template(spec: TrainingSpec, stage: int) -> _Template:
    pp, m_count = spec.pp, spec.microbatches
    act = spec.seq_len * spec.hidden * 2  # bf16 activation of one microbatch (gathered)
    p2p = act // spec.tp  # sequence-parallel shard sent between stages
    fwd_compute = spec.layers_per_stage * sum(g for _, g, _ in _FWD_LAYER) + 2 * _P2P_GAP_NS
    f_slot = fwd_compute + 60_000
    b_slot = 2 * fwd_compute + 90_000
    rows: list[tuple] = []  # (op, bytes, dtype, kind, peer_delta, phase, stream, t, overlap, mb)

    def tp_ops(t: int, phase: int, mb: int, layers) -> int:
        for op, gap, overlap in layers:
            t += gap
            if spec.tp > 1:
                rows.append((op, act, 0, G_TP, 0, phase, 0, t, overlap, mb))
        return t

    for mb in range(m_count):
        t = (stage + mb) * f_slot
        if stage > 0:
            rows.append((RECV, p2p, 0, G_PP, -1, FWD, 1, t, 0, mb))
        for _ in range(spec.layers_per_stage):
            t = tp_ops(t, FWD, mb, _FWD_LAYER)
        if stage < pp - 1:
            t += _P2P_GAP_NS
            rows.append((SEND, p2p, 0, G_PP, +1, FWD, 1, t, 0, mb))
    bwd_layer = tuple((RS if op == AG else AG, gap, overlap) for op, gap, overlap in _FWD_LAYER)
    bwd_layer = bwd_layer[::-1]
    base = (pp + m_count - 1) * f_slot
    for mb in range(m_count):
        t = base + (pp - 1 - stage + mb) * b_slot
        if stage < pp - 1:
            rows.append((RECV, p2p, 0, G_PP, +1, BWD, 1, t, 0, mb))
        last = mb == m_count - 1
        slots = [item for _ in range(spec.layers_per_stage) for item in bwd_layer]
        # backward compute still to run after each slot: what a bucket fired there overlaps
        remaining = np.cumsum([2 * gap for _, gap, _ in slots][::-1])[::-1].tolist()[1:] + [0]
        bucket_slots: set[int] = set()
        if last and spec.dp > 1:
            # buckets fire after evenly spaced backward collectives; the last one at the end
            n_slots = len(slots)
            bucket_slots = {
                n_slots - 1 - (k * n_slots) // spec.buckets for k in range(spec.buckets)
            }
        buckets_left = spec.buckets
        for k, (op, gap, overlap) in enumerate(slots):
            t += 2 * gap
            if spec.tp > 1:
                rows.append((op, act, 0, G_TP, 0, BWD, 0, t, overlap, mb))
            if k in bucket_slots:
                t += 3_000
                size = spec.bucket_bytes if buckets_left > 1 else spec.bucket_bytes // 3
                rows.append(
                    (AR, size, 1, G_DP, 0, BWD, 2, t, min(BUCKET_OVERLAP_NS, int(remaining[k])), mb)
                )
                buckets_left -= 1
        if stage > 0:
            t += _P2P_GAP_NS
            rows.append((SEND, p2p, 0, G_PP, -1, BWD, 1, t, 0, mb))
    end = base + (pp - 1 - stage + m_count) * b_slot
    rows.append((AR, 4, 1, G_WORLD, 0, OPT, 2, end + 40_000, 0, m_count))
    cols = list(zip(*rows, strict=True))
    offset = np.asarray(cols[7], dtype=np.int64)
    if not (np.diff(offset) > NOISE_NS).all():  # pragma: no cover - guarded by construction
        raise AssertionError("training template issue times must strictly increase")
    return _Template(
        op=np.asarray(cols[0], dtype=np.int8),
        nbytes=np.asarray(cols[1], dtype=np.int64),
        dtype=np.asarray(cols[2], dtype=np.int8),
        kind=np.asarray(cols[3], dtype=np.int8),
        peer_delta=np.asarray(cols[4], dtype=np.int8),
        phase=np.asarray(cols[5], dtype=np.int8),
        stream=np.asarray(cols[6], dtype=np.int8),
        offset_ns=offset,
        overlap_ns=np.asarray(cols[8], dtype=np.int64),
        microbatch=np.asarray(cols[9], dtype=np.int64),
        end_ns=int(end + 40_000),
    )


def group_ids(spec: TrainingSpec) -> tuple[list[dict], dict[str, np.ndarray]]:
    """(header group declarations, per-kind lookup tables of group-name indices).

    Tables: ``tp[p, d]``, ``dp[p, t]``, ``pp[d, t]`` index into the declaration list;
    ``world`` is index 0. Groups are declared in start/stride/size form."""
    tp, pp, dp = spec.tp, spec.pp, spec.dp
    decl: list[dict] = [{"id": "world", "start": 0, "stride": 1, "size": spec.ranks}]
    tab_tp = np.full((pp, dp), -1, dtype=np.int64)
    tab_dp = np.full((pp, tp), -1, dtype=np.int64)
    tab_pp = np.full((dp, tp), -1, dtype=np.int64)
    if tp > 1:
        for p in range(pp):
            for d in range(dp):
                tab_tp[p, d] = len(decl)
                decl.append(
                    {"id": f"tp.p{p}.d{d}", "start": tp * (d + dp * p), "stride": 1, "size": tp}
                )
    if dp > 1:
        for p in range(pp):
            for t in range(tp):
                tab_dp[p, t] = len(decl)
                decl.append(
                    {"id": f"dp.p{p}.t{t}", "start": t + tp * dp * p, "stride": tp, "size": dp}
                )
    if pp > 1:
        for d in range(dp):
            for t in range(tp):
                tab_pp[d, t] = len(decl)
                decl.append(
                    {"id": f"pp.d{d}.t{t}", "start": t + tp * d, "stride": tp * dp, "size": pp}
                )
    return decl, {"tp": tab_tp, "dp": tab_dp, "pp": tab_pp}


def header(spec: TrainingSpec) -> dict:
    decl, _ = group_ids(spec)
    return {
        "format": FORMAT,
        "meta": {
            "world_size": spec.ranks,
            "source": (
                f"tracecanary synth training (tp {spec.tp}, pp {spec.pp}, dp {spec.dp}, "
                f"{spec.steps} steps, seed {spec.seed})"
            ),
            "clock_domains": [
                {"id": "cluster", "ranks": list(range(spec.ranks)), "host": "ptp-cluster-clock"}
            ],
            "notes": [
                "synthetic training workload: tensor-parallel all_gather/reduce_scatter, pipeline "
                "send/recv between stages, data-parallel gradient-bucket all_reduce, world scalar all_reduce",
                "every timestamp is on one PTP-disciplined cluster clock (one clock domain): arrival skew is known",
                "latency_ns: a collective completes on every member at its last member's arrival plus its transfer time; a send and its recv complete together",
            ],
            "workload": {
                "kind": "training",
                "tp": spec.tp,
                "pp": spec.pp,
                "dp": spec.dp,
                "steps": spec.steps,
                "microbatches": spec.microbatches,
                "layers_per_stage": spec.layers_per_stage,
                "buckets": spec.buckets,
            },
        },
        "groups": decl,
    }


class _HashingWriter(io.RawIOBase):
    """Passes writes to ``raw`` and hashes the bytes (the file's SHA-256 without re-reading)."""

    def __init__(self, raw) -> None:
        self.raw = raw
        self.hash = hashlib.sha256()

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.hash.update(data)
        return self.raw.write(data)


def _strings(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(values), pa.string())


def _lines(cols: dict[str, np.ndarray], names: dict[str, pa.Array]) -> memoryview:
    """The JSON Lines text of one block of events (keys in canonical sorted order)."""
    take = {k: pc.take(names[k], pa.array(cols[k])) for k in ("dtype", "group", "op", "phase")}
    take["stream"] = pc.take(names["stream"], pa.array(cols["stream"]))
    peer = cols["peer"]
    has_peer = pa.array(peer >= 0)
    peer_txt = pc.if_else(
        has_peer,
        pc.binary_join_element_wise(',"peer":', _strings(np.maximum(peer, 0)), ""),
        "",
    )
    text = pc.binary_join_element_wise(
        '{"bytes":',
        _strings(cols["bytes"]),
        ',"dtype":"',
        take["dtype"],
        '","group":"',
        take["group"],
        '","latency_ns":',
        _strings(cols["latency_ns"]),
        ',"op":"',
        take["op"],
        '","overlap_ns":',
        _strings(cols["overlap_ns"]),
        peer_txt,
        ',"phase":"',
        take["phase"],
        '","rank":',
        _strings(cols["rank"]),
        ',"seq":',
        _strings(cols["seq"]),
        ',"stream":"',
        take["stream"],
        '","ts_ns":',
        _strings(cols["ts_ns"]),
        "}\n",
        "",
    )
    offsets = np.frombuffer(text.buffers()[1], dtype=np.int32, count=len(text) + 1, offset=0)
    start, stop = int(offsets[text.offset]), int(offsets[text.offset + len(text)])
    return memoryview(text.buffers()[2])[start:stop]


def _completion_ns(
    spec: TrainingSpec,
    templates: list[_Template],
    stages: list[tuple[np.ndarray, np.ndarray]],
    n_groups: int,
) -> list[np.ndarray]:
    """Per stage, the completion time of every event of one step (ranks x events): a
    collective completes on every member at its last member's arrival plus its transfer
    time (``synth.transfer``); a send and its recv complete together, at the later of
    the two arrivals plus the transfer. ``stages``: (arrival ts, group index) per stage."""
    ends = []
    world_last = max(int(ts[:, -1].max()) for ts, _ in stages)
    for s, tpl in enumerate(templates):
        ts, group = stages[s]
        n_ev = tpl.op.size
        xfer = np.zeros(n_ev, dtype=np.int64)
        for j in range(n_ev):
            size = {G_TP: spec.tp, G_DP: spec.dp, G_PP: 2, G_WORLD: spec.ranks}[int(tpl.kind[j])]
            xfer[j] = transfer_ns(OPS[int(tpl.op[j])], tpl.nbytes[j : j + 1], size)[0]
        last = np.full((n_groups, n_ev), np.iinfo(np.int64).min, dtype=np.int64)
        cols = np.broadcast_to(np.arange(n_ev), ts.shape)
        np.maximum.at(last, (group, cols), ts)
        end = last[group, cols] + xfer[None, :]
        end[:, tpl.kind == G_WORLD] = world_last + xfer[tpl.kind == G_WORLD]
        ends.append(end)
    for s in range(spec.pp - 1):  # pipeline hand-offs: row i of stage s <-> row i of s + 1
        for sender, receiver, d_send in ((s, s + 1, +1), (s + 1, s, -1)):
            t_send, t_recv = templates[sender], templates[receiver]
            i = np.flatnonzero((t_send.op == SEND) & (t_send.peer_delta == d_send))
            j = np.flatnonzero((t_recv.op == RECV) & (t_recv.peer_delta == -d_send))
            both = np.maximum(stages[sender][0][:, i], stages[receiver][0][:, j])
            end = both + transfer_ns("send", t_send.nbytes[i], 2)[None, :]
            ends[sender][:, i] = end
            ends[receiver][:, j] = end
    return ends


def write_training(
    path: str | os.PathLike,
    *,
    tp: int,
    pp: int,
    dp: int,
    steps: int,
    seed: int = TrainingSpec.seed,
    microbatches: int = TrainingSpec.microbatches,
    layers_per_stage: int = TrainingSpec.layers_per_stage,
) -> dict:
    """Write the training trace to ``path`` (``.jsonl`` or ``.jsonl.gz``; atomic) and
    return a summary: ranks, steps, events, occurrences, per-stage events per step,
    groups, bytes written and the file's SHA-256."""
    spec = TrainingSpec(
        tp=tp,
        pp=pp,
        dp=dp,
        steps=steps,
        seed=seed,
        microbatches=microbatches,
        layers_per_stage=layers_per_stage,
    )
    check_spec(spec)
    p = Path(path)
    if not (p.name.endswith(".jsonl") or p.name.endswith(".jsonl.gz")):
        raise InputError("training traces are written as .jsonl or .jsonl.gz", field="output")
    rng = np.random.default_rng(spec.seed)
    decl, tables = group_ids(spec)
    templates = [_stage_template(spec, s) for s in range(spec.pp)]
    names = {
        "dtype": pa.array(DTYPES),
        "group": pa.array([g["id"] for g in decl]),
        "op": pa.array(OPS),
        "phase": pa.array(PHASES),
        "stream": pa.array(STREAMS),
    }
    block = spec.tp * spec.dp  # ranks per stage
    stage_ranks = [np.arange(s * block, (s + 1) * block, dtype=np.int64) for s in range(spec.pp)]
    # fixed arrival offsets: a per-host pattern plus a per-rank pattern (ns)
    rank = np.arange(spec.ranks, dtype=np.int64)
    rank_offset = (rank // spec.ranks_per_host) % 7 * 310 + (rank * 137) % 900
    # a step lasts past its slowest rank: stage end, straggler delay, offsets and noise
    step_len = max(t.end_ns for t in templates) + STRAGGLER_MAX_NS + 120_000
    events = 0
    compressed = p.name.endswith(".gz")
    with atomic_output(p) as tmp:
        with open(tmp, "wb") as raw:
            hashing = _HashingWriter(raw)
            sink = (
                gzip.GzipFile(filename="", mode="wb", fileobj=hashing, mtime=0, compresslevel=6)
                if compressed
                else hashing
            )
            out = io.BufferedWriter(sink, buffer_size=1 << 22)
            out.write(canonical_json_bytes(header(spec)))
            step_start = 0
            for step in range(spec.steps):
                step_start += int(rng.gamma(2.0, 40_000.0))  # irregular gap into each step
                straggle = rng.random() < 0.15
                s_rank = int(rng.integers(0, spec.ranks))
                s_mb = int(rng.integers(0, spec.microbatches))
                s_delay = int(rng.integers(50_000, STRAGGLER_MAX_NS))
                tail = rng.random() < 0.1
                t_stage = int(rng.integers(0, spec.pp))
                t_start = int(rng.integers(0, 1 << 30))
                t_overlap = rng.integers(350_000, 600_000, size=TAIL_RUN)
                stage_rows = []
                for s, tpl in enumerate(templates):
                    ranks = stage_ranks[s]
                    n_ev = tpl.op.size
                    overlap = tpl.overlap_ns.copy()
                    if tail:
                        tp_pos = np.flatnonzero(tpl.kind == G_TP)
                        if s == t_stage and tp_pos.size > TAIL_RUN:
                            first = t_start % (tp_pos.size - TAIL_RUN)
                            overlap[tp_pos[first : first + TAIL_RUN]] = t_overlap
                    noise = rng.integers(0, NOISE_NS, size=(ranks.size, n_ev))
                    ts = (
                        CLOCK_ORIGIN_NS
                        + step_start
                        + tpl.offset_ns[None, :]
                        + rank_offset[ranks][:, None]
                        + noise
                    )
                    if straggle and s_rank in range(int(ranks[0]), int(ranks[-1]) + 1):
                        # the straggler is late from its first event of that microbatch
                        # to the end of the step (a suffix: issue order is kept)
                        first = int(np.flatnonzero(tpl.microbatch >= s_mb)[0])
                        ts[s_rank - int(ranks[0]), first:] += s_delay
                    t_idx = ranks % spec.tp
                    d_idx = (ranks // spec.tp) % spec.dp
                    kind = tpl.kind[None, :]
                    group = np.zeros((ranks.size, n_ev), dtype=np.int64)
                    if spec.tp > 1:
                        group = np.where(kind == G_TP, tables["tp"][s, d_idx][:, None], group)
                    if spec.dp > 1:
                        group = np.where(kind == G_DP, tables["dp"][s, t_idx][:, None], group)
                    if spec.pp > 1:
                        group = np.where(kind == G_PP, tables["pp"][d_idx, t_idx][:, None], group)
                    stage_rows.append((ts, group, overlap))
                ends = _completion_ns(
                    spec, templates, [(t, g) for t, g, _ in stage_rows], len(decl)
                )
                for s, tpl in enumerate(templates):
                    ranks = stage_ranks[s]
                    n_ev = tpl.op.size
                    ts, group, overlap = stage_rows[s]
                    delta = tpl.peer_delta[None, :].astype(np.int64)
                    peer = np.where(delta != 0, ranks[:, None] + delta * block, -1)
                    cols = {
                        "bytes": np.broadcast_to(tpl.nbytes, (ranks.size, n_ev)).ravel(),
                        "dtype": np.broadcast_to(tpl.dtype, (ranks.size, n_ev)).ravel(),
                        "group": group.ravel(),
                        "latency_ns": (ends[s] - ts).ravel(),
                        "op": np.broadcast_to(tpl.op, (ranks.size, n_ev)).ravel(),
                        "overlap_ns": np.broadcast_to(overlap, (ranks.size, n_ev)).ravel(),
                        "peer": peer.ravel(),
                        "phase": np.broadcast_to(tpl.phase, (ranks.size, n_ev)).ravel(),
                        "rank": np.repeat(ranks, n_ev),
                        "seq": np.tile(np.arange(step * n_ev, (step + 1) * n_ev), ranks.size),
                        "stream": np.broadcast_to(tpl.stream, (ranks.size, n_ev)).ravel(),
                        "ts_ns": ts.ravel(),
                    }
                    out.write(_lines(cols, names))
                    events += ranks.size * n_ev
                step_start += step_len
            out.flush()
            if compressed:
                sink.close()
        digest = hashing.hash.hexdigest()
        size = os.path.getsize(tmp)
    return {
        "path": str(p),
        "format": FORMAT,
        "ranks": spec.ranks,
        "tp": spec.tp,
        "pp": spec.pp,
        "dp": spec.dp,
        "steps": spec.steps,
        "seed": spec.seed,
        "events": int(events),
        "occurrences": int(occurrences(spec)),
        "events_per_rank_per_step": [int(t.op.size) for t in templates],
        "groups": len(decl),
        "bytes": int(size),
        "sha256": digest,
    }


def occurrences(spec: TrainingSpec) -> int:
    """Collective occurrences the trace holds (one per group instance / matched pair)."""
    total = 0
    for s in range(spec.pp):
        tpl = _stage_template(spec, s)
        per_stage = spec.tp * spec.dp
        total += int((tpl.kind == G_TP).sum()) * per_stage // spec.tp
        total += int((tpl.kind == G_DP).sum()) * per_stage // spec.dp
        total += int(((tpl.kind == G_PP) & (tpl.op == SEND)).sum()) * per_stage
    return (total + 1) * spec.steps


__all__ = ["TrainingSpec", "write_training", "occurrences", "header", "group_ids"]
