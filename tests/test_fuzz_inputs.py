"""Untrusted input: every reader under the resource policy (``tracecanary.limits``).

A hypothesis-driven fuzz test mutates a small valid seed of every input format (native
trace JSON and JSON Lines .gz, per-rank captures + calibration, Kineto, canary, replay
report, nccl-tests stdout and JSON, NCCL TUNING log, PARAM results, PARAM program
directory, manifest) with byte flips, truncation, field deletion and duplication, type
swaps, huge numbers and deep nesting, runs the CLI command that reads it in-process,
and asserts: no uncaught exception, exit code 0, 1 or 2 (2 with one ``error:`` line),
no partial output (an output exists only after exit 0/1, and then it is complete and
valid against its schema) and no temporary file left behind.

Explicit tests pin the refusals the policy promises, each exit 2 in bounded time and
memory: a gzip bomb, a canary whose motif weights expand to 10^12 occurrences,
100,000-deep JSON, and absurd declared sizes.

``TRACECANARY_FUZZ=deep`` runs ten times the examples with a fresh random seed (the
default profile is derandomized, so CI runs the same cases every time).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import dataclasses
import gzip
import io
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tracecanary.canonical import sha256_file, write_json
from tracecanary.cli import main
from tracecanary.formats.schemas import validate
from tracecanary.limits import Limits
from tracecanary.physical.samples import sample_program, write_program

# every test runs the CLI end to end on each fuzzed input (conftest runs slow files first)
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
BACKENDS = REPO / "config" / "backends.yaml"
YAML_SEEDS = ("backends.yaml", "tolerances.yaml", "physical.yaml", "config.yaml")
DEEP = os.environ.get("TRACECANARY_FUZZ") == "deep"
SCALE = 10 if DEEP else 1
EXAMPLE_SECONDS = 20  # one CLI run on a seed-sized input; far more means a hang
EXAMPLE_MEMORY_BYTES = 3 << 30  # address space an example may add before MemoryError


def fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=examples * SCALE,
        deadline=None,
        derandomize=not DEEP,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# --------------------------------------------------------------------------- seeds


def native_trace(steps: int = 4) -> dict:
    """Two ranks on one clock: all_reduce, broadcast and send/recv per step."""
    events = []
    for rank in (0, 1):
        t = 1_000 + 50 * rank
        seq = 0
        for step in range(steps):
            for op, extra in (
                ("all_reduce", {}),
                ("broadcast", {"root": 0}),
                ("send" if rank == 0 else "recv", {"peer": 1 - rank}),
            ):
                events.append(
                    {
                        "rank": rank,
                        "seq": seq,
                        "op": op,
                        "bytes": 4096,
                        "dtype": "float32",
                        "group": "world",
                        "phase": "decode",
                        "ts_ns": t,
                        "overlap_ns": 100 * step,
                        "latency_ns": 2_000 + 10 * step,
                        **extra,
                    }
                )
                seq += 1
                t += 10_000
    return {
        "format": "tracecanary.trace/v1",
        "meta": {
            "world_size": 2,
            "source": "tests/test_fuzz_inputs.py",
            "clock_domains": [{"id": "host0", "ranks": [0, 1], "host": "host0"}],
            "notes": [],
        },
        "groups": [
            {"id": "world", "ranks": [0, 1]},
            {"id": "pair", "start": 0, "stride": 1, "size": 2},
        ],
        "events": events,
    }


def capture_of(doc: dict, rank: int) -> dict:
    """One rank's capture of ``doc`` on its own host clock."""
    out = copy.deepcopy(doc)
    out["meta"]["clock_domains"] = [{"id": f"host{rank}", "ranks": [rank], "host": f"host{rank}"}]
    out["events"] = [e for e in out["events"] if e["rank"] == rank]
    return out


CALIBRATION = {
    "format": "tracecanary.calibration/v1",
    "reference": "host0",
    "method": "synthetic",
    "clocks": [
        {"clock": "host0", "offset_ns": 0, "drift_ppb": 0, "uncertainty_ns": 0},
        {
            "clock": "host1",
            "offset_ns": -50,
            "drift_ppb": 1.5,
            "anchor_ns": 0,
            "uncertainty_ns": 20,
        },
    ],
}


def kineto_seed() -> dict:
    """A rank-0 PyTorch profiler trace: two NCCL all_reduces with metadata and kernels."""
    events = []
    for k, ts in enumerate((1000.0, 2000.5)):
        ext = 10 + 10 * k
        events += [
            {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 100,
             "ts": ts, "dur": 50.0, "args": {"External id": ext - 1}},
            {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 100,
             "ts": ts + 5.125, "dur": 40.0,
             "args": {"External id": ext, "Collective name": "allreduce", "dtype": "Float",
                      "In msg nelems": 1024, "Out msg nelems": 1024, "In split size": "[]",
                      "Out split size": "[]", "Process Group Name": "0",
                      "Process Group Ranks": "[0, 1]", "Group size": 2}},
            {"ph": "X", "cat": "user_annotation", "name": "nccl:allreduce", "pid": 1,
             "tid": 100, "ts": ts + 10.0, "dur": 20.0, "args": {"External id": ext + 1}},
            {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)",
             "pid": 0, "tid": 7, "ts": ts + 100.0, "dur": 12.345,
             "args": {"External id": ext, "device": 0, "stream": 7}},
        ]  # fmt: skip
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2},
        "baseTimeNanoseconds": 1_790_857_026_000_000_000,
        "traceEvents": events,
    }


NCCL_SIZES = [1 << k for k in range(10, 16)]
NCCL_RANKS = 8


def _nccl_time_us(size: int) -> float:
    return round(20.0 + size / 1e5, 2)


def nccltests_stdout() -> str:
    """An nccl-tests all_reduce_perf run (2.17 layout) of 6 sizes on 8 ranks."""
    lines = [
        "# nccl-tests version 2.17.6 nccl-headers=22703 nccl-library=22703",
        "# Collective test starting: all_reduce_perf",
        f"# nThread 1 nGpus 1 minBytes {NCCL_SIZES[0]} maxBytes {NCCL_SIZES[-1]} step: 2(factor) "
        "warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    lines += [
        f"#  Rank {r:2d} Group  0 Pid {1000 + r:6d} on host0 device {r:2d} [0x{r:02x}] NVIDIA H100"
        for r in range(NCCL_RANKS)
    ]
    lines += [
        "#",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
        "            (us)  (GB/s)  (GB/s)",
    ]
    factor = 2 * (NCCL_RANKS - 1) / NCCL_RANKS
    for size in NCCL_SIZES:
        t = _nccl_time_us(size)
        alg = size / 1e3 / t
        cols = f"{t:7.2f}  {alg:6.2f}  {alg * factor:6.2f}       0"
        lines.append(f"{size:12d}  {size // 4:12d}     float     sum      -1  {cols}  {cols}")
    lines += [
        "# Out of bounds values : 0 OK",
        "# Avg bus bandwidth    : 0.1 ",
        "#",
        "# Collective test concluded: all_reduce_perf",
        "",
    ]
    return "\n".join(lines)


