"""Shared fixtures: small native traces built in code, the CLI run in-process."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tracecanary.canonical import write_json
from tracecanary.cli import main
from tracecanary.synth.decode import DecodeSpec, build_decode
from tracecanary.trace_io import write_trace

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def pytest_collection_modifyitems(config, items):
    """Files holding slow tests (end to end, multi-process) run first, in collection order
    otherwise: pytest-xdist (``-n 2 --dist loadfile`` in pyproject's addopts) hands whole
    files to its workers in this order, so the long runs start early and the quick unit
    tests fill the end instead of one worker finishing a campaign alone."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: order kept within


@pytest.fixture(autouse=True, scope="session")
def schema_subset_checked_against_jsonschema():
    """Every document validated in this test process is judged by jsonschema too, and a
    subset verdict that disagrees fails the test that validated it (the subset accepts
    documents without jsonschema in production: formats/schema_subset.py)."""
    from tracecanary.formats import schemas
    from tracecanary.formats.schema_subset import SubsetValidator

    class Checked(SubsetValidator):
        def decide(self, instance, schema):
            verdict = super().decide(instance, schema)
            if verdict is not None:
                judge = schemas.jsonschema_validator(schema)
                assert verdict == judge.is_valid(instance), (
                    f"schema_subset says {verdict}, jsonschema disagrees: "
                    f"{json.dumps(instance, default=repr)[:500]}"
                )
            return verdict

    original = schemas._SUBSET
    schemas._SUBSET = Checked(schemas.schema_by_id)
    yield
    schemas._SUBSET = original


def small_trace(n_steps: int = 3, *, with_gap: bool = False) -> dict:
    """A 2-rank trace with one shared clock: all_reduce + broadcast + send/recv per step."""
    events = []
    for rank in (0, 1):
        seq = 0
        t = 1_000 + rank * 50
        for step in range(n_steps):
            for op, extra in (
                ("all_reduce", {}),
                ("broadcast", {"root": 0}),
                ("send" if rank == 0 else "recv", {"peer": 1 - rank}),
            ):
                event = {
                    "rank": rank,
                    "seq": seq,
                    "op": op,
                    "bytes": 4096,
                    "dtype": "float32",
                    "group": "world",
                    "phase": "decode",
                    "ts_ns": t,
                    "overlap_ns": 100 * step,
                    **extra,
                }
                if with_gap and seq > 0:
                    event["gap_ns"] = 10_000
                events.append(event)
                seq += 1
                t += 10_000
    return {
        "format": "tracecanary.trace/v1",
        "meta": {
            "world_size": 2,
            "source": "tests/conftest.py small_trace",
            "clock_domains": [{"id": "host0", "ranks": [0, 1], "host": "host0"}],
            "notes": [],
        },
        "groups": [{"id": "world", "ranks": [0, 1]}],
        "events": events,
    }


def write_doc(doc: dict, path: Path, *, jsonl: bool = False) -> Path:
    if jsonl:
        header = {k: v for k, v in doc.items() if k != "events"}
        lines = [json.dumps(header)] + [json.dumps(e) for e in doc["events"]]
        path.write_text("\n".join(lines) + "\n")
    else:
        path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def trace_doc() -> dict:
    return copy.deepcopy(small_trace())


@pytest.fixture
def run_cli(capsys):
    """Run the CLI in-process; return (exit code, stdout, stderr)."""

    def _run(*argv: str) -> tuple[int, str, str]:
        code = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return code, out, err

    return _run


@pytest.fixture
def single_rank_world(tmp_path):
    """torch.distributed initialized in this process: gloo, one rank (destroyed after)."""
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1
    )
    yield dist
    dist.destroy_process_group()


def make_tiny_campaign(
    workdir,
    events_per_rank: int = 300,
    *,
    with_alphabeta: bool = True,
    spec: DecodeSpec | None = None,
):
    """A decode capture set (4 ranks, ``events_per_rank`` each, unless ``spec`` says
    otherwise) + calibration + config/tiny.yaml under ``workdir`` (compile, verify,
    search, replay, compare, summary; one real nccl-tests ladder for alpha/beta plots when
    ../shared is present)."""
    docs, calibration = build_decode(spec or DecodeSpec(events_per_rank=events_per_rank))
    captures = []
    for rank, doc in enumerate(docs):
        path = workdir / "resources" / f"rank{rank}.jsonl.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_trace(doc, path)
        captures.append(f"resources/rank{rank}.jsonl.gz")
    write_json(workdir / "resources" / "calibration.json", calibration)
    config = {
        "campaign": "tiny",
        "sources": [
            {
                "id": "decode",
                "kind": "captures",
                "captures": captures,
                "calibration": "resources/calibration.json",
            }
        ],
        "backends": "config/backends.yaml",
        "tolerances": "config/tolerances.yaml",
        "compile": {"budgets": ["8us"]},
        "search": {"budgets": "0,8,64"},
    }
    sample = SHARED / "nccltests_samples" / "polaris_a100_8rank_all_reduce.txt"
    if with_alphabeta and sample.exists():
        (workdir / "resources" / "nccltests.txt").write_bytes(sample.read_bytes())
        config["alphabeta"] = {
            "external": [{"id": "polaris_all_reduce", "path": "resources/nccltests.txt"}]
        }
    (workdir / "config").mkdir()
    for name in ("backends.yaml", "tolerances.yaml"):
        (workdir / "config" / name).write_bytes((REPO / "config" / name).read_bytes())
    (workdir / "config" / "tiny.yaml").write_text(yaml.safe_dump(config))


