"""Exports replayed in the real upstream PARAM replayer (../shared/param_upstream, commit
1e115ff, MIT; see its SOURCE.md), 4 gloo ranks on CPU under torchrun.

PARAM is third-party code: it is read from ../shared and put on PYTHONPATH by
``replay-param --param PATH`` (a link in a temporary directory), never copied here; the
tests that run it skip, saying why, where ../shared/param_upstream is absent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import SHARED, write_doc

from tracecanary.formats.schemas import validate
from tracecanary.param import compat
from tracecanary.param.target import compatibility_table_markdown

PARAM = SHARED / "param_upstream"
needs_param = pytest.mark.skipif(
    not (PARAM / "train/comms/pt/commsTraceReplay.py").is_file(),
    reason=f"upstream PARAM snapshot absent ({PARAM}); see ../shared/param_upstream/SOURCE.md",
)
REPO = Path(__file__).resolve().parents[1]
SUB = [2, 3]  # a subgroup without rank 0


def _trace(steps: int = 2, *, refused: str | None = None) -> dict:
    """4 ranks, one clock: every op kind the exporter emits, several dtypes, a broadcast
    with a non-zero root on a subgroup, a reduce on a subgroup, a world barrier, and a
    send/recv that only ranks 1 and 2 issue. ``refused`` adds one op upstream would
    mis-execute: ``reduce-root`` (root 1 of the world group) or ``barrier-after-subgroup``
    (a world barrier right after a subgroup op on ranks 2 and 3)."""
    events = []
    seq = {r: 0 for r in range(4)}
    clock = [1000]  # one step per op, all its ranks together: issue order = the order below

    def add(ranks, **e):
        for r in ranks:
            events.append({"rank": r, "seq": seq[r], "ts_ns": clock[0], "phase": "decode", **e})
            seq[r] += 1
        clock[0] += 5000

    world = range(4)
    for _ in range(steps):
        add(world, op="all_reduce", bytes=4096, dtype="float32", group="world")
        add(world, op="all_gather", bytes=1024, dtype="bfloat16", group="world")
        add(world, op="reduce_scatter", bytes=2048, dtype="float16", group="world")
        add(world, op="all_to_all", bytes=512, dtype="int32", group="world")
        add(SUB, op="broadcast", bytes=64, dtype="int64", group="sub", root=3)
        add(SUB, op="reduce", bytes=256, dtype="float64", group="sub", root=2)
        if refused == "barrier-after-subgroup":
            add(world, op="barrier", bytes=0, dtype="float32", group="world")
        add(world, op="reduce", bytes=128, dtype="int32", group="world", root=0)
        add(world, op="barrier", bytes=0, dtype="float32", group="world")
        add(world, op="all_gather", bytes=256, dtype="uint8", group="world")
        add([1], op="send", bytes=128, dtype="float32", group="world", peer=2)
        add([2], op="recv", bytes=128, dtype="float32", group="world", peer=1)
        add(world, op="all_reduce", bytes=64, dtype="int8", group="world")
        if refused == "reduce-root":
            add(world, op="reduce", bytes=64, dtype="float32", group="world", root=1)
    events.sort(key=lambda e: (e["rank"], e["seq"]))
    return {
        "format": "tracecanary.trace/v1",
        "meta": {
            "world_size": 4,
            "source": "test",
            "clock_domains": [{"id": "h", "ranks": [0, 1, 2, 3]}],
        },
        "groups": [{"id": "world", "ranks": [0, 1, 2, 3]}, {"id": "sub", "ranks": SUB}],
        "events": events,
    }


def _export(tmp_path, run_cli, doc, name, *extra):
    src = write_doc(doc, tmp_path / f"{name}.json")
    out = tmp_path / name
    code, _, err = run_cli("export-param", src, "-o", out, *extra)
    return code, err, out


def test_upstream_target_puts_each_send_recv_pair_on_its_own_two_rank_group(tmp_path, run_cli):
    code, err, out = _export(tmp_path, run_cli, _trace(), "up", "--target", "param-1e115ff")
    assert code == 0, err
    summary = json.loads((out / "export.json").read_text())
    assert summary["target"] == "param-1e115ff"
    pair = [g for g in summary["process_groups"] if g["global_ranks"] == [1, 2]]
    assert len(pair) == 1 and pair[0]["group"] == "pair:1,2"
    for rank in range(4):
        entries = json.loads((out / f"{rank}.json").read_text())
        inits = [e for e in entries if e["comms"] == "init"]
        assert [i["global_ranks"] for i in inits] == [[0, 1, 2, 3], SUB, [1, 2]]
        p2p = [e for e in entries if e["comms"] in ("send", "recv")]
        assert len(p2p) == (4 if rank in (1, 2) else 0)  # send + recv entry per step
        assert all(e["pg_id"] == pair[0]["pg_id"] and e["world_size"] == 2 for e in p2p)


def test_default_target_export_is_unchanged_by_the_upstream_target(tmp_path, run_cli):
    code, err, out = _export(tmp_path, run_cli, _trace(), "plain")
    assert code == 0, err
    summary = json.loads((out / "export.json").read_text())
    assert "target" not in summary
    entries = json.loads((out / "1.json").read_text())
    send = next(e for e in entries if e["comms"] == "send")
    assert "pg_id" not in send and send["world_size"] == 4
    assert [e["global_ranks"] for e in entries if e["comms"] == "init"] == [[0, 1, 2, 3], SUB]


@pytest.mark.parametrize(
    ("refused", "needle", "field"),
    [
        ("reduce-root", "reduce to root 1: upstream PARAM 1e115ff ignores a reduce's root", "root"),
        (
            "barrier-after-subgroup",
            "barrier on ranks [0, 1, 2, 3] after an op on ranks [2, 3]",
            "group",
        ),
    ],
)
def test_upstream_target_refuses_what_upstream_would_mis_execute_naming_op_and_why(
    tmp_path, run_cli, refused, needle, field
):
    code, err, out = _export(
        tmp_path, run_cli, _trace(refused=refused), "bad", "--target", "param-1e115ff"
    )
    assert code == 2
    assert needle in err and f"field {field}" in err and "occurrence" in err
    assert not out.exists()
    # our replayer's target accepts the same program
    code, err, _ = _export(tmp_path, run_cli, _trace(refused=refused), "ours")
    assert code == 0, err


def test_skip_unsupported_lists_each_upstream_refusal_with_its_reason(tmp_path, run_cli):
    code, err, out = _export(
        tmp_path,
        run_cli,
        _trace(refused="reduce-root"),
        "skip",
        "--target",
        "param-1e115ff",
        "--skip-unsupported",
    )
    assert code == 0, err
    skipped = json.loads((out / "export.json").read_text())["skipped"]
    assert len(skipped) == 2 and {s["op"] for s in skipped} == {"reduce"}
    assert all("ignores a reduce's root" in s["reason"] for s in skipped)


def test_replay_param_refuses_an_export_for_our_replayer_before_launching(tmp_path, run_cli):
    code, err, out = _export(tmp_path, run_cli, _trace(), "plain")
    assert code == 0, err
    attempt = tmp_path / "attempt"
    code, _, err = run_cli("replay-param", out, "--param", PARAM, "--nproc", "4", "-o", attempt)
    assert code == 2
    assert "field pg_id" in err and "send 1->2 on ranks [0, 1, 2, 3]" in err
    assert "--target param-1e115ff" in err
    assert not attempt.exists()


def test_replay_param_refuses_a_directory_that_is_not_param(tmp_path, run_cli):
    code, err, out = _export(tmp_path, run_cli, _trace(), "up", "--target", "param-1e115ff")
    assert code == 0, err
    code, _, err = run_cli(
        "replay-param", out, "--param", tmp_path, "--nproc", "4", "-o", tmp_path / "a"
    )
    assert code == 2 and "not a PARAM checkout" in err and "field --param" in err
    assert not (tmp_path / "a").exists()


def test_replay_param_refuses_a_module_that_does_not_import(tmp_path, run_cli):
    code, err, out = _export(tmp_path, run_cli, _trace(), "up", "--target", "param-1e115ff")
    assert code == 0, err
    code, _, err = run_cli(
        "replay-param", out, "--param", "no_such_param_pkg", "--nproc", "4", "-o", tmp_path / "a"
    )
    assert code == 2 and "cannot import PARAM's replayer no_such_param_pkg" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["up", "up.json"]


def test_docs_compatibility_table_is_the_one_the_code_applies():
    text = (REPO / "docs" / "physical.md").read_text(encoding="utf-8")
    assert compatibility_table_markdown() in text


@needs_param
def test_every_patch_applies_to_the_shared_upstream_snapshot(tmp_path):
    import subprocess
    import sys

    link = tmp_path / "param_bench"
    link.symlink_to(PARAM, target_is_directory=True)
    code = (
        "import importlib, json;"
        "from tracecanary.param import compat;"
        "m = importlib.import_module('param_bench.train.comms.pt.commsTraceReplay');"
        "print(json.dumps(compat.check(m)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        timeout=120,
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == []
    assert [p["id"] for p in compat.records()] == ["use-device-time", "rooted-src", "reduce-root"]


@pytest.mark.slow
@needs_param
def test_upstream_param_replays_every_op_kind_on_every_rank(tmp_path, run_cli):
    doc = _trace()
    code, err, out = _export(tmp_path, run_cli, doc, "up", "--target", "param-1e115ff")
    assert code == 0, err
    attempt = tmp_path / "attempt"
    code, stdout, err = run_cli(
        "replay-param", out, "--param", PARAM, "--nproc", "4", "--iters", "2",
        "--timeout", "300", "-o", attempt,
    )  # fmt: skip
    assert code == 0, err
    doc_attempt = json.loads((attempt / "attempt.json").read_text())
    validate(doc_attempt, "attempt", file=str(attempt / "attempt.json"))
    environment = json.loads((attempt / "environment.json").read_text())
    validate(environment, "environment", file=str(attempt / "environment.json"))
    assert doc_attempt["source"] == "param" and doc_attempt["status"] == "complete"
    assert environment["param"]["commit"] == "1e115ffc62c6d048405d9b963191736c13811b1d"
    assert [p["id"] for p in environment["param"]["compatibility_patches"]] == [
        "use-device-time",
        "rooted-src",
        "reduce-root",
    ]
    assert all(r["param_patches"] == ["use-device-time", "rooted-src", "reduce-root"]
               for r in environment["ranks"])  # fmt: skip

    # every op an export entry gives a rank, replayed by PARAM on that rank in both passes
    rows = pq.read_table(attempt / "rows.parquet").to_pandas()
    for rank in range(4):
        entries = json.loads((out / f"{rank}.json").read_text())
        executes = [
            e for e in entries
            if e["comms"] != "init"
            and (e["comms"] not in ("send", "recv")
                 or rank == (e["src_rank"] if e["comms"] == "send" else e["dst_rank"]))
        ]  # fmt: skip
        mine = rows[rows["rank"] == rank]
        assert len(mine) == 2 * len(executes)
        expected = sorted(e["markers"][0] for e in executes)
        for iteration in (0, 1):
            got = mine[mine["iteration"] == iteration]
            assert sorted(got["marker"]) == expected
    kinds = set(rows["op"])
    assert kinds == {
        "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce",
        "barrier", "send", "recv",
    }  # fmt: skip
    assert set(rows["dtype"]) >= {"float32", "bfloat16", "float16", "int32", "int64", "float64"}


@pytest.mark.slow
@needs_param
def test_campaign_switch_replays_canary_and_full_in_upstream_beside_ours(tmp_path):
    """A real Snakemake run of the tiny campaign with physical.param_upstream on: the
    physical report holds both replayers side by side, barrier semantics stated."""
    import yaml
    from conftest import run_snakemake

    (tmp_path / "resources").mkdir()
    write_doc(_trace(steps=2), tmp_path / "resources" / "ops.json")
    (tmp_path / "config").mkdir()
    for name in ("backends.yaml", "tolerances.yaml", "physical.yaml"):
        (tmp_path / "config" / name).write_bytes((REPO / "config" / name).read_bytes())
    config = {
        "campaign": "tiny",
        "sources": [{"id": "ops", "kind": "trace", "path": "resources/ops.json"}],
        "backends": "config/backends.yaml",
        "tolerances": "config/tolerances.yaml",
        "compile": {"budgets": ["8us"]},
        "search": {"budgets": "0,8"},
        "physical": {
            "sources": ["ops"],
            "configs": ["native"],
            "repetitions": 1,
            "warmup": 0,
            "iters": 1,
            "timeout": 300,
            # this test replays PARAM; the simulator twin's ladders are not its subject
            "derive_sweeps": {"enabled": False},
            "param_upstream": {"enabled": True, "param": str(PARAM), "iters": 1},
        },
    }
    (tmp_path / "config" / "tiny.yaml").write_text(yaml.safe_dump(config))
    run = run_snakemake(tmp_path, "results/tiny/physical/ops.md")
    assert run.returncode == 0, run.stderr[-3000:]
    for program in ("canary", "full"):
        attempt = tmp_path / f"results/tiny/physical-param/ops/{program}/rep1/attempt.json"
        doc = json.loads(attempt.read_text())
        assert doc["source"] == "param" and doc["status"] == "complete"
    report = json.loads((tmp_path / "results/tiny/physical/ops.json").read_text())
    assert set(report["replayers"]["columns"]) == {"native", "upstream-param"}
    markdown = (tmp_path / "results/tiny/physical/ops.md").read_text()
    assert "## Both replayers: our replayer and upstream PARAM" in markdown
    assert "Barrier semantics differ" in markdown
    prov = tmp_path / "results/tiny/provenance/replay_param/ops/rep1.json"
    assert json.loads(prov.read_text())["predicate"]["deterministic"] is False


@pytest.mark.slow
def test_our_replayer_replays_the_upstream_target_export_too(tmp_path, run_cli):
    """The same files serve both replayers: the pair groups of the transformed send/recv
    are ordinary process groups for replay-physical."""
    code, err, out = _export(tmp_path, run_cli, _trace(), "up", "--target", "param-1e115ff")
    assert code == 0, err
    attempt = tmp_path / "ours"
    code, _, err = run_cli(
        "replay-physical", out, "--nproc", "4", "--warmup", "0", "--iters", "1",
        "--timeout", "300", "-o", attempt,
    )  # fmt: skip
    assert code == 0, err
    rows = pq.read_table(attempt / "rows.parquet").to_pandas()
    assert rows["correct"].all()
    assert set(rows["op"]) >= {"send", "recv", "reduce", "barrier", "broadcast"}


@pytest.mark.slow
@needs_param
def test_upstream_run_past_its_timeout_is_killed_and_archived_as_failed(tmp_path, run_cli):
    code, err, out = _export(tmp_path, run_cli, _trace(), "up", "--target", "param-1e115ff")
    assert code == 0, err
    attempt = tmp_path / "attempt"
    code, _, err = run_cli(
        "replay-param", out, "--param", PARAM, "--nproc", "4", "--timeout", "2", "-o", attempt
    )
    assert code == 1 and "timeout after 2 s" in err
    doc = json.loads((attempt / "attempt.json").read_text())
    assert doc["status"] == "failed" and doc["source"] == "param"
    assert (attempt / "launch.log").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["attempt", "up", "up.json"]