def nccltests_json() -> dict:
    """The same run as an nccl-tests ``-J`` report (version 3)."""
    results = []
    for size in NCCL_SIZES:
        t = _nccl_time_us(size)
        alg = size / 1e3 / t
        body = {"time": t, "alg_bw": round(alg, 6), "bus_bw": round(alg * 1.75, 6), "nwrong": 0.0}
        results.append(
            {"size": size, "count": size // 4, "type": "float", "redop": "sum", "root": "-1",
             "out_of_place": body, "in_place": dict(body)}
        )  # fmt: skip
    return {
        "version": 3,
        "args": ["./build/all_reduce_perf", "-b", "1K", "-e", "32K", "-f", "2"],
        "config": {
            "nthreads": 1,
            "ngpus": 1,
            "minimum_bytes": NCCL_SIZES[0],
            "maximum_bytes": NCCL_SIZES[-1],
            "step_factor": 2,
            "devices": [{"rank": r} for r in range(NCCL_RANKS)],
        },
        "results": results,
        "average_bus_bandwidth": {"bandwidth": 0.1},
        "out_of_bounds": {"count": 0},
    }


def tuning_log() -> str:
    prefix = "node-a:41234:41301 [0] NCCL INFO "
    lines = [
        "node-a:41234:41234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
        f"node-a:41234:41234 [0] NCCL INFO comm 0x55d0 rank 0 nranks {NCCL_RANKS} cudaDev 0 "
        "nvmlDev 0 busId 7000 commId 0x9a - Init COMPLETE",
    ]
    for size in NCCL_SIZES:
        lines.append(prefix + f"AllReduce: {size} Bytes -> Algo 1 proto 2 time {19 + size / 1e5:f}")
    lines.append(prefix + "AllGather: 4096 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}")
    return "\n".join(lines) + "\n"


def param_rows(program: Path, rank: int, passes: int = 2) -> list[dict]:
    """What PARAM's commsTraceReplay writes for ``rank`` after replaying ``program``."""
    from tracecanary.param.program import load_program_dir

    entries = json.loads((program / f"{rank}.json").read_text())
    executed = load_program_dir(program)[rank].executed()
    rows = []
    for p in range(passes):
        for k, index in enumerate(executed["entry"]):
            e = entries[index]
            row = {key: e[key] for key in ("comms", "world_size", "pg_id") if key in e}
            if e["comms"] != "barrier":
                row.update(in_msg_size=e["in_msg_size"], out_msg_size=e["out_msg_size"])
                row.update(dtype=e["dtype"], dtype_size=4)
            for key in ("root", "in_split", "out_split", "startTime_ns"):
                if key in e:
                    row[key] = e[key]
            row.update(
                marker_stack=" ".join(e["markers"]),
                latency_us=100.0 + 10 * k + p,
                global_latency_us=150.0 + 10 * k + p,
            )
            rows.append(row)
    return rows


def run_quiet(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


FZ_CONFIG = {
    "campaign": "fz",
    "sources": [{"id": "fz", "kind": "trace", "path": "resources/input.txt"}],
}


def build_manifest_campaign(root: Path) -> Path:
    """A tiny campaign directory: config, one evidence input, one derived artifact with
    its in-toto provenance record and store copy, bound by results/fz/manifest.json."""
    from tracecanary.campaign.manifest import build_manifest

    (root / "config").mkdir(parents=True)
    (root / "config" / "fz.yaml").write_text(yaml.safe_dump(FZ_CONFIG))
    (root / "resources").mkdir()
    (root / "resources" / "input.txt").write_text("evidence\n")
    derived = root / "results" / "fz" / "derived.json"
    derived.parent.mkdir(parents=True)
    write_json(derived, {"value": 1})
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "results/fz/derived.json", "digest": {"sha256": sha256_file(derived)}}],
        "predicateType": "https://tracecanary.dev/provenance/v1",
        "predicate": {
            "rule": "derive",
            "wildcards": {"campaign": "fz"},
            "deterministic": True,
            "inputs": [
                {"path": "resources/input.txt", "digest": {"sha256": sha256_file(root / "resources" / "input.txt")}}
            ],
        },
    }  # fmt: skip
    prov = root / "results" / "fz" / "provenance" / "derived.json"
    prov.parent.mkdir(parents=True)
    write_json(prov, statement)
    digest = sha256_file(derived)
    store = root / "results" / "cas" / "sha256" / digest[:2] / digest[2:]
    store.parent.mkdir(parents=True)
    shutil.copyfile(derived, store)
    with contextlib.chdir(root):
        manifest = build_manifest(
            campaign="fz",
            config=FZ_CONFIG,
            config_files=["config/fz.yaml"],
            provenance_paths=["results/fz/provenance/derived.json"],
        )
    path = root / "results" / "fz" / "manifest.json"
    write_json(path, manifest)
    return path


