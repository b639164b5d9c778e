"""The simulator twin of a physical replay: the same logical program, priced by measured costs.

``op_table`` reads the PARAM program a physical replay ran (one row per executed logical
occurrence, in occurrence order); ``simulate_twin`` applies the physical configuration's
replayer mode as a program transform and prices every resulting call with the measured
cost curves of a calibrated configuration (``sim/costs.py``). The physical replayer is
blocking (each rank issues an op, waits for it, then issues the next), so the twin is a
closed loop: an op starts when the previous one ended (timestamped: not before its
recorded start) and its latency is its service time.

Transforms (mirroring ``physical/strategies.py``):
    native      one call per op
    fused       consecutive ops of one group with the same kind, dtype and root, each and
                together at most ``bucket_bytes``, become one call of their summed bytes
                (the same rule as ``plan_buckets``; send/recv never fuse); each member gets
                its bytes' share of the call's time, as the replayer records it
    chunked     ``chunks`` calls of bytes/chunks, issued together and served one after
                another (one process group serves them in order)
    decomposed  all_reduce = reduce_scatter + all_gather; all_gather = one broadcast of
                bytes/n per member; reduce_scatter = one reduce of bytes/n per member;
                all_to_all = n-1 sendrecv rounds of bytes/n; broadcast = scatter +
                all_gather and reduce = reduce_scatter + gather, each call of the op's
                bytes (nccl-tests sizes: the scattered / gathered whole buffer), priced
                from ``tracecanary sweep --collective scatter|gather`` ladders (without
                them such programs are refused by name); barrier/send/recv native
    op_barrier  the replayer's barrier before each op is untimed and aligns the ranks, so
                the op's latency carries no arrival skew; the barrier's own time is not
                modelled (no ladder measures it): pass times exclude it
    timestamped each op waits for its recorded start; the op's latency (slowest rank,
                i.e. the first rank to arrive) includes the spread of the ranks' recorded
                start times

Dispatch lateness (``sim/dispatch.py``): when the configuration carries a measured
``dispatch`` term (a separate calibration replay through the same replayer), every step
after the first also costs the lateness measured for its two-step context, else its
(predecessor, step) transition, else its step signature (``unmatched_contexts`` counts the
steps priced below their full context); a step signature never measured is refused by
name. ``dispatch=False`` prices ladders only.

Guarantees: an op whose (collective, dtype, group size) has no curve is refused by name
(InputError, exit 2), never priced by a default; the result is deterministic (float64 in
a fixed order, latencies rounded half-to-even to ns).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tracecanary.errors import InputError
from tracecanary.sim.backends import BackendConfig
from tracecanary.sim.costs import canonical_dtype_name, curve_key, format_key
from tracecanary.sim.engine import channel_fifo
from tracecanary.sim.metrics import distribution

FUSABLE_OPS = frozenset({"all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter"})
MODES: tuple[str, ...] = ("native", "fused", "chunked", "decomposed")

OP_TABLE_COLUMNS = (
    "occ",
    "op",
    "bytes",
    "dtype",
    "group_size",
    "pg_id",
    "root",
    "weight",
    "start_ns",
    "skew_ns",
)


def op_table(program_dir: str | Path) -> pd.DataFrame:
    """One row per executed logical occurrence of a PARAM program directory, sorted by
    occ: op (all_to_allv as all_to_all, a send/recv pair as send), bytes (nccl-tests
    size), canonical dtype, group size, pg_id, root, weight, start_ns (earliest recorded
    start over ranks, -1 when absent) and skew_ns (latest minus earliest, 0 when absent)."""
    from tracecanary.param.dtypes import PARAM_DTYPES
    from tracecanary.param.program import load_program_dir

    programs = load_program_dir(program_dir)
    frames = []
    for prog in programs:
        ops = prog.executed()
        sizes = [
            2 if op in ("send", "recv") else len(prog.members(int(pg)))
            for op, pg in zip(ops["op"], ops["pg_id"], strict=True)
        ]
        frames.append(
            pd.DataFrame(
                {
                    "occ": ops["occ"].to_numpy(np.int64),
                    "op": ops["op"].replace({"all_to_allv": "all_to_all", "recv": "send"}),
                    "bytes": ops["bytes"].to_numpy(np.int64),
                    "dtype": [PARAM_DTYPES[d].canonical if d else "" for d in ops["dtype"]],
                    "group_size": np.asarray(sizes, dtype=np.int64),
                    "pg_id": ops["pg_id"].to_numpy(np.int64),
                    "root": ops["root"].to_numpy(np.int64),
                    "weight": ops["weight"].to_numpy(np.float64),
                    "start": ops["start_time_ns"].to_numpy(np.int64),
                }
            )
        )
    table = pd.concat(frames, ignore_index=True)
    out = table.groupby("occ", sort=True).agg(
        op=("op", "first"),
        bytes=("bytes", "max"),
        dtype=("dtype", "first"),
        group_size=("group_size", "first"),
        pg_id=("pg_id", "first"),
        root=("root", "first"),
        weight=("weight", "first"),
        start_ns=("start", "min"),
        latest=("start", "max"),
    )
    out["skew_ns"] = np.where(out["start_ns"] >= 0, out["latest"] - out["start_ns"], 0)
    return out.reset_index()[list(OP_TABLE_COLUMNS)]


def plan_steps(table: pd.DataFrame, replay: dict) -> list[list[int]]:
    """Execution steps (lists of row positions), the ``plan_buckets`` rule for fused mode."""
    n = len(table)
    if replay.get("mode") != "fused":
        return [[i] for i in range(n)]
    bucket = int(replay["bucket_bytes"])
    ops, nbytes = table["op"].to_numpy(), table["bytes"].to_numpy(np.int64)
    dtypes, roots, pgs = (
        table["dtype"].to_numpy(),
        table["root"].to_numpy(),
        table["pg_id"].to_numpy(),
    )
    steps: list[list[int]] = []
    open_bucket: dict[int, tuple[list[int], int]] = {}
    for i in range(n):
        if ops[i] == "send":
            steps.append([i])
            continue
        fusable = ops[i] in FUSABLE_OPS and 0 < nbytes[i] <= bucket
        current = open_bucket.pop(int(pgs[i]), None)
        if current is not None:
            step, total = current
            h = step[0]
            if (
                fusable
                and ops[i] == ops[h]
                and dtypes[i] == dtypes[h]
                and roots[i] == roots[h]
                and total + nbytes[i] <= bucket
            ):
                step.append(i)
                open_bucket[int(pgs[i])] = (step, total + int(nbytes[i]))
                continue
        step = [i]
        steps.append(step)
        if fusable:
            open_bucket[int(pgs[i])] = (step, int(nbytes[i]))
    return steps


def step_signatures(table: pd.DataFrame, steps: list[list[int]]) -> list[str]:
    """``op:dtype:group_size:bytes:members`` per step (bytes summed over a bucket)."""
    ops = table["op"].to_numpy()
    dtypes = table["dtype"].to_numpy()
    sizes = table["group_size"].to_numpy(np.int64)
    nbytes = table["bytes"].to_numpy(np.int64)
    return [
        f"{ops[s[0]]}:{dtypes[s[0]] or '-'}:{int(sizes[s[0]])}:{int(nbytes[s].sum())}:{len(s)}"
        for s in steps
    ]


def dispatch_lateness_ns(dispatch: dict, sigs: list[str], *, config: str) -> tuple[np.ndarray, int]:
    """(lateness ns per step, steps priced below their full context) under a
    ``measured.dispatch`` document: per step after the first, the lateness of its two-step
    context (predecessor's predecessor, predecessor, step), else of its transition
    (predecessor, step), else of its signature; the first step gets none (it starts after
    the pass's barrier) and the second has only a transition for context. A signature never
    measured is refused by name."""
    by_context = {
        (t["prev2"], t["prev"], t["step"]): t["lateness_us"] for t in dispatch["contexts"]
    }
    by_pair = {(t["prev"], t["step"]): t["lateness_us"] for t in dispatch["transitions"]}
    by_step = {t["step"]: t["lateness_us"] for t in dispatch["steps"]}
    out = np.zeros(len(sigs), dtype=np.float64)
    fallbacks = 0
    for k in range(1, len(sigs)):
        value = by_context.get((sigs[k - 2], sigs[k - 1], sigs[k])) if k >= 2 else None
        if value is None:
            value = by_pair.get((sigs[k - 1], sigs[k]))
            fallbacks += k >= 2 or value is None
        if value is None:
            value = by_step.get(sigs[k])
        if value is None:
            raise InputError(
                f"configuration {config!r} has no dispatch measurement for step {sigs[k]} "
                "that this program's replay uses: refused, never filled with a default "
                "(recalibrate with tracecanary dispatch-program on this program)",
                record=f"configs/{config}",
                field="measured/dispatch",
            )
        out[k] = value * 1000.0
    return out, fallbacks


def _pieces(op: str, nbytes: int, n: int, replay: dict) -> list[tuple[str, int]]:
    """The (collective, bytes) calls one step's op becomes under the replayer mode."""
    mode = replay.get("mode", "native")
    if mode == "chunked" and op != "barrier":
        k = int(replay["chunks"])
        return [(op, nbytes // k)] * k
    if mode == "decomposed":
        per = nbytes // max(n, 1)
        if op == "all_reduce":
            return [("reduce_scatter", nbytes), ("all_gather", nbytes)]
        if op == "all_gather":
            return [("broadcast", per)] * n
        if op == "reduce_scatter":
            return [("reduce", per)] * n
        if op == "all_to_all":
            return [("sendrecv", per)] * (n - 1)
        if op == "broadcast":
            return [("scatter", nbytes), ("all_gather", nbytes)]
        if op == "reduce":
            return [("reduce_scatter", nbytes), ("gather", nbytes)]
    return [(op, nbytes)]


@dataclass(frozen=True)
class TwinResult:
    """Per occurrence (table order) latency in ns, and the pass time."""

    latency_ns: np.ndarray
    weight: np.ndarray
    pass_ns: int
    steps: int
    calls: int
    extrapolated_calls: int
    unmatched_contexts: int = 0
    dispatch: bool = False

    def metrics_us(self) -> dict:
        """p50/p95/p99/max/mean in us and pass_ms, as the physical report states them."""
        d = distribution(self.latency_ns, self.weight)
        out = {m: float(d[f"{m}_ns"]) / 1000.0 for m in ("p50", "p95", "p99", "max", "mean")}
        out["pass_ms"] = self.pass_ns / 1e6
        out["steps"] = self.steps
        out["calls"] = self.calls
        out["extrapolated_calls"] = self.extrapolated_calls
        out["dispatch"] = self.dispatch
        out["unmatched_contexts"] = self.unmatched_contexts
        return out


def simulate_twin(
    table: pd.DataFrame,
    config: BackendConfig,
    *,
    timestamped: bool = False,
    dispatch: bool = True,
) -> TwinResult:
    """Price ``table`` under a measured configuration's costs and replayer mode."""
    if config.costs is None or config.replay is None:
        raise InputError(
            f"configuration {config.name!r} is modelled, not measured: the physical twin "
            "needs costs calibrated from ladders (tracecanary calibrate-backends)",
            field=f"configs/{config.name}",
        )
    replay = config.replay
    steps = plan_steps(table, replay)
    ops = table["op"].to_numpy()
    nbytes = table["bytes"].to_numpy(np.int64)
    dtypes = [canonical_dtype_name(d) for d in table["dtype"]]
    sizes = table["group_size"].to_numpy(np.int64)
    call_op, call_dtype, call_size, call_bytes, call_step = [], [], [], [], []
    for s, step in enumerate(steps):
        h = step[0]
        total = int(nbytes[step].sum())
        for op, b in _pieces(str(ops[h]), total, int(sizes[h]), replay):
            call_op.append(op)
            call_dtype.append(dtypes[h])
            call_size.append(int(sizes[h]))
            call_bytes.append(b)
            call_step.append(s)
    keys = {curve_key(o, d, g) for o, d, g in zip(call_op, call_dtype, call_size, strict=True)}
    missing = config.costs.missing(keys)
    if missing:
        raise InputError(
            f"configuration {config.name!r} has no measured evidence for "
            + ", ".join(format_key(k) for k in missing)
            + " that this program's replay uses: refused, never filled with a default",
            record=f"configs/{config.name}",
            field="measured/costs",
        )
    cost_us, extra = config.costs.evaluate(
        np.asarray(call_op, dtype=object),
        np.asarray(call_dtype, dtype=object),
        np.asarray(call_size, dtype=np.int64),
        np.asarray(call_bytes, dtype=np.int64),
    )
    step_ns = np.zeros(len(steps), dtype=np.float64)
    np.add.at(step_ns, np.asarray(call_step, dtype=np.int64), cost_us * 1000.0)
    unmatched = 0
    use_dispatch = dispatch and config.dispatch is not None
    if use_dispatch:
        late, unmatched = dispatch_lateness_ns(
            config.dispatch, step_signatures(table, steps), config=config.name
        )
        step_ns = np.maximum(step_ns + late, 0.0)
    latency = np.zeros(len(table), dtype=np.float64)
    for s, step in enumerate(steps):
        if len(step) == 1:
            latency[step[0]] = step_ns[s]
            continue
        w = nbytes[step].astype(np.float64)
        share = w / w.sum() if w.sum() > 0 else np.full(len(step), 1.0 / len(step))
        latency[step] = step_ns[s] * share
    skew = table["skew_ns"].to_numpy(np.int64)
    if timestamped and not replay.get("op_barrier", False):
        latency = latency + skew
    service = np.rint(step_ns).astype(np.int64)
    heads = np.asarray([step[0] for step in steps], dtype=np.int64)
    if timestamped:
        ready = np.maximum(table["start_ns"].to_numpy(np.int64)[heads], 0)
    else:
        ready = np.zeros(len(steps), dtype=np.int64)
    start = channel_fifo(ready, service, np.zeros(len(steps), dtype=np.int64))
    pass_ns = int((start + service).max() - start.min()) if len(steps) else 0
    return TwinResult(
        latency_ns=np.rint(latency).astype(np.int64),
        weight=table["weight"].to_numpy(np.float64),
        pass_ns=pass_ns,
        steps=len(steps),
        calls=len(call_op),
        extrapolated_calls=int(extra.sum()),
        unmatched_contexts=unmatched,
        dispatch=use_dispatch,
    )
