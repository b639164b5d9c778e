"""Ingest throughput on a 1M-event JSON Lines trace (and, in full mode, a 4M-event one
with several row groups, and a real program's ~1M-event capture: ``RECORDED_DDP``),
side by side in one run:

1. ``ingest_files`` on the JSON Lines file, one ingest per fresh process as
   ``tracecanary ingest`` and the workflow's jobs run it (their process policy applied,
   ``tracecanary.memory.avoid_huge_pages``), alternating with the old path
   (``streaming_jsonl_batches``: pyarrow's streaming JSON reader over the whole body,
   ingest's reader before the template parser) run the same way, and with today's reader
   called as a library without the policy; the normalized Parquet and sidecar digests
   compared across every run; plain json.loads + pandas.DataFrame for scale;
2. ``ingest_files`` on the same events as columnar captures (Parquet, Arrow IPC) vs the
   JSON Lines ingest, alternating in one child; the normalized Parquet digests must be
   equal (the row says whether they are);
3. the JSON Lines parser candidates (pyarrow's reader; ingest's reader as ingest runs
   it: the exact template parser on its parse threads, with pyarrow's reader for the
   chunks it declines; msgspec typed
   decoding; polars' NDJSON reader; DuckDB's JSON reader), each parsing the events into
   the ``EVENT_SCHEMA`` table, alternating in one child: events/s, CPU seconds, whether
   the table equals pyarrow's, and which inputs that pyarrow refuses each one accepts
   (silently converting or dropping what it should refuse). A candidate that is not
   installed is named in the pyarrow row's note with the reason, not measured.

Besides the wall-clock median, notes give CPU seconds (all threads) and the load average
while it ran: on a shared 2-core machine the wall figure moves with the load, the CPU
figure much less."""

from __future__ import annotations

import json
import os
import statistics

import pyarrow as pa
import pyarrow.json as pajson

from bench.common import WORK, row, run_child


def streaming_jsonl_batches(path: str, stream):
    """The old path: ingest's JSON Lines reader before the template parser, pyarrow's
    streaming JSON reader over the whole body (batches cut at its ``BATCH_BYTES``
    blocks), refusals located by ingest. A drop-in for ``ingest._jsonl_batches``."""
    from tracecanary import ingest
    from tracecanary.formats.trace import EVENT_SCHEMA

    options = pajson.ParseOptions(explicit_schema=EVENT_SCHEMA, unexpected_field_behavior="error")
    reader_options = pajson.ReadOptions(block_size=ingest.BATCH_BYTES, use_threads=True)
    index = 0
    try:
        with stream:
            try:
                reader = pajson.open_json(
                    stream, read_options=reader_options, parse_options=options
                )
            except pa.ArrowInvalid as err:
                if "Empty JSON file" in str(err):
                    return
                raise ingest._locate_jsonl_error(path, index, str(err)) from None
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    return
                except pa.ArrowInvalid as err:
                    raise ingest._locate_jsonl_error(path, index, str(err)) from None
                yield index, batch
                index += batch.num_rows
    except pa.ArrowInvalid as err:
        raise ingest._locate_jsonl_error(path, index, str(err)) from None


# Each line an event that pyarrow's reader (with the explicit event schema) refuses or
# that ingest must refuse; a candidate "loses" a case when it parses it without error
# into a table, i.e. a value the reader should refuse would reach the checks changed
# (or an unknown / repeated field would vanish).
_BASE = '"rank":0,"seq":0,"op":"all_reduce","dtype":"f","group":"world"'
REFUSED_LINES = {
    "string for an integer": '{%s,"bytes":"5"}',
    "float for an integer": '{%s,"bytes":5.5}',
    "5.0 for an integer": '{%s,"bytes":5.0}',
    "bool for an integer": '{%s,"bytes":true}',
    "integer for a string": '{%s,"bytes":5,"phase":7}',
    "list for a string": '{%s,"bytes":5,"phase":["a"]}',
    "unknown field": '{%s,"bytes":5,"zzz":1}',
    "repeated key": '{%s,"bytes":5,"bytes":6}',
    "integer over int64": '{%s,"bytes":9223372036854775808}',
    "NaN": '{%s,"bytes":NaN}',
    "lone surrogate": '{%s,"bytes":5,"phase":"\\ud800"}',
    "not an object": "[1,2]",
    "trailing garbage": '{%s,"bytes":5} x',
}