@dataclasses.dataclass(frozen=True)
class Seeds:
    root: Path

    def __truediv__(self, name: str) -> Path:
        return self.root / name


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> Seeds:
    root = tmp_path_factory.mktemp("fuzz-seeds")
    trace = native_trace()
    (root / "trace.json").write_text(json.dumps(trace))
    header = {k: v for k, v in trace.items() if k != "events"}
    lines = [json.dumps(header)] + [json.dumps(e) for e in trace["events"]]
    (root / "trace.jsonl.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    for rank in (0, 1):
        (root / f"rank{rank}.json").write_text(json.dumps(capture_of(trace, rank)))
    (root / "calibration.json").write_text(json.dumps(CALIBRATION))
    for argv in (
        ["compile", root / "trace.json", "--lossless", "-o", root / "canary.json"],
        ["compile", root / "trace.json", "--budget", "gap=5us,latency=1us", "--max-executed-repeats", "1",
         "-o", root / "canary-reduced.json"],
        ["replay", root / "trace.json", "--backends", BACKENDS, "-o", root / "report.json"],
        ["export-param", root / "canary.json", "-o", root / "program"],
    ):  # fmt: skip
        code, _, err = run_quiet(argv)
        assert code == 0, err
    kineto = json.dumps(kineto_seed()).encode()
    (root / "kineto.json").write_bytes(kineto)
    (root / "kineto.json.gz").write_bytes(gzip.compress(kineto))
    (root / "nccl.txt").write_text(nccltests_stdout())
    (root / "nccl.json").write_text(json.dumps(nccltests_json()))
    (root / "tuning.log").write_text(tuning_log())
    program = write_program(root / "param-program", sample_program(2, small_ops=2))
    (root / "param-results").mkdir()
    for rank in (0, 1):
        rows = param_rows(program, rank)
        (root / "param-results" / f"replayedCommsPerf.rank{rank}.json").write_text(json.dumps(rows))
    for name in YAML_SEEDS:
        shutil.copyfile(REPO / "config" / name, root / name)
    manifest = build_manifest_campaign(root / "campaign")
    code, _, err = run_quiet(["manifest", "pack", manifest, "-o", root / "campaign.tar.gz"])
    assert code == 0, err
    return Seeds(root)


# --------------------------------------------------------------------------- mutations

HUGE_INTS = [
    2**31, 2**32, 2**53 + 1, 2**62, 2**63 - 1, 2**63, 2**64, 10**9, 10**12, 10**18, 10**30,
    -1, -(2**31), -(2**63), -(2**64),
]  # fmt: skip
SPECIAL_STRINGS = [
    "",
    "x",
    "nan",
    "-1",
    "1e999",
    "/dev/zero",
    "../../outside",
    "\u00e9\u0000",
    "a" * 5000,
]
SCALARS = st.one_of(
    st.sampled_from([None, True, False, 0, 1, -1, 0.5, -0.0, 1e308, -1e308, 5e-324, [], {}]),
    st.sampled_from(HUGE_INTS),
    st.sampled_from(SPECIAL_STRINGS),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
# raw JSON text spliced in place of a marker string after serialization
RAW = {
    "@@NAN@@": "NaN",
    "@@INF@@": "-Infinity",
    "@@DEEP65@@": "[" * 65 + "]" * 65,
    "@@DEEP1000@@": '{"a":' * 1000 + "1" + "}" * 1000,
    "@@DEEP100000@@": "[" * 100_000 + "]" * 100_000,
    "@@BIGNUM@@": "9" * 5000,
}


def _paths(doc) -> list[tuple]:
    out = []
    stack = [((), doc)]
    while stack:
        path, node = stack.pop()
        out.append(path)
        if isinstance(node, dict):
            stack.extend((path + (k,), v) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((path + (i,), v) for i, v in enumerate(node))
    out.sort(key=lambda p: [str(x) for x in p])
    return out


def _get(doc, path):
    for key in path:
        doc = doc[key]
    return doc


def _tweak_number(value, factor: int):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return [value + 1, value - 1, -value, value * 1_000_003, value * 2**40, value**3][
            factor % 6
        ]
    if isinstance(value, float):
        return [value * 1e300, -value, value + 0.5, value / 3][factor % 4]
    return value


def mutate_tree(data, doc):
    """Apply 1-3 structural mutations to a parsed JSON document (in place where possible)."""
    for _ in range(data.draw(st.integers(1, 3), label="n_mutations")):
        paths = _paths(doc)
        path = paths[data.draw(st.integers(0, len(paths) - 1), label="path")]
        kind = data.draw(
            st.sampled_from(
                ["delete", "duplicate", "replace", "tweak", "wrap", "raw", "rename", "empty"]
            ),
            label="kind",
        )
        if not path:
            if kind in ("replace", "raw"):
                doc = (
                    data.draw(SCALARS)
                    if kind == "replace"
                    else data.draw(st.sampled_from(sorted(RAW)))
                )
            continue
        parent = _get(doc, path[:-1])
        key = path[-1]
        value = parent[key]
        if kind == "delete":
            del parent[key]
        elif kind == "duplicate":
            if isinstance(parent, list):
                parent.insert(key, copy.deepcopy(value))
            else:
                siblings = [k for k in parent if k != key]
                if siblings:
                    parent[data.draw(st.sampled_from(siblings))] = copy.deepcopy(value)
        elif kind == "replace":
            parent[key] = data.draw(SCALARS, label="value")
        elif kind == "tweak":
            parent[key] = _tweak_number(value, data.draw(st.integers(0, 5)))
        elif kind == "wrap":
            parent[key] = [value] if data.draw(st.booleans()) else {"v": value}
        elif kind == "raw":
            parent[key] = data.draw(st.sampled_from(sorted(RAW)), label="raw")
        elif kind == "rename" and isinstance(parent, dict):
            parent[key + "_x" if isinstance(key, str) else key] = parent.pop(key)
        elif kind == "empty":
            parent[key] = type(value)() if isinstance(value, list | dict | str) else 0
    return doc


def dump_json(doc) -> bytes:
    text = json.dumps(doc, ensure_ascii=False)
    for marker, raw in RAW.items():
        text = text.replace(json.dumps(marker), raw)
    return text.encode("utf-8", errors="surrogatepass")


def mutate_bytes(data, blob: bytes) -> bytes:
    """One byte-level mutation: flip, truncate, delete, insert or duplicate a range."""
    if not blob:
        return data.draw(st.binary(max_size=16))
    n = len(blob)
    at = data.draw(st.integers(0, n - 1), label="at")
    kind = data.draw(st.sampled_from(["flip", "truncate", "delete", "insert", "duplicate"]))
    if kind == "flip":
        bit = 1 << data.draw(st.integers(0, 7))
        return blob[:at] + bytes([blob[at] ^ bit]) + blob[at + 1 :]
    if kind == "truncate":
        return blob[:at]
    span = data.draw(st.integers(1, 64))
    if kind == "delete":
        return blob[:at] + blob[at + span :]
    if kind == "insert":
        return blob[:at] + data.draw(st.binary(min_size=1, max_size=16)) + blob[at:]
    return blob[:at] + blob[at : at + span] * data.draw(st.integers(2, 50)) + blob[at:]


def mutate_json_bytes(data, blob: bytes) -> bytes:
    if data.draw(st.integers(0, 3), label="byte_level") == 0:
        return mutate_bytes(data, blob)
    return dump_json(mutate_tree(data, json.loads(blob)))


TOKENS = [
    "nan",
    "-nan",
    "inf",
    "-1",
    "0",
    "1e308",
    "99999999999999999999999999",
    "N/A",
    "x",
    "",
    "2.5",
]


def mutate_text(data, text: str) -> bytes:
    """Line-level (delete, duplicate, swap), token-level or byte-level mutations."""
    lines = text.split("\n")
    for _ in range(data.draw(st.integers(1, 3), label="n_mutations")):
        kind = data.draw(st.sampled_from(["delete", "duplicate", "swap", "token", "bytes"]))
        i = data.draw(st.integers(0, max(len(lines) - 1, 0)), label="line")
        if not lines:
            break
        if kind == "delete":
            del lines[i]
        elif kind == "duplicate":
            lines[i:i] = [lines[i]] * data.draw(st.integers(1, 3))
        elif kind == "swap":
            j = data.draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "token":
            tokens = lines[i].split(" ")
            k = data.draw(st.integers(0, len(tokens) - 1))
            tokens[k] = data.draw(
                st.sampled_from(TOKENS) | st.sampled_from([str(v) for v in HUGE_INTS])
            )
            lines[i] = " ".join(tokens)
        else:
            return mutate_bytes(data, "\n".join(lines).encode())
    return "\n".join(lines).encode()


def mutate_jsonl(data, text: str) -> bytes:
    lines = text.rstrip("\n").split("\n")
    i = data.draw(st.integers(0, len(lines) - 1), label="line")
    kind = data.draw(st.sampled_from(["tree", "tree", "delete", "duplicate", "swap", "bytes"]))
    if kind == "tree":
        lines[i] = dump_json(mutate_tree(data, json.loads(lines[i]))).decode(
            "utf-8", "surrogatepass"
        )
    elif kind == "delete":
        del lines[i]
    elif kind == "duplicate":
        lines.insert(i, lines[i])
    elif kind == "swap":
        j = data.draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
    else:
        return mutate_bytes(data, ("\n".join(lines) + "\n").encode())
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")


def maybe_gzip(data, blob: bytes) -> bytes:
    packed = gzip.compress(blob, mtime=0)
    if data.draw(st.integers(0, 5), label="corrupt_gzip") == 0:
        return mutate_bytes(data, packed)
    return packed


# --------------------------------------------------------------------------- checks


def _no_temporaries(directory: Path) -> None:
    left = [p.name for p in directory.rglob(".*") if ".tmp-" in p.name or ".staging-" in p.name]
    assert not left, f"temporary files left behind: {left}"


def check_trace_output(path: Path) -> None:
    doc = json.loads(path.read_text())
    validate(doc, "trace", file=str(path))


def check_parquet_output(path: Path) -> None:
    from tracecanary.ingest import sidecar_path

    side = json.loads(sidecar_path(path).read_text())
    assert pq.read_table(path).num_rows == side["events"]


def check_schema(name: str) -> Callable[[Path], None]:
    def check(path: Path) -> None:
        validate(json.loads(path.read_text()), name, file=str(path))

    return check


def check_attempt(path: Path) -> None:
    attempt = json.loads((path / "attempt.json").read_text())
    validate(attempt, "attempt", file=str(path))
    rows = "rows.parquet" if attempt["status"] == "complete" else "partial/rows.parquet"
    pq.read_table(path / rows)


def check_export(path: Path) -> None:
    export = json.loads((path / "export.json").read_text())
    assert export["format"]
    assert any(p.name == "0.json" for p in path.iterdir())


def check_tar(path: Path) -> None:
    with tarfile.open(path, "r:gz") as tar:
        assert tar.getmembers()


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def bounded(seconds: float = EXAMPLE_SECONDS, extra_bytes: int = EXAMPLE_MEMORY_BYTES):
    """Fail (not hang, not swap) when one run takes too long or allocates too much.

    Memory is capped as address space (RLIMIT_AS) above what the process already maps,
    plus 128 MiB per core for the malloc arenas and thread stacks of thread pools, so
    an allocation that scales with a declared size (10^12 occurrences) is a MemoryError
    naming the line, not an OOM kill."""

    def alarm(signum, frame):
        raise _Timeout(f"one CLI run took more than {seconds} s")

    with open("/proc/self/statm") as f:
        vsize = int(f.read().split()[0]) * resource.getpagesize()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = vsize + extra_bytes + (128 << 20) * (os.cpu_count() or 1)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_case(argv: list, outputs: dict[Path, Callable[[Path], None]], workdir: Path) -> int:
    """Run one mutated case and check the contract; returns the exit code."""
    with bounded():
        code, out, err = run_quiet([str(a) for a in argv])
    assert code in (0, 1, 2), (code, err[-2000:])
    assert "Traceback" not in err and "Traceback" not in out
    event(f"{argv[0]} exit {code}")  # --hypothesis-show-statistics: how deep cases reach
    if code == 2:
        errors = [line for line in err.splitlines() if ": error: " in line]
        assert len(errors) == 1, err[-2000:]
    for path, check in outputs.items():
        if code == 2:
            assert not path.exists(), f"exit 2 but {path.name} was written"
        elif path.exists():
            check(path)
    _no_temporaries(workdir)
    return code


def nothing_in(directory: Path) -> bool:
    """No file under ``directory`` (an output's parent may have been created empty)."""
    return not directory.exists() or not any(p.is_file() for p in directory.rglob("*"))


def fresh_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="tracecanary-fuzz-"))


# --------------------------------------------------------------------------- the fuzz test

FUZZ_EXAMPLES = 250


@fuzz_settings(FUZZ_EXAMPLES)
@given(data=st.data())
def test_fuzz_native_trace_json_ingest(seeds, data):
    work = fresh_dir()
    try:
        src = work / "trace.json"
        src.write_bytes(mutate_json_bytes(data, (seeds / "trace.json").read_bytes()))
        out = work / "out.parquet"
        outputs = {out: check_parquet_output, work / "out.meta.json": lambda p: None}
        run_case(["ingest", src, "-o", out], outputs, work)
    finally:
        shutil.rmtree(work)


@fuzz_settings(FUZZ_EXAMPLES)
@given(data=st.data())
def test_fuzz_native_trace_jsonl_gz_ingest(seeds, data):
    work = fresh_dir()
    try:
        text = gzip.decompress((seeds / "trace.jsonl.gz").read_bytes()).decode()
        src = work / "trace.jsonl.gz"
        src.write_bytes(maybe_gzip(data, mutate_jsonl(data, text)))
        out = work / "out.parquet"
        outputs = {out: check_parquet_output, work / "out.meta.json": lambda p: None}
        run_case(["ingest", src, "-o", out], outputs, work)
    finally:
        shutil.rmtree(work)


@fuzz_settings(FUZZ_EXAMPLES)
@given(data=st.data())
def test_fuzz_captures_and_calibration_merge(seeds, data):
    work = fresh_dir()
    try:
        names = ["rank0.json", "rank1.json", "calibration.json"]
        target = data.draw(st.sampled_from(names + ["calibration.json"]), label="file")
        for name in names:
            blob = (seeds / name).read_bytes()
            (work / name).write_bytes(mutate_json_bytes(data, blob) if name == target else blob)
        out = work / "merged.json"
        argv = ["merge", work / "rank0.json", work / "rank1.json"]
        run_case(
            argv + ["--calibration", work / "calibration.json", "-o", out],
            {out: check_trace_output},
            work,
        )
    finally:
        shutil.rmtree(work)


@fuzz_settings(FUZZ_EXAMPLES)
@given(data=st.data())
def test_fuzz_kineto_import(seeds, data):
    work = fresh_dir()
    try:
        blob = mutate_json_bytes(data, (seeds / "kineto.json").read_bytes())
        if data.draw(st.booleans(), label="gz"):
            src = work / "kineto.json.gz"
            src.write_bytes(maybe_gzip(data, blob))
        else:
            src = work / "kineto.json"
            src.write_bytes(blob)
        out = work / "imported.json"
        run_case(["import-kineto", src, "-o", out], {out: check_trace_output}, work)
    finally:
        shutil.rmtree(work)


@fuzz_settings(2 * FUZZ_EXAMPLES)
@given(data=st.data())
def test_fuzz_canary_expand_export_and_commitments(seeds, data):
    work = fresh_dir()
    try:
        seed = data.draw(st.sampled_from(["canary.json", "canary-reduced.json"]), label="seed")
        src = work / "canary.json"
        src.write_bytes(mutate_json_bytes(data, (seeds / seed).read_bytes()))
        command = data.draw(
            st.sampled_from(
                ["expand", "expand --executed", "export-param", "verify-commitments", "replay"]
            )
        )
        if command.startswith("expand"):
            out = work / "expanded.json"
            argv = ["expand", src, "-o", out] + (["--executed"] if "executed" in command else [])
            run_case(argv, {out: check_trace_output}, work)
        elif command == "export-param":
            out = work / "program"
            run_case(["export-param", src, "-o", out], {out: check_export}, work)
        elif command == "replay":
            out = work / "report.json"
            argv = ["replay", src, "--backends", BACKENDS, "--config", "baseline", "-o", out]
            run_case(argv, {out: check_schema("report")}, work)
        else:
            run_case(["verify-commitments", seeds / "trace.json", src], {}, work)
    finally:
        shutil.rmtree(work)


@fuzz_settings(FUZZ_EXAMPLES)
@given(data=st.data())
def test_fuzz_report_verify_and_compare(seeds, data):
    work = fresh_dir()
    try:
        src = work / "report.json"
        src.write_bytes(mutate_json_bytes(data, (seeds / "report.json").read_bytes()))
        if data.draw(st.booleans(), label="compare"):
            out = work / "verdict.json"
            argv = ["compare", seeds / "report.json", src, "--allow-different-inputs", "-o", out]
            md = work / "verdict.md"
            run_case(
                argv + ["--markdown", md], {out: check_schema("verdict"), md: lambda p: None}, work
            )
        else:
            run_case(["verify-report", src, "--input", seeds / "trace.json"], {}, work)
    finally:
        shutil.rmtree(work)


@fuzz_settings(FUZZ_EXAMPLES)
@given(data=st.data())
def test_fuzz_nccltests_stdout_and_json_alphabeta(seeds, data):
    work = fresh_dir()
    try:
        if data.draw(st.booleans(), label="json"):
            src = work / "nccl.json"
            src.write_bytes(mutate_json_bytes(data, (seeds / "nccl.json").read_bytes()))
        else:
            src = work / "nccl.txt"
            src.write_bytes(mutate_text(data, (seeds / "nccl.txt").read_text()))
        out = work / "fit.json"
        md = work / "fit.md"
        run_case(
            ["alphabeta", src, "-o", out, "--markdown", md],
            {out: check_schema("alphabeta"), md: lambda p: None},
            work,
        )
    finally:
        shutil.rmtree(work)


@fuzz_settings(FUZZ_EXAMPLES)
@given(data=st.data())
def test_fuzz_tuning_log_alphabeta(seeds, data):
    work = fresh_dir()
    try:
        src = work / "tuning.log"
        src.write_bytes(mutate_text(data, (seeds / "tuning.log").read_text()))
        out = work / "fit.json"
        run_case(
            ["alphabeta", seeds / "nccl.txt", "--tuning", src, "-o", out],
            {out: check_schema("alphabeta")},
            work,
        )
    finally:
        shutil.rmtree(work)


@fuzz_settings(FUZZ_EXAMPLES)
@given(data=st.data())
def test_fuzz_param_results_import(seeds, data):
    work = fresh_dir()
    try:
        results = work / "results"
        shutil.copytree(seeds / "param-results", results)
        rank = data.draw(st.integers(0, 1), label="rank")
        f = results / f"replayedCommsPerf.rank{rank}.json"
        f.write_bytes(mutate_json_bytes(data, f.read_bytes()))
        out = work / "attempt"
        argv = ["import-param-results", results, "-o", out]
        if data.draw(st.booleans(), label="with_program"):
            argv += ["--program", seeds / "param-program"]
        run_case(argv, {out: check_attempt}, work)
    finally:
        shutil.rmtree(work)


@fuzz_settings(FUZZ_EXAMPLES)
@given(data=st.data())
def test_fuzz_param_program_directory(seeds, data):
    work = fresh_dir()
    try:
        program = work / "program"
        seed = data.draw(st.sampled_from(["param-program", "program"]), label="seed")
        shutil.copytree(seeds / seed, program)
        rank = data.draw(st.integers(0, 1), label="rank")
        f = program / f"{rank}.json"
        f.write_bytes(mutate_json_bytes(data, f.read_bytes()))
        out = work / "attempt"
        if seed == "param-program" and data.draw(st.booleans(), label="import"):
            argv = [
                "import-param-results",
                seeds / "param-results",
                "--program",
                program,
                "-o",
                out,
            ]
            run_case(argv, {out: check_attempt}, work)
        else:
            # --nproc 3 never matches the 2 rank files: every check runs, nothing launches
            argv = ["replay-physical", program, "--nproc", "3", "-o", out]
            assert run_case(argv, {out: lambda p: None}, work) == 2
    finally:
        shutil.rmtree(work)


@fuzz_settings(FUZZ_EXAMPLES)
@given(data=st.data())
def test_fuzz_manifest_verify_and_pack(seeds, data):
    work = fresh_dir()
    try:
        campaign = work / "campaign"
        shutil.copytree(seeds / "campaign", campaign)
        manifest = campaign / "results" / "fz" / "manifest.json"
        target = data.draw(
            st.sampled_from(["manifest", "manifest", "provenance", "derived"]), label="file"
        )
        f = {
            "manifest": manifest,
            "provenance": campaign / "results" / "fz" / "provenance" / "derived.json",
            "derived": campaign / "results" / "fz" / "derived.json",
        }[target]
        f.write_bytes(mutate_json_bytes(data, f.read_bytes()))
        action = data.draw(st.sampled_from(["pack", "unpack", "verify"]), label="action")
        if action == "pack":
            out = work / "campaign.tar.gz"
            run_case(["manifest", "pack", manifest, "-o", out], {out: check_tar}, work)
        elif action == "unpack":
            archive = work / "mutated.tar.gz"
            archive.write_bytes(mutate_bytes(data, (seeds / "campaign.tar.gz").read_bytes()))
            out = work / "unpacked"
            run_case(["manifest", "unpack", archive, "-o", out], {out: lambda p: None}, work)
        else:
            code = run_case(["manifest", "verify", manifest, "--workdir", campaign], {}, work)
            if target == "derived" and code == 0:
                assert (
                    f.read_bytes()
                    == (seeds / "campaign" / "results" / "fz" / "derived.json").read_bytes()
                )
    finally:
        shutil.rmtree(work)


# YAML-specific hostile constructs spliced in place of one line of a YAML seed
YAML_SPLICES = [
    "x: &a [1, 2, 3]\ny: [*a, *a, *a, *a, *a, *a, *a, *a]",
    "\n".join(
        ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
        + [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 8) + "]" for i in range(1, 9)]
    ),  # billion laughs
    "r: &r [*r]",
    "d: " + "[" * 200 + "]" * 200,
    "k: 1\nk: 2",
    "t: !!python/object/apply:os.system [echo pwned]",
    "__use_yte__: true\n_x: ?__import__('os').getcwd()",
    "m: {<<: [*nope]}",
    "s: !!binary AAAA",
    "v: " + "9" * 5000,
    "\t- bad indentation",
]


