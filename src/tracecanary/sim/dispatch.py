"""The replayer's dispatch lateness: what a step costs inside the physical replayer after a
given history, beyond what the isolated ladders price it at.

Why: the physical replayer does untimed work between ops on every rank (fresh buffers
filled for the next op, the previous op's output checked), and on an oversubscribed or
busy host the ranks leave one collective at different times; the next op's latency (the
slowest rank's, i.e. the first to arrive) then carries the other ranks' late arrival, and
the spread carries over more than one op. Ladders run one op back to back with a cheap
reset and never see it: a 64 B broadcast after a 2 MB all_gather measured 13 ms inside the
replayer against 1.4 ms on its ladder.

Evidence, never the runs the twin is judged on: separate *calibration replays*.
``calibration_program`` writes a PARAM program built from the vocabulary of the programs
to be priced: every distinct run of ``CONTEXT_STEPS + 1`` consecutive execution steps (a
step is one op, or one fused bucket in fused mode; its *signature* is op, dtype, group
size, bytes and member count), each repeated ``repeats`` times, every op a copy of an
exemplar entry of the source program (new occurrence ids, weight 1, no timestamps). It is
replayed for real (``tracecanary replay-physical`` under the configuration calibrated),
once or several times (interleaved with the judged replays, so the host's state is
sampled across the session). ``measure_dispatch`` reads the attempt archives and, per step
after the first, takes the *lateness* = measured latency (slowest rank, median over
passes, summed over a bucket's members) minus the twin's ladder-priced latency of the same
step, pools the attempts and states its median per two-step context (predecessor's
predecessor, predecessor, step), per transition (predecessor, step) and per signature.

The twin (``sim/twin.py``) adds, to every step after the first, the lateness of its
context, else of its transition, else of its signature (``unmatched_contexts`` counts the
steps priced below their full context); a step whose signature was never measured is
refused by name. Where a context matches, the twin's step cost is the calibration replays'
median in-replay cost of that step after that history: the ladders then only price what
the calibration did not see. The term is a measurement of the host at calibration time,
with its provenance (per attempt: input digest and rows SHA-256) recorded beside it.

Guarantees: deterministic (medians over a fixed order, rounded to 0.001 us); an attempt
whose configuration or program does not match is refused (InputError, exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from tracecanary.errors import InputError

DISPATCH_METHOD = "tracecanary.dispatch-transitions/v1"
CALIBRATION_PHASE = "dispatch-calibration"
# steps of history the lateness is keyed by at most (predecessor's predecessor, predecessor)
CONTEXT_STEPS = 2
# replayer-mode fields that must match between the calibration replay and the configuration
REPLAY_FIELDS = ("mode", "op_barrier", "chunks", "bucket_bytes")


def _replay_record(replay: dict) -> dict:
    return {k: replay[k] for k in REPLAY_FIELDS if k in replay}


def _entries_by_occ(rank_file: Path) -> tuple[list[dict], dict[int, dict]]:
    """(init entries, occurrence id -> entry) of one rank's PARAM file."""
    from tracecanary.param.program import read_json_list

    inits, by_occ = [], {}
    for entry in read_json_list(rank_file):
        if entry.get("comms") == "init":
            inits.append(entry)
            continue
        by_occ[int(str(entry["markers"][0]).split(":", 1)[1])] = entry
    return inits, by_occ


def calibration_program(
    program_dirs: list[str | Path], replay: dict, out_dir: str | Path, *, repeats: int
) -> dict:
    """Write the calibration program (see module doc) to ``out_dir`` (atomically, a new or
    empty directory); return ``{motifs, steps, ops}`` counts."""
    from tracecanary.canonical import atomic_output, canonical_json_bytes
    from tracecanary.param.program import rank_files
    from tracecanary.sim.twin import op_table, plan_steps, step_signatures

    if repeats < 1:
        raise InputError("--repeats must be >= 1", field="--repeats")
    exemplars: dict[str, tuple[int, list[int]]] = {}  # signature -> (program index, occs)
    motifs: set[tuple[str, ...]] = set()
    for index, directory in enumerate(program_dirs):
        table = op_table(directory)
        steps = plan_steps(table, replay)
        sigs = step_signatures(table, steps)
        occ = table["occ"].to_numpy(np.int64)
        for step, sig in zip(steps, sigs, strict=True):
            exemplars.setdefault(sig, (index, [int(occ[i]) for i in step]))
        if len(sigs) <= CONTEXT_STEPS:
            motifs.add(tuple(sigs))
        motifs.update(
            tuple(sigs[i : i + CONTEXT_STEPS + 1]) for i in range(len(sigs) - CONTEXT_STEPS)
        )
    files = [rank_files(d) for d in program_dirs]
    world = {len(f) for f in files}
    if len(world) != 1:
        raise InputError(
            "the programs have different world sizes", file=str(program_dirs[0]), field="ranks"
        )
    loaded = [[_entries_by_occ(p) for p in f] for f in files]
    inits = [r[0] for r in loaded[0]]
    for index, program in enumerate(loaded[1:], start=1):
        if [r[0] for r in program] != inits:
            raise InputError(
                "process groups differ from the first program's: one calibration program "
                "cannot serve both",
                file=str(program_dirs[index]),
                field="init",
            )
    sequence = [sig for motif in sorted(motifs) for _ in range(repeats) for sig in motif]
    per_rank: list[list[dict]] = [list(inits[r]) for r in range(len(inits))]
    occ_next = 0
    for sig in sequence:
        index, occs = exemplars[sig]
        for occ in occs:
            for r, (_, by_occ) in enumerate(loaded[index]):
                entry = by_occ.get(occ)
                if entry is None:  # this rank does not take part
                    continue
                copy = {k: v for k, v in entry.items() if k not in ("markers", "startTime_ns")}
                copy["markers"] = [f"canary:{occ_next}", "weight:1", f"phase:{CALIBRATION_PHASE}"]
                per_rank[r].append(copy)
            occ_next += 1
    with atomic_output(out_dir, directory=True) as tmp:
        for r, entries in enumerate(per_rank):
            (tmp / f"{r}.json").write_bytes(canonical_json_bytes(entries))
    return {"motifs": len(motifs), "steps": len(sequence), "ops": occ_next}