_CANDIDATES = r"""
import io, json, os, statistics, tempfile, time, warnings
warnings.filterwarnings("ignore")
import pyarrow as pa
import pyarrow.json as pajson
from tracecanary.formats.trace import EVENT_SCHEMA

path, repeats, refused = {path!r}, {repeats}, {refused!r}
data = open(path, "rb").read()
body = data[data.index(b"\n") + 1 :]
names = EVENT_SCHEMA.names
ints = {{n for n in names if EVENT_SCHEMA.field(n).type == pa.int64()}}
tmp = tempfile.mkdtemp()
body_file = os.path.join(tmp, "body.jsonl")
open(body_file, "wb").write(body)

def via_pyarrow(raw, file):
    options = pajson.ParseOptions(explicit_schema=EVENT_SCHEMA, unexpected_field_behavior="error")
    return pajson.read_json(io.BytesIO(raw), read_options=pajson.ReadOptions(block_size=1 << 24),
                            parse_options=options)

from tracecanary import ingest
def via_ingest(raw, file):  # ingest's reader as ingest runs it: template parser on its
    # parse threads, pyarrow where it declines
    batches = [batch for _, batch in ingest._jsonl_batches(file, io.BytesIO(raw))]
    return pa.Table.from_batches(batches, schema=EVENT_SCHEMA)

candidates = {{"pyarrow": via_pyarrow, "ingest-template": via_ingest}}
missing = {{}}
try:
    import msgspec
    fields = [(n, int | None if n in ints else str | None, None) for n in names]
    Event = msgspec.defstruct("Event", fields, forbid_unknown_fields=True)
    decoder = msgspec.json.Decoder(Event)
    def via_msgspec(raw, file):
        events = [decoder.decode(line) for line in raw.splitlines() if line.strip()]
        cols = [pa.array([getattr(e, n) for e in events], EVENT_SCHEMA.field(n).type) for n in names]
        return pa.Table.from_arrays(cols, schema=EVENT_SCHEMA)
    candidates["msgspec"] = via_msgspec
except ImportError as err:
    missing["msgspec"] = str(err)
try:
    import polars as pl
    pl_schema = {{n: pl.Int64 if n in ints else pl.String for n in names}}
    def via_polars(raw, file):
        frame = pl.read_ndjson(io.BytesIO(raw), schema=pl_schema)
        return frame.to_arrow(compat_level=pl.CompatLevel.oldest()).cast(EVENT_SCHEMA)
    candidates["polars"] = via_polars
except ImportError as err:
    missing["polars"] = str(err)
try:
    import duckdb
    con = duckdb.connect()
    con.execute("SET threads = 2")
    columns = ", ".join(f"'{{n}}': '{{'BIGINT' if n in ints else 'VARCHAR'}}'" for n in names)
    def via_duckdb(raw, file):
        query = (f"select * from read_json('{{file}}', format='newline_delimited', "
                 f"columns={{{{{{columns}}}}}})")
        return con.sql(query).to_arrow_table().cast(EVENT_SCHEMA)
    candidates["duckdb"] = via_duckdb
except ImportError as err:
    missing["duckdb"] = str(err)

reference = via_pyarrow(body, body_file)
times = {{name: [] for name in candidates}}
for _ in range(repeats):  # alternating: each round runs every candidate once
    for name, parse in candidates.items():
        wall, cpu = time.perf_counter(), time.process_time()
        table = parse(body, body_file)
        times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
        assert table.num_rows == reference.num_rows
equal = {{name: parse(body, body_file).equals(reference) for name, parse in candidates.items()}}
lost = {{name: [] for name in candidates}}
for case, line in refused.items():
    raw = (line % {base} if "%s" in line else line).encode() + b"\n"
    case_file = os.path.join(tmp, "case.jsonl")
    open(case_file, "wb").write(raw)
    for name, parse in candidates.items():
        try:
            parse(raw, case_file)
        except Exception:
            continue
        lost[name].append(case)
out = {{}}
for name in candidates:
    out[name] = {{
        "seconds": statistics.median(t for t, _ in times[name]),
        "cpu_seconds": statistics.median(c for _, c in times[name]),
        "equal": equal[name],
        "accepts": lost[name],
    }}
print(json.dumps({{"candidates": out, "missing": missing, "load": os.getloadavg()[0]}}))
"""