def mutate_yaml(data, text: str) -> bytes:
    """A text-level mutation of a YAML seed, or a hostile YAML construct spliced in."""
    if data.draw(st.booleans(), label="splice"):
        lines = text.split("\n")
        i = data.draw(st.integers(0, len(lines)), label="line")
        lines.insert(i, data.draw(st.sampled_from(YAML_SPLICES), label="construct"))
        return "\n".join(lines).encode()
    return mutate_text(data, text)


@fuzz_settings(FUZZ_EXAMPLES)
@given(data=st.data())
def test_fuzz_yaml_inputs_backends_tolerances_physical_and_campaign_config(seeds, data):
    work = fresh_dir()
    try:
        name = data.draw(st.sampled_from(YAML_SEEDS), label="yaml")
        src = work / name
        src.write_bytes(mutate_yaml(data, (seeds / name).read_text()))
        if name == "backends.yaml":
            out = work / "report.json"
            argv = ["replay", seeds / "trace.json", "--backends", src, "-o", out]
            run_case(argv, {out: check_schema("report")}, work)
        elif name == "tolerances.yaml":
            out = work / "verification.json"
            argv = ["verify-behavior", seeds / "trace.json", seeds / "canary.json",
                    "--tolerances", src, "--config", "baseline", "-o", out]  # fmt: skip
            run_case(argv, {out: check_schema("verification")}, work)
        elif name == "physical.yaml":
            out = work / "attempt"
            # --nproc 3 never matches the 2 rank files: the configs are read, nothing launches
            argv = ["replay-physical", seeds / "program", "--nproc", "3",
                    "--physical-configs", src, "-o", out]  # fmt: skip
            assert run_case(argv, {out: lambda p: None}, work) == 2
        else:
            from tracecanary.campaign.config_check import refuse_evaluating_config
            from tracecanary.errors import TraceCanaryError

            with bounded():
                try:
                    refuse_evaluating_config(src)
                except TraceCanaryError as err:
                    assert err.exit_code == 2
    finally:
        shutil.rmtree(work)


