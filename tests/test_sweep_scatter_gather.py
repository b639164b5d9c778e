"""scatter and gather ladders (nccl-tests scatter_perf / gather_perf) and the decomposed
twin they make possible: broadcast = scatter + all_gather, reduce = reduce_scatter + gather,
priced from ladders swept here through real gloo collectives (2 ranks)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import sweep_gloo_ladder
from test_alphabeta_nccltests import SIZES, ladder_times, synth_run

from tracecanary.alphabeta.ladder import busbw_factor
from tracecanary.cli import main
from tracecanary.errors import InputError
from tracecanary.formats.schemas import load_schema
from tracecanary.formats.vocab import LADDER_COLLECTIVES
from tracecanary.param.dtypes import canonical_dtype
from tracecanary.physical import correctness
from tracecanary.physical.samples import GAP_NS, write_program
from tracecanary.physical.sweep import ladder_counts, table_from_rows
from tracecanary.sim.backends import load_backends
from tracecanary.sim.twin import op_table, simulate_twin

PHYSICAL_YAML = Path(__file__).resolve().parents[1] / "config" / "physical.yaml"
FLOAT32 = canonical_dtype("float32")
CPU = torch.device("cpu")


def test_ladder_collective_enums_of_every_schema_are_the_vocabulary():
    attempt = load_schema("attempt")
    sweep = attempt["properties"]["sweep"]["properties"]["collective"]["enum"]
    alphabeta = json.dumps(load_schema("alphabeta"))
    backends = load_schema("backends")["$defs"]["cost_curve"]["properties"]["collective"]["enum"]
    assert tuple(sweep) == tuple(backends) == LADDER_COLLECTIVES
    assert json.dumps(list(LADDER_COLLECTIVES)) in alphabeta


def test_scatter_and_gather_rungs_hold_a_whole_element_per_rank():
    assert ladder_counts("scatter", 1, 64, 2, 4, 4) == [4, 8, 16]
    assert ladder_counts("gather", 100, 100, 2, 2, 3) == [48]


def test_scatter_and_gather_tables_print_per_rank_counts_root_zero_and_nccl_tests_busbw():
    assert busbw_factor("scatter", 4) == busbw_factor("gather", 4) == pytest.approx(3 / 4)
    rows = pd.DataFrame(
        [("gather", "float32", 4, 4096, 0, 0, r, 2000 + 1000 * r, True) for r in range(4)],
        columns=["collective", "dtype", "world_size", "bytes", "cycle", "iteration", "rank",
                 "latency_ns", "correct"],
    )  # fmt: skip
    (first,) = table_from_rows(rows).itertuples(index=False)
    assert (first.size, first.count, first.root, first.redop) == (4096, 256, 0, "none")
    assert first.time_us == pytest.approx(3.5)  # mean over ranks
    assert first.busbw_gbps == pytest.approx(4096 / 3.5 / 1e3 * 3 / 4)


def _scatter_buffers(ws: int, per: int) -> list[correctness.OpBuffers]:
    return [
        correctness.prepare("scatter", in_elems=ws * per, out_elems=per, info=FLOAT32,
                            members=tuple(range(ws)), rank=g, root=0, device=CPU)
        for g in range(ws)
    ]  # fmt: skip


def test_scatter_check_accepts_the_roots_own_piece_and_catches_a_misplaced_one():
    ws, per = 3, 251  # a piece of exactly the fill period: a plain offset would repeat
    bufs = _scatter_buffers(ws, per)
    pieces = bufs[0].send.split(per)
    for g, buf in enumerate(bufs):
        buf.recv.copy_(pieces[g])
        assert correctness.check(buf)
    bufs[1].recv.copy_(pieces[2])
    assert not correctness.check(bufs[1])


def test_gather_is_checked_on_the_root_only_and_catches_swapped_pieces():
    ws, per = 3, 5
    bufs = [
        correctness.prepare("gather", in_elems=per, out_elems=ws * per, info=FLOAT32,
                            members=tuple(range(ws)), rank=g, root=0, device=CPU)
        for g in range(ws)
    ]  # fmt: skip
    assert bufs[1].expected is None and bufs[2].recv is None
    root = bufs[0]
    root.recv.copy_(torch.cat([b.send for b in bufs]))
    assert correctness.check(root)
    root.recv.copy_(torch.cat([bufs[0].send, bufs[2].send, bufs[1].send]))
    assert not correctness.check(root)


def test_calibrate_backends_takes_nccl_tests_scatter_and_gather_logs(tmp_path):
    """The GPU path: scatter_perf / gather_perf stdout -> one cost curve each."""
    logs = []
    for coll in ("scatter", "gather"):
        log = tmp_path / f"{coll}.txt"
        log.write_text(synth_run(coll, 8, SIZES, ladder_times(SIZES, cycles=3, jitter=0.5)))
        logs.append(f"h100={log}")
    out = tmp_path / "b.yaml"
    assert main(["calibrate-backends", *logs, "-o", str(out)]) == 0
    curves = load_backends(out).configs["h100"].costs.curves
    assert set(curves) == {("scatter", "float32", 8), ("gather", "float32", 8)}
    assert curves[("scatter", "float32", 8)].bytes.tolist() == SIZES


def test_scatter_sweep_refuses_a_mode_with_no_scatter_strategy(tmp_path, capsys):
    out = tmp_path / "l"
    argv = ["sweep", "--collective", "scatter", "--nproc", "2", "-o", str(out)]
    argv += ["--physical-config", "decomposed", "--physical-configs", str(PHYSICAL_YAML)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "field --physical-config" in err and "native mode only" in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


# ------------------------------------------------------------------ real gloo ladders

LADDERS = ("scatter", "gather", "all_gather", "reduce_scatter")


@pytest.fixture(scope="module")
def ladders(tmp_path_factory, gloo_float32_ladders) -> dict[str, str]:
    """float32 ladders at 2 ranks (real torch.distributed): scatter and gather swept here,
    1-64 KiB, factor 4, 2 cycles; all_gather and reduce_scatter from the session's shared
    sweep (conftest.gloo_float32_ladders, 256 B-4 MiB)."""
    root = tmp_path_factory.mktemp("sg_ladders")
    out = {}
    for coll in LADDERS:
        if coll in gloo_float32_ladders:
            out[coll] = gloo_float32_ladders[coll]
            continue
        out[coll] = sweep_gloo_ladder(root / coll, coll, "1K", "64K", cycles=2)
    return out


def _rooted_program(tmp: Path) -> Path:
    """2 ranks: broadcasts and reduces of 4 KiB and 64 KiB float32, root 0."""
    ops = [("broadcast", 1024), ("reduce", 1024), ("broadcast", 1 << 14), ("reduce", 1 << 14)]
    entries = [{"comms": "init", "pg_id": 0, "global_ranks": [0, 1], "world_size": 2}]
    for occ, (comms, n) in enumerate(ops):
        entries.append(
            {"comms": comms, "in_msg_size": n, "out_msg_size": n, "dtype": "float",
             "world_size": 2, "pg_id": 0, "root": 0, "markers": [f"canary:{occ}"],
             "startTime_ns": occ * GAP_NS}
        )  # fmt: skip
    return write_program(tmp / "rooted", [entries, entries])


@pytest.mark.slow
def test_real_scatter_and_gather_ladders_are_checked_complete_and_fit(ladders, tmp_path):
    for coll in ("scatter", "gather"):
        attempt = json.loads((Path(ladders[coll]) / "attempt.json").read_text())
        assert attempt["status"] == "complete" and attempt["sweep"]["collective"] == coll
        assert attempt["sweep"]["rungs_bytes"] == [1024, 4096, 16384, 65536]
        assert attempt["physical_config"]["mode"] == "native"
    fit = tmp_path / "fit.json"
    assert main(["alphabeta", ladders["scatter"], ladders["gather"], "-o", str(fit)]) == 0
    doc = json.loads(fit.read_text())
    assert {ld["collective"] for ld in doc["ladders"]} == {"scatter", "gather"}
    assert {ld["busbw_factor"] for ld in doc["ladders"]} == {0.5}


@pytest.mark.slow
def test_decomposed_twin_prices_broadcast_and_reduce_from_scatter_and_gather_ladders(
    ladders, tmp_path
):
    program = _rooted_program(tmp_path)
    out = tmp_path / "backends.yaml"
    argv = ["calibrate-backends", *ladders.values(), "--physical-configs", str(PHYSICAL_YAML)]
    argv += ["--config", "decomposed", "--backend", "gloo", "--program", str(program)]
    assert main([*argv, "-o", str(out)]) == 0
    config = load_backends(out).configs["decomposed"]
    table = op_table(program)
    twin = simulate_twin(table, config)
    assert twin.steps == 4 and twin.calls == 8  # each rooted op becomes two calls
    curves = config.costs.curves

    def cost_ns(coll: str, nbytes: int) -> float:
        return curves[(coll, "float32", 2)].cost_us(np.array([nbytes]))[0][0] * 1000.0

    for i, (op, nbytes) in enumerate(zip(table["op"], table["bytes"], strict=True)):
        first, second = (
            ("scatter", "all_gather") if op == "broadcast" else ("reduce_scatter", "gather")
        )
        expected = cost_ns(first, int(nbytes)) + cost_ns(second, int(nbytes))
        assert twin.latency_ns[i] == int(np.rint(expected)), (op, nbytes)
    assert twin.metrics_us()["mean"] > 0


@pytest.mark.slow
def test_decomposed_twin_without_a_scatter_ladder_is_still_refused_by_name(
    ladders, tmp_path, capsys
):
    program = _rooted_program(tmp_path)
    out = tmp_path / "b.yaml"
    no_scatter = [p for c, p in ladders.items() if c != "scatter"]
    argv = ["calibrate-backends", *no_scatter, "--physical-configs", str(PHYSICAL_YAML)]
    argv += ["--config", "decomposed", "--backend", "gloo"]
    assert main([*argv, "-o", str(out)]) == 0
    with pytest.raises(InputError, match="scatter float32 on 2 ranks"):
        simulate_twin(op_table(program), load_backends(out).configs["decomposed"])
    refused = tmp_path / "b2.yaml"
    capsys.readouterr()
    assert main([*argv, "--program", str(program), "-o", str(refused)]) == 2
    err = capsys.readouterr().err
    assert "scatter float32 on 2 ranks" in err and "never filled" in err
    assert not refused.exists()


@pytest.mark.slow
def test_a_corrupted_gather_contribution_fails_the_sweep(tmp_path, capsys):
    out = tmp_path / "bad"
    argv = ["sweep", "--collective", "gather", "--min-bytes", "64", "--max-bytes", "256"]
    argv += ["--factor", "4", "--warmup", "1", "--iters", "2", "--backend", "gloo"]
    argv += ["--nproc", "2", "--fault", "corrupt-rank=1", "--quiet", "-o", str(out)]
    assert main(argv) == 1
    attempt = json.loads((out / "attempt.json").read_text())
    assert attempt["status"] == "failed" and "correctness" in attempt["reason"]