SNAKEMAKE_CORES = 2
"""Cores a test's Snakemake run may use: the README's ``snakemake --cores 2`` and the CI
machine's two cores. Independent jobs run side by side; the rules that launch ranks (sweep,
replay_physical, replay_dispatch, replay_param) claim every core, so they still run alone.
A test passing ``--cores`` itself overrides this (the last one given counts)."""


def make_physical_campaign(workdir: Path, *, configs: list[str], repetitions: int) -> None:
    """The tiny campaign's decode captures sized for replay on CPUs (resources/decode-small's
    shape: 2 layers, hidden 1024, 512-token prompt), one request of ~200 collectives per
    rank on 2 ranks (2 hosts, one per CPU core: every launch starts 2 workers), with a
    physical section of ``configs`` x ``repetitions`` and three short ladders."""
    spec = DecodeSpec(events_per_rank=200, layers=2, hidden=1024, requests=1, prompt_tokens=512,
                      tail_windows=1, ranks=2, ranks_per_host=1)  # fmt: skip
    make_tiny_campaign(workdir, with_alphabeta=False, spec=spec)
    config_file = workdir / "config" / "tiny.yaml"
    config = yaml.safe_load(config_file.read_text())
    ladder = {"factor": 4, "warmup": 1, "iters": 2, "cycles": 3}
    config["physical"] = {
        "sources": ["decode"], "configs": configs, "nproc": spec.ranks,
        "repetitions": repetitions, "warmup": 0, "iters": 1, "timeout": 300,
        "sweeps": [
            {"id": "ar", "collective": "all_reduce", "dtype": "bfloat16", "min_bytes": "1K",
             "max_bytes": "1M", **ladder},
            {"id": "ag", "collective": "all_gather", "dtype": "bfloat16", "min_bytes": "1K",
             "max_bytes": "4M", **ladder},
            {"id": "bc", "collective": "broadcast", "dtype": "int64", "min_bytes": "8",
             "max_bytes": "1K", **ladder},
        ],
    }  # fmt: skip
    config_file.write_text(yaml.safe_dump(config))
    (workdir / "config" / "physical.yaml").write_bytes(
        (REPO / "config" / "physical.yaml").read_bytes()
    )


def run_snakemake(workdir, *extra, configfile="config/tiny.yaml", quiet: bool = True):
    """A real Snakemake run of the project workflow in ``workdir`` (SNAKEMAKE_CORES);
    ``quiet=False``: everything Snakemake prints, as the README's command shows it."""
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        configfile,
        # before an option: Snakemake 9's --quiet takes optional values
        *(["--quiet"] if quiet else []),
        "--cores",
        str(SNAKEMAKE_CORES),
        *extra,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=workdir)


def built_once_per_run(tmp_path_factory, name: str, build) -> Path:
    """The directory ``name`` that ``build(directory)`` fills, built once for the whole
    test run: under pytest-xdist by the first worker to ask (the others wait on its lock,
    then read it), a build that failed part way is started afresh by the next asker."""
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's base folder, shared by its workers
    target = root / name
    with FileLock(str(target) + ".lock"):
        built = root / f"{name}.built"
        if not built.exists():
            if target.exists():
                shutil.rmtree(target)  # this fixture's own unfinished build
            target.mkdir()
            build(target)
            built.touch()
    return target


@pytest.fixture(scope="session")
def tiny_campaign(tmp_path_factory):
    """One real run of the tiny campaign, shared by the tests that only read it."""

    def build(workdir: Path) -> None:
        make_tiny_campaign(workdir)
        run = run_snakemake(workdir)
        assert run.returncode == 0, run.stderr[-3000:]

    return built_once_per_run(tmp_path_factory, "tiny-campaign", build)


GLOO_LADDER_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")


@pytest.fixture(scope="session")
def gloo_float32_ladders(tmp_path_factory) -> dict[str, str]:
    """Real gloo float32 ladders at 2 ranks, 256 B-4 MiB, factor 4, 3 cycles, one per
    collective in GLOO_LADDER_COLLECTIVES (real torch.distributed runs), swept once for
    every test that prices from them without changing them."""

    def build(root: Path) -> None:
        for coll in GLOO_LADDER_COLLECTIVES:
            sweep_gloo_ladder(root / coll, coll, "256", "4M", cycles=3)

    root = built_once_per_run(tmp_path_factory, "gloo-ladders", build)
    return {coll: str(root / coll) for coll in GLOO_LADDER_COLLECTIVES}


def sweep_gloo_ladder(
    out: Path, collective: str, min_bytes: str, max_bytes: str, cycles: int
) -> str:
    """A real gloo float32 ladder of ``collective`` at 2 ranks (factor 4, 1 warm-up and
    2 timed iterations per rung) written to ``out``; its path."""
    argv = ["sweep", "--collective", collective, "--min-bytes", min_bytes]
    argv += ["--max-bytes", max_bytes, "--factor", "4", "--warmup", "1", "--iters", "2"]
    argv += ["--cycles", str(cycles), "--backend", "gloo", "--nproc", "2", "--quiet"]
    assert main([*argv, "-o", str(out)]) == 0
    return str(out)