def _archive_members(path: Path) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    with tarfile.open(path, "r:gz") as tar:
        return [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar]


def mutate_archive(data, seed: Path) -> bytes:
    """Member-level mutations of a campaign archive: a member twice, an extra member, a
    link, a device, a FIFO, a path with '..' or absolute, a changed or yte config, a
    mutated manifest, many empty members, or a byte-level mutation of the tar.gz."""
    members = _archive_members(seed)
    kind = data.draw(
        st.sampled_from(
            ["duplicate", "extra", "symlink", "hardlink", "device", "fifo", "dotdot",
             "absolute", "config", "yte", "manifest", "many", "bytes"]
        ),
        label="archive_mutation",
    )  # fmt: skip
    if kind == "bytes":
        return mutate_bytes(data, seed.read_bytes())
    i = data.draw(st.integers(0, len(members) - 1), label="member")
    info, blob = members[i]
    if kind == "duplicate":
        members.append((copy.copy(info), blob))
    elif kind == "extra":
        members.append((tarfile.TarInfo("resources/extra.txt"), b"extra\n"))
    elif kind in ("symlink", "hardlink", "device", "fifo"):
        link = tarfile.TarInfo(info.name)
        link.type = {"symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE,
                     "device": tarfile.CHRTYPE, "fifo": tarfile.FIFOTYPE}[kind]  # fmt: skip
        link.linkname = "/dev/zero" if kind == "symlink" else members[0][0].name
        members[i] = (link, None)
    elif kind in ("dotdot", "absolute"):
        renamed = copy.copy(info)
        renamed.name = ("../" if kind == "dotdot" else "/tmp/") + info.name
        members[i] = (renamed, blob)
    elif kind in ("config", "yte", "manifest"):
        j = next(k for k, (m, _) in enumerate(members) if m.name.endswith(
            "manifest.json" if kind == "manifest" else "fz.yaml"))  # fmt: skip
        old = members[j][1]
        if kind == "manifest":
            new = mutate_json_bytes(data, old)
        elif kind == "yte":
            new = old + b"__use_yte__: true\n_x: ?__import__('os').getcwd()\n"
        else:
            new = mutate_yaml(data, old.decode())
        members[j] = (copy.copy(members[j][0]), new)
    elif kind == "many":
        members += [(tarfile.TarInfo(f"resources/e{k}"), b"") for k in range(300)]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for member, content in members:
            if content is not None:
                member.size = len(content)
            tar.addfile(member, io.BytesIO(content) if content is not None else None)
    return buffer.getvalue()