def _measured_step_latency_ns(archive: Path, table: pd.DataFrame, steps: list[list[int]]):
    """Per step: the slowest rank's latency (ns), median over passes, summed over members."""
    import pyarrow.parquet as pq

    rows = pq.read_table(archive / "rows.parquet", columns=["occ", "iteration", "latency_ns"])
    frame = rows.to_pandas()
    per = frame.groupby(["occ", "iteration"], sort=True)["latency_ns"].max()
    occ_latency = per.groupby(level="occ").median()
    occ = table["occ"].to_numpy(np.int64)
    missing = sorted(set(occ.tolist()) - set(occ_latency.index.tolist()))
    if missing:
        raise InputError(
            f"the attempt has no rows for occurrence {missing[0]} of the calibration program",
            file=str(archive / "rows.parquet"),
            field="occ",
        )
    lat = occ_latency.reindex(occ).to_numpy(np.float64)
    return np.asarray([lat[s].sum() for s in steps], dtype=np.float64)


def _attempt_lateness(attempt_dir: str | Path, config) -> tuple[pd.DataFrame, dict]:
    """(per step after the first: prev, step, lateness us) and the attempt's provenance."""
    from tracecanary.canonical import digest_path
    from tracecanary.sim.twin import op_table, plan_steps, simulate_twin, step_signatures

    archive = Path(attempt_dir)
    where = {"file": str(archive / "attempt.json")}
    try:
        attempt = json.loads((archive / "attempt.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise InputError(f"not an attempt archive: {err}", **where) from None
    if attempt.get("status") != "complete" or attempt.get("kind") != "replay":
        raise InputError(
            f"attempt is {attempt.get('kind')!r} {attempt.get('status')!r}, not a complete "
            "replay: not evidence",
            field="status",
            **where,
        )
    if attempt.get("use_timestamps"):
        raise InputError(
            "calibration replay ran with timestamps: replay it back to back",
            field="use_timestamps",
            **where,
        )
    recorded = _replay_record(
        {"op_barrier": False, **(attempt.get("physical_config") or {"mode": "native"})}
    )
    expected = _replay_record({"op_barrier": False, **config.replay})
    if recorded != expected:
        raise InputError(
            f"calibration replay ran under {recorded}, configuration {config.name!r} replays "
            f"under {expected}",
            field="physical_config",
            **where,
        )
    program = Path(attempt["input"]["path"])
    if not program.is_dir() or digest_path(program) != attempt["input"]["digest"]:
        raise InputError(
            f"the replayed program {str(program)!r} is missing or changed since the replay",
            field="input/digest",
            **where,
        )
    table = op_table(program)
    if (table["weight"] != 1.0).any():
        raise InputError("not a calibration program (weights other than 1)", file=str(program))
    steps = plan_steps(table, config.replay)
    sigs = step_signatures(table, steps)
    measured = _measured_step_latency_ns(archive, table, steps)
    priced = simulate_twin(table, config, dispatch=False).latency_ns.astype(np.float64)
    predicted = np.asarray([priced[s].sum() for s in steps], dtype=np.float64)
    late = (measured - predicted) / 1000.0
    frame = pd.DataFrame(
        {"prev2": ["", "", *sigs[:-2]][: len(sigs)], "prev": ["", *sigs[:-1]], "step": sigs,
         "late": late}
    ).iloc[1:]  # fmt: skip
    record = {
        "input_digest": attempt["input"]["digest"],
        "rows_sha256": attempt.get("files", {}).get("rows.parquet"),
        "started_utc": attempt.get("started_utc"),
        "nproc": attempt.get("nproc"),
    }
    return frame, record


def measure_dispatch(attempt_dirs: list[str | Path], config) -> dict:
    """The ``measured.dispatch`` document of ``config`` (a measured BackendConfig) from the
    attempt archives of its calibration replays (see module doc): the lateness samples of
    every attempt pooled, so replays interleaved with the judged ones track the host's
    state over the session."""
    frames, records = [], []
    for attempt_dir in attempt_dirs:
        frame, record = _attempt_lateness(attempt_dir, config)
        frames.append(frame)
        records.append(record)
    frame = pd.concat(frames, ignore_index=True)
    deep = frame[frame["prev2"] != ""]
    contexts = [
        {"prev2": a, "prev": p, "step": s, "lateness_us": round(float(g.median()), 3),
         "n": int(g.size)}
        for (a, p, s), g in deep.groupby(["prev2", "prev", "step"], sort=True)["late"]
    ]  # fmt: skip
    transitions = [
        {"prev": p, "step": s, "lateness_us": round(float(g.median()), 3), "n": int(g.size)}
        for (p, s), g in frame.groupby(["prev", "step"], sort=True)["late"]
    ]
    per_step = [
        {"step": s, "lateness_us": round(float(g.median()), 3), "n": int(g.size)}
        for s, g in frame.groupby("step", sort=True)["late"]
    ]
    return {
        "method": DISPATCH_METHOD,
        "attempts": records,
        "contexts": contexts,
        "transitions": transitions,
        "steps": per_step,
    }