_COLUMNAR = r"""
import io, json, os, statistics, tempfile, time
import pyarrow.json as pajson
from tracecanary.columnar_capture import write_columnar
from tracecanary.formats.trace import EVENT_SCHEMA
from tracecanary.ingest import ingest_files

path, repeats = {path!r}, {repeats}
tmp = tempfile.mkdtemp()
with open(path, "rb") as f:
    header = json.loads(f.readline())
    events = pajson.read_json(io.BytesIO(f.read()),
                              parse_options=pajson.ParseOptions(explicit_schema=EVENT_SCHEMA))
keep = [n for n in events.column_names if events.column(n).null_count < events.num_rows]
inputs = {{"jsonl": path}}
for name in ("capture.parquet", "capture.arrow"):
    inputs[name] = os.path.join(tmp, name)
    write_columnar(header, events.select(keep), inputs[name])
del events
times = {{k: [] for k in inputs}}
digests = {{k: set() for k in inputs}}
for _ in range(repeats):
    for name, src in inputs.items():
        wall, cpu = time.perf_counter(), time.process_time()
        result = ingest_files([src], os.path.join(tmp, "out.parquet"))
        times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
        digests[name].add(result.parquet_sha256)
out = {{name: {{"seconds": statistics.median(t for t, _ in v),
               "cpu_seconds": statistics.median(c for _, c in v)}} for name, v in times.items()}}
identical = len(set().union(*digests.values())) == 1
print(json.dumps({{"inputs": out, "identical": identical, "load": os.getloadavg()[0]}}))
"""