@fuzz_settings(FUZZ_EXAMPLES)
@given(data=st.data())
def test_fuzz_campaign_archive_unpack(seeds, data):
    work = fresh_dir()
    try:
        archive = work / "campaign.tar.gz"
        archive.write_bytes(mutate_archive(data, seeds / "campaign.tar.gz"))
        out = work / "unpacked"
        code = run_case(["manifest", "unpack", archive, "-o", out], {out: lambda p: None}, work)
        if code == 0:  # what unpacked is exactly what its manifest binds
            manifest = next(out.glob("results/*/manifest.json"))
            assert run_quiet(["manifest", "verify", manifest, "--workdir", out])[0] in (0, 1)
            assert not (out / "resources" / "extra.txt").exists()
    finally:
        shutil.rmtree(work)


# --------------------------------------------------------------------------- explicit refusals


def refused(argv: list, *needles: str, seconds: float = 5.0, extra_bytes: int = 1 << 30) -> str:
    """Run ``argv``; assert exit 2 within ``seconds`` and ``extra_bytes`` of new address
    space, with one error line holding every needle. Returns that line."""
    start = time.monotonic()
    with bounded(seconds=seconds, extra_bytes=extra_bytes):
        code, _, err = run_quiet([str(a) for a in argv])
    elapsed = time.monotonic() - start
    assert code == 2, err
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert elapsed < seconds
    return lines[0]


@pytest.fixture
def limits_env(monkeypatch):
    def set_limits(spec: str | None) -> None:
        if spec is None:
            monkeypatch.delenv("TRACECANARY_LIMITS", raising=False)
        else:
            monkeypatch.setenv("TRACECANARY_LIMITS", spec)

    set_limits(None)
    return set_limits


def write_gzip_bomb(path: Path, prefix: bytes, *, gib: int = 10, filler: bytes = b" ") -> int:
    """A gzip file that inflates to ``prefix`` + ``gib`` GiB of ``filler`` (valid JSON
    whitespace), about 1 MB per GiB on disk: deflate blocks after a full flush do not
    depend on what came before, so one compressed MiB is written ``gib * 1024`` times.
    The stream has no end: nothing may read that far."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = c.compress(prefix) + c.flush(zlib.Z_FULL_FLUSH)
    mib = filler * (1 << 20)
    block = c.compress(mib) + c.flush(zlib.Z_FULL_FLUSH)
    assert c.compress(mib) + c.flush(zlib.Z_FULL_FLUSH) == block
    with open(path, "wb") as f:
        f.write(head)
        for _ in range(gib * 1024):
            f.write(block)
    return path.stat().st_size


def test_gzip_bomb_of_10_gib_stops_at_max_decompressed_bytes_in_every_reader(
    tmp_path, limits_env, seeds
):
    header = {k: v for k, v in native_trace().items() if k != "events"}
    jsonl = tmp_path / "bomb.jsonl.gz"
    size = write_gzip_bomb(jsonl, (json.dumps(header) + "\n").encode(), filler=b"\n")
    doc = tmp_path / "bomb.json.gz"
    write_gzip_bomb(doc, b"[")
    assert size < 12 << 20  # 10 GiB of content in about 10 MB
    limits_env(f"max_decompressed_bytes={64 << 20}")
    needle = f"max_decompressed_bytes={64 << 20}"
    out = tmp_path / "out"
    for argv in (
        ["ingest", jsonl, "-o", out / "t.parquet"],
        ["ingest", doc, "-o", out / "t.parquet"],
        ["import-kineto", doc, "-o", out / "t.json"],
        ["expand", doc, "-o", out / "t.json"],
        ["merge", seeds / "rank0.json", seeds / "rank1.json", "--calibration", doc, "-o", out / "m.json"],
        ["alphabeta", doc, "-o", out / "fit.json"],
        ["alphabeta", seeds / "nccl.txt", "--tuning", doc, "-o", out / "fit.json"],
        ["compare", doc, seeds / "report.json", "-o", out / "v.json"],
        ["verify-report", doc, "--input", seeds / "trace.json"],
    ):  # fmt: skip
        refused(argv, needle, extra_bytes=512 << 20)
    assert nothing_in(out)


def test_whole_document_reader_stops_at_max_json_document_bytes_in_bounded_memory(tmp_path):
    """With the default decompression limit (16 GiB), a whole-document reader stops at
    max_json_document_bytes (2 GiB by default; lowered here to keep the test fast) and
    never buffers more than it was allowed to: a 1 GiB bomb, 256 MiB of headroom."""
    doc = tmp_path / "bomb.json.gz"
    write_gzip_bomb(doc, b"[", gib=1)
    limits = Limits(max_json_document_bytes=32 << 20)
    from tracecanary.limits import load_json

    with bounded(seconds=5, extra_bytes=256 << 20):
        with pytest.raises(Exception) as info:
            load_json(doc, limits)
    assert "max_json_document_bytes" in str(info.value)


def test_corrupt_gzip_is_refused_with_one_line(tmp_path, seeds):
    blob = (seeds / "trace.jsonl.gz").read_bytes()
    bad = tmp_path / "trace.jsonl.gz"
    bad.write_bytes(blob[: len(blob) // 2])
    refused(["ingest", bad, "-o", tmp_path / "t.parquet"], "gzip")


def _canary_variants(canary: dict) -> dict[str, tuple[dict, str]]:
    """Canaries whose motif weights (nested repeat counts) or streams claim 10^12
    occurrences, with the field each refusal must name."""
    n = canary["structure"]["occurrences"]
    motif = {
        "body": [{"sig": 0, "repeat": 10**6, "execute": 10**6}],
        "repeat": 10**6,
        "execute": 10**6,
    }
    nested = {"body": [{"body": [{"sig": 0, "repeat": 10**4, "execute": 10**4}], "repeat": 10**4,
                        "execute": 10**4}], "repeat": 10**4, "execute": 10**4}  # fmt: skip
    out = {}
    claimed = copy.deepcopy(canary)
    claimed["structure"] = {"occurrences": 10**12, "records": [motif]}
    out["claimed"] = (claimed, "structure.occurrences")
    hidden = copy.deepcopy(canary)
    hidden["structure"]["records"] = [nested]
    out["nested_weights"] = (hidden, "structure.records")
    tail = copy.deepcopy(canary)
    tail["flags"]["tail"] = [{"repeat": 10**12, "v": False}]
    out["tail_flags"] = (tail, "flags.tail")
    gap = copy.deepcopy(canary)
    gap["timing"]["gap"] = {
        "encoding": "exact",
        "values": [{"body": [{"v": 1, "repeat": 10**6}], "repeat": 10**6}],
    }
    out["gap_stream"] = (gap, "timing.gap")
    assert n < 10**12
    return out


@pytest.mark.parametrize("variant", ["claimed", "nested_weights", "tail_flags", "gap_stream"])
def test_canary_expanding_to_10_12_occurrences_is_refused_before_any_expansion(
    tmp_path, seeds, variant
):
    doc, field = _canary_variants(json.loads((seeds / "canary.json").read_text()))[variant]
    path = tmp_path / "canary.json"
    path.write_text(json.dumps(doc))
    for argv in (
        ["expand", path, "-o", tmp_path / "t.json"],
        ["expand", path, "--executed", "-o", tmp_path / "t.json"],
        ["replay", path, "--backends", BACKENDS, "-o", tmp_path / "r.json"],
        ["export-param", path, "-o", tmp_path / "prog"],
        ["verify-commitments", seeds / "trace.json", path],
        ["compile", path, "--lossless", "-o", tmp_path / "c.json"],
    ):
        line = refused(argv, f"field {field}", seconds=3, extra_bytes=256 << 20)
        assert "10000000000" in line or "covers" in line
    assert [p.name for p in tmp_path.iterdir()] == ["canary.json"]


DEEP_ARRAY = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a":' * 100_000 + "1" + "}" * 100_000


@pytest.mark.parametrize("text", [DEEP_ARRAY, DEEP_OBJECT], ids=["array", "object"])
def test_json_nested_100000_deep_is_refused_by_every_json_reader(tmp_path, seeds, text):
    deep = tmp_path / "deep.json"
    deep.write_text(text)
    deep_lines = tmp_path / "deep.jsonl"
    deep_lines.write_text(text + "\n")
    params = tmp_path / "param-results"
    params.mkdir()
    (params / "replayedCommsPerf.rank0.json").write_text(text)
    program = tmp_path / "program"
    program.mkdir()
    for rank in (0, 1):
        (program / f"{rank}.json").write_text(text)
    campaign = tmp_path / "campaign"
    shutil.copytree(seeds / "campaign", campaign)
    manifest = campaign / "results" / "fz" / "manifest.json"
    manifest.write_text(text)
    out = tmp_path / "out"
    for argv in (
        ["ingest", deep, "-o", out / "t.parquet"],
        ["ingest", deep_lines, "-o", out / "t.parquet"],
        ["import-kineto", deep, "-o", out / "t.json"],
        ["merge", seeds / "rank0.json", seeds / "rank1.json", "--calibration", deep, "-o", out / "m.json"],
        ["expand", deep, "-o", out / "t.json"],
        ["compile", seeds / "trace.json", "--budget", "gap=1us", "--budget-overrides", deep, "-o", out / "c.json"],
        ["compare", deep, seeds / "report.json", "-o", out / "v.json"],
        ["verify-report", deep, "--input", seeds / "trace.json"],
        ["alphabeta", deep, "-o", out / "fit.json"],
        ["import-param-results", params, "-o", out / "attempt"],
        ["replay-physical", program, "--nproc", "2", "-o", out / "attempt"],
        ["manifest", "verify", manifest],
    ):  # fmt: skip
        line = refused(argv, seconds=3)
        assert "RecursionError" not in line and ("nest" in line or "depth" in line), line
    assert nothing_in(out)


def _with(doc: dict, edit: Callable[[dict], None]) -> dict:
    doc = copy.deepcopy(doc)
    edit(doc)
    return doc


def test_absurd_declared_sizes_are_refused_in_bounded_time_and_memory(tmp_path, seeds):
    trace = native_trace()
    canary = json.loads((seeds / "canary.json").read_text())

    def gaps_overflow(d):
        for e in d["events"]:
            e.pop("ts_ns")
            e["gap_ns"] = 2**62 - 1

    def setter(*path, value):
        def edit(d):
            node = d
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value

        return edit

    cases = [
        ("trace.json", trace, setter("meta", "world_size", value=10**9), "ingest", "max_ranks"),
        ("trace.json", trace, lambda d: d["groups"].append({"id": "huge", "start": 0, "stride": 1, "size": 10**8}),
         "ingest", "max_ranks"),
        ("trace.json", trace, setter("events", 0, "bytes", value=2**62), "ingest", "max_message_bytes"),
        ("trace.json", trace, setter("events", 3, "ts_ns", value=2**62 + 1), "ingest", "max_time_ns"),
        ("trace.json", trace, gaps_overflow, "ingest", "max_time_ns"),
        ("kineto.json", kineto_seed(), setter("distributedInfo", "world_size", value=10**9), "import-kineto",
         "max_ranks"),
        ("canary.json", canary, setter("source", "world_size", value=10**9), "expand", "max_ranks"),
        ("canary.json", canary, setter("signatures", 0, "bytes", value=2**62), "expand", "max_message_bytes"),
        ("canary.json", canary, setter("groups", "world", value=list(range(10**5))), "expand", "max_ranks"),
        ("calibration.json", CALIBRATION, setter("clocks", 1, "offset_ns", value=2**62 + 1), "merge", "max_time_ns"),
        ("calibration.json", CALIBRATION, setter("clocks", 1, "offset_ns", value=-(2**62)), "merge",
         "outside [0, max_time_ns"),
        ("nccl.json", nccltests_json(), setter("results", 0, "size", value=2**62), "alphabeta",
         "max_message_bytes"),
        ("nccl.json", nccltests_json(), setter("config", "nthreads", value=10**9), "alphabeta", "max_ranks"),
    ]  # fmt: skip
    for name, seed, edit, command, needle in cases:
        work = tmp_path / f"case{cases.index((name, seed, edit, command, needle))}"
        work.mkdir()
        src = work / name
        src.write_text(json.dumps(_with(seed, edit)))
        out = work / "out"
        argv = {
            "ingest": ["ingest", src, "-o", out / "t.parquet"],
            "import-kineto": ["import-kineto", src, "-o", out / "t.json"],
            "expand": ["expand", src, "-o", out / "t.json"],
            "merge": ["merge", seeds / "rank0.json", seeds / "rank1.json", "--calibration", src, "-o", out / "m.json"],
            "alphabeta": ["alphabeta", src, "-o", out / "fit.json"],
        }[command]  # fmt: skip
        refused(argv, needle, seconds=3)
        assert nothing_in(out)

    program = tmp_path / "program"
    shutil.copytree(seeds / "param-program", program)
    entries = json.loads((program / "0.json").read_text())
    op = next(e for e in entries if e["comms"] == "all_reduce")
    op["in_msg_size"] = op["out_msg_size"] = 2**62
    (program / "0.json").write_text(json.dumps(entries))
    refused(["replay-physical", program, "--nproc", "2", "-o", tmp_path / "a"], "max_message_bytes")
    results = tmp_path / "results"
    results.mkdir()
    rows = json.loads((seeds / "param-results" / "replayedCommsPerf.rank0.json").read_text())
    rows[0]["in_msg_size"] = rows[0]["out_msg_size"] = 2**62
    (results / "replayedCommsPerf.rank0.json").write_text(json.dumps(rows))
    refused(["import-param-results", results, "-o", tmp_path / "a"], "max_message_bytes")
    (results / "replayedCommsPerf.rank0.json").rename(
        results / "replayedCommsPerf.rank1000000000.json"
    )
    refused(["import-param-results", results, "-o", tmp_path / "a"], "max_ranks")
    assert not (tmp_path / "a").exists()


def test_zlib_bomb_in_report_samples_is_a_mismatch_not_an_allocation(tmp_path, seeds):
    """A sample block inflating to 1 GiB while its count says a few values: verify-report
    reads at most what the count declares and names the block (exit 1)."""
    report = json.loads((seeds / "report.json").read_text())
    block = report["configs"]["baseline"]["samples"]["candidate"]
    c = zlib.compressobj(9, zlib.DEFLATED, 15)
    mib = bytes(1 << 20)
    stream = c.compress(mib) + c.flush(zlib.Z_FULL_FLUSH)
    repeat = c.compress(mib) + c.flush(zlib.Z_FULL_FLUSH)
    block["data"] = base64.b64encode(stream + repeat * 1023).decode("ascii")
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    start = time.monotonic()
    with bounded(seconds=5, extra_bytes=256 << 20):
        code, _, err = run_quiet(["verify-report", path, "--input", seeds / "trace.json"])
    assert code == 1 and "samples.candidate.data" in err, err
    assert time.monotonic() - start < 5


def test_manifest_naming_paths_outside_its_campaign_is_refused(tmp_path, seeds):
    campaign = tmp_path / "campaign"
    shutil.copytree(seeds / "campaign", campaign)
    manifest = campaign / "results" / "fz" / "manifest.json"
    doc = json.loads(manifest.read_text())
    for bad in ("/dev/zero", "../../outside.txt"):
        doc["evidence"][0]["path"] = bad
        manifest.write_text(json.dumps(doc))
        refused(["manifest", "verify", manifest], "leaves the campaign directory", seconds=3)
        refused(["manifest", "pack", manifest, "-o", tmp_path / "c.tar.gz"], "leaves the campaign")
    assert not (tmp_path / "c.tar.gz").exists()


def test_archive_whose_members_inflate_past_the_limit_is_refused_before_writing(
    tmp_path, limits_env
):
    archive = tmp_path / "bomb.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("results/zeros.bin")
        info.size = 256 << 20
        tar.addfile(info, io.BytesIO(bytes(info.size)))
    limits_env(f"max_decompressed_bytes={64 << 20}")
    refused(["manifest", "unpack", archive, "-o", tmp_path / "lab"], "max_decompressed_bytes")
    assert not (tmp_path / "lab").exists()


def test_limits_are_raised_and_lowered_through_the_environment(tmp_path, seeds, limits_env):
    out = tmp_path / "t.parquet"
    limits_env("max_events=5")
    refused(["ingest", seeds / "trace.json", "-o", out], "max_events=5")
    limits_env("max_events=1e9,max_ranks=131072")
    assert run_quiet(["ingest", seeds / "trace.json", "-o", out])[0] == 0
    limits_env("max_evnts=5")
    refused(
        ["ingest", seeds / "trace.json", "-o", tmp_path / "u.parquet"], "unknown resource limit"
    )
    limits_env("max_events=lots")
    refused(["ingest", seeds / "trace.json", "-o", tmp_path / "u.parquet"], "needs a number")


def test_a_limit_past_what_a_program_holds_is_refused_where_it_is_set(tmp_path, seeds, limits_env):
    """max_ranks and max_occurrences stop at 2**31: ranks and occurrence indexes are the
    program's int32 member columns (the two facts agree)."""
    from tracecanary.limits import CEILINGS
    from tracecanary.program import MEMBER_INDEX_LIMIT

    assert CEILINGS == {
        "max_ranks": MEMBER_INDEX_LIMIT + 1,
        "max_occurrences": MEMBER_INDEX_LIMIT + 1,
    }
    out = tmp_path / "t.parquet"
    for name in CEILINGS:
        limits_env(f"{name}=2147483649")
        refused(
            ["ingest", seeds / "trace.json", "-o", out], f"limit {name} can be at most 2147483648"
        )
        assert not out.exists()
        limits_env(f"{name}=2147483648")
        assert run_quiet(["ingest", seeds / "trace.json", "-o", out])[0] == 0
        out.unlink()