def make_input(events: int) -> str:
    from tracecanary.synth.decode import DecodeSpec, build_decode
    from tracecanary.trace_io import write_trace

    path = WORK / f"ingest_{events}.jsonl"
    if path.exists():
        return str(path)
    docs, _ = build_decode(DecodeSpec(ranks=4, events_per_rank=events // 4))
    doc = docs[0]
    doc["meta"]["clock_domains"] = [
        {"id": "hosta", "ranks": [0, 1]},
        {"id": "hostb", "ranks": [2, 3]},
    ]
    doc["meta"]["source"] = "bench: synth decode, 4 ranks in one file"
    doc["events"] = [e for d in docs for e in d["events"]]
    WORK.mkdir(parents=True, exist_ok=True)
    write_trace(doc, path)
    return str(path)


# One ingest in a fresh process, as ``tracecanary ingest`` or a workflow job runs it:
# "policy" applies what those entry points apply to their process (tracecanary.memory:
# no transparent huge pages); "old" swaps in the old reader.
_ONE_INGEST = r"""
import hashlib, json, os, resource, tempfile, time
path, reader, policy = {path!r}, {reader!r}, {policy!r}
if policy:
    from tracecanary.memory import avoid_huge_pages
    avoid_huge_pages()
from tracecanary import ingest
if reader == "old":
    from bench.bench_ingest import streaming_jsonl_batches
    ingest._jsonl_batches = streaming_jsonl_batches
out = os.path.join(tempfile.mkdtemp(), "x.parquet")
before = resource.getrusage(resource.RUSAGE_SELF)
wall = time.perf_counter()
result = ingest.ingest_files([path], out)
wall = time.perf_counter() - wall
after = resource.getrusage(resource.RUSAGE_SELF)
side = hashlib.sha256(open(ingest.sidecar_path(out), "rb").read()).hexdigest()
print(json.dumps({{
    "seconds": wall,
    "user": after.ru_utime - before.ru_utime,
    "system": after.ru_stime - before.ru_stime,
    "digest": [result.parquet_sha256, side],
    "load": os.getloadavg()[0],
}}))
"""

# (name, reader, policy): ingest as its commands run it, the old reader run the same
# way, and today's reader called as a library in a process that takes no policy
_INGEST_VARIANTS = (("new", "new", True), ("old", "old", True), ("library", "new", False))


def _ingest_row(path: str, events: int, repeats: int, source: str = "") -> dict:
    """Ingest of ``path`` in fresh processes (one ingest each, as a command runs it),
    the variants alternating in every round (the order rotated): events/s of today's
    reader beside the old path's, both under the entry points' process policy, and
    today's reader without it."""
    runs: dict[str, list[dict]] = {name: [] for name, _, _ in _INGEST_VARIANTS}
    peaks: dict[str, float] = {}
    for round_ in range(repeats):
        shift = round_ % len(_INGEST_VARIANTS)
        for name, reader, policy in _INGEST_VARIANTS[shift:] + _INGEST_VARIANTS[:shift]:
            code = _ONE_INGEST.format(path=path, reader=reader, policy=policy)
            figures, rss = run_child(code)
            runs[name].append(figures)
            peaks[name] = max(peaks.get(name, 0.0), rss)

    def median(name: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[name])

    identical = len({tuple(r["digest"]) for v in runs.values() for r in v}) == 1
    new, old, library = (median(n, "seconds") for n in ("new", "old", "library"))
    cpu = {n: median(n, "user") + median(n, "system") for n in runs}
    system = {n: median(n, "system") for n in runs}
    loads = [r["load"] for v in runs.values() for r in v]
    rate = events / new
    return row(
        f"ingest {source + ' ' if source else ''}{events:,}-event JSONL "
        "(validate+normalize+Parquet), one per fresh process",
        round(rate),
        "events/s",
        "the old path (pyarrow's streaming JSON reader), same process policy, alternating",
        round(events / old),
        round(old / new, 2),
        ">= 1,000,000 events/s",
        rate >= 1_000_000 and identical,
        round(peaks["new"], 1),
        f"median of {repeats} rounds, wall inside the process (imports excluded); CPU per "
        f"run (user+system, all threads): ours {cpu['new']:.2f} s (system {system['new']:.2f}),"
        f" old {cpu['old']:.2f} s (system {system['old']:.2f}); ours called as a library "
        f"without the process policy (huge pages left on): {events / library:,.0f} events/s, "
        f"CPU {cpu['library']:.2f} s (system {system['library']:.2f}); old path peak RSS "
        f"{peaks['old']:.0f} MiB; Parquet and sidecar identical in every run: {identical}; "
        f"load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores",
    )


def _plain_json_row(path: str, events: int) -> dict:
    """json.loads + pandas.DataFrame on the same lines (no validation), for scale."""
    plain, rss = run_child(
        f"""
import json, time
import pandas as pd
def load():
    with open({path!r}) as f:
        f.readline()
        return pd.DataFrame([json.loads(line) for line in f])
wall = time.perf_counter(); load(); print(json.dumps({{'seconds': time.perf_counter() - wall}}))
"""
    )
    return row(
        f"json.loads + pandas.DataFrame, {events:,}-event JSONL (no validation)",
        round(events / plain["seconds"]),
        "events/s",
        "",
        None,
        None,
        "(scale only)",
        None,
        round(rss, 1),
        "one run in a fresh process",
    )


def _columnar_rows(path: str, events: int, repeats: int) -> list[dict]:
    result, rss = run_child(_COLUMNAR.format(path=path, repeats=repeats))
    jsonl = result["inputs"].pop("jsonl")
    rows = []
    for name, figures in result["inputs"].items():
        rate = events / figures["seconds"]
        rows.append(
            row(
                f"columnar capture ({name.split('.')[-1]}) ingest, {events:,} events",
                round(rate),
                "events/s",
                "ingest of the same events as JSON Lines, alternating in one child",
                round(events / jsonl["seconds"]),
                round(jsonl["seconds"] / figures["seconds"], 2),
                ">= 1,000,000 events/s, same Parquet bytes",
                rate >= 1_000_000 and result["identical"],
                round(rss, 1),
                f"normalized Parquet identical to the JSONL ingest's: {result['identical']}; "
                f"CPU {figures['cpu_seconds']:.2f} s vs {jsonl['cpu_seconds']:.2f} s per run; "
                f"load average {result['load']:.1f} on {os.cpu_count()} cores",
            )
        )
    return rows


def _parser_rows(path: str, events: int, repeats: int) -> list[dict]:
    code = _CANDIDATES.format(path=path, repeats=repeats, refused=REFUSED_LINES, base=repr(_BASE))
    result, _ = run_child(code)
    today = result["candidates"]["pyarrow"]
    rows = []
    for name, figures in result["candidates"].items():
        rate = events / figures["seconds"]
        keeps = not figures["accepts"] or figures["accepts"] == today["accepts"]
        notes = (
            f"CPU {figures['cpu_seconds']:.2f} s vs pyarrow {today['cpu_seconds']:.2f} s; "
            f"table equals pyarrow's: {figures['equal']}; accepts what ingest must refuse: "
            f"{', '.join(figures['accepts']) or 'nothing'}; load average {result['load']:.1f} "
            f"on {os.cpu_count()} cores"
        )
        if name == "pyarrow" and result["missing"]:
            notes += "; not measured (not installed): " + "; ".join(
                f"{k} ({v})" for k, v in result["missing"].items()
            )
        rows.append(
            row(
                f"JSONL parser {name}, {events:,} events to the event table",
                round(rate),
                "events/s",
                "pyarrow.json (today's reader), alternating in one child",
                round(events / today["seconds"]),
                round(today["seconds"] / figures["seconds"], 2),
                "reference" if name == "pyarrow" else "faster than pyarrow, same table, refusals",
                None
                if name == "pyarrow"
                else bool(figures["equal"] and keeps and figures["seconds"] < today["seconds"]),
                None,
                notes,
            )
        )
    return rows


# A real program's capture: examples/user_programs/ddp_train.py (64 layers of width 16,
# one gradient bucket per layer) for 8,000 steps, recorded unmodified: ~1.02M events
RECORDED_DDP = ("8000", "--layers", "64", "--width", "16", "--bucket-mb", "0.0001")


def recorded_capture() -> tuple[str, int]:
    """(the JSON Lines of the recorded DDP capture, its events), recorded on first use
    (about 5 minutes on 2 cores) under ``WORK/recorded_ddp``."""
    import gzip
    import shutil
    import subprocess
    import sys

    from bench.common import REPO

    out, path = WORK / "recorded_ddp", WORK / "recorded_ddp.jsonl"
    if not path.exists():
        shutil.rmtree(out, ignore_errors=True)
        program = str(REPO / "examples" / "user_programs" / "ddp_train.py")
        subprocess.run(
            [sys.executable, "-m", "tracecanary", "capture", "-o", str(out), "--timeout",
             "3600", "--", sys.executable, program, *RECORDED_DDP],
            check=True, capture_output=True, cwd=REPO,
        )  # fmt: skip
        with gzip.open(out / "merged.jsonl.gz", "rb") as merged, open(path, "wb") as plain:
            shutil.copyfileobj(merged, plain)
    events = json.loads((out / "capture.json").read_text())["merged"]["events"]
    return str(path), events


def run(quick: bool) -> list[dict]:
    events = 200_000 if quick else 1_000_000
    path = make_input(events)
    repeats = 1 if quick else 5
    rows = [_ingest_row(path, events, repeats)]
    if not quick:  # several row groups: the encode of each overlaps the reading of the next
        rows.append(_ingest_row(make_input(4_000_000), 4_000_000, 3))
        recorded, recorded_events = recorded_capture()
        rows.append(_ingest_row(recorded, recorded_events, repeats, "a recorded DDP program's"))
    rows.append(_plain_json_row(path, events))
    rows += _columnar_rows(path, events, 1 if quick else 3)
    rows += _parser_rows(path, events, 1 if quick else 3)
    return rows


if __name__ == "__main__":
    print(json.dumps(run(quick=True), indent=1))