_UNDER_A_MEMORY_CEILING = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from tracecanary.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS as Linux applies it")
def test_a_command_out_of_memory_exits_2_with_one_line_and_no_output(tmp_path):
    """A world of 2**31 ranks (the highest max_ranks may be raised to) needs per-rank
    tables no 3 GiB process holds: one line naming the way out, exit 2, nothing written."""
    trace = tmp_path / "t.jsonl"
    header = {"format": "tracecanary.trace/v1", "meta": {"world_size": 2**31, "source": "t"}}
    header["groups"] = [{"id": "w", "ranks": [0, 1]}]
    events = [
        {
            "rank": r,
            "seq": 0,
            "op": "all_reduce",
            "bytes": 8,
            "dtype": "f",
            "group": "w",
            "ts_ns": 9,
        }
        for r in (0, 1)
    ]
    trace.write_text("".join(json.dumps(d) + "\n" for d in [header, *events]))
    out = tmp_path / "t.parquet"
    env = dict(os.environ, TRACECANARY_LIMITS=f"max_ranks={2**31}")
    run = subprocess.run(
        [sys.executable, "-c", _UNDER_A_MEMORY_CEILING, "ingest", str(trace), "-o", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr[-2000:]
    assert (
        lines[0].startswith("tracecanary ingest: error: out of memory")
        and "TRACECANARY_LIMITS" in lines[0]
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl"]


def test_docs_list_every_limit_with_its_default():
    text = (REPO / "docs" / "limits.md").read_text()
    for f in dataclasses.fields(Limits):
        assert f"`{f.name}`" in text, f.name
        assert f"`{f.default}`" in text or f"{f.default:_}" in text, (f.name, f.default)
