"""Hostile inputs of issue 41 (items 2, 4-11): each case feeds the bad input to the real
command and pins the exit code, the one error line, and that nothing was written,
replaced or deleted."""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracecanary.cli import build_parser, main

CLI = [sys.executable, "-m", "tracecanary"]


def _snapshot(folder):
    """Every entry under ``folder`` with its bytes (None for a directory)."""
    return sorted(
        (p.relative_to(folder).as_posix(), p.read_bytes() if p.is_file() else None)
        for p in folder.rglob("*")
    )


def _float_options(parser, name=""):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _float_options(sub, f"{name} {sub_name}".strip())
        elif action.type is float and action.option_strings:
            yield name, action.option_strings[-1]


# item 7: --timeout nan / inf passed the <= 0 check


def test_every_float_option_of_every_command_refuses_nan_and_infinities(capsys):
    options = list(_float_options(build_parser()))
    assert ("capture", "--timeout") in options and ("sweep", "--timeout") in options
    for command, option in options:
        for text in ("nan", "inf", "-inf", "NaN", "1e999"):
            with pytest.raises(SystemExit) as refused:
                main([*command.split(), f"{option}={text}", "--help"])
            assert refused.value.code == 2, (command, option, text)
            err = capsys.readouterr().err
            assert f"argument {option}" in err and "not a finite number" in err, err


@pytest.mark.parametrize(
    "argv",
    [
        ["capture", "--timeout", "nan", "-o", "{out}", "--", sys.executable, "-c", "{touch}"],
        ["capture", "--timeout", "inf", "-o", "{out}", "--", sys.executable, "-c", "{touch}"],
        ["replay-physical", "{program}", "--nproc", "2", "--timeout", "inf", "-o", "{out}"],
        ["sweep", "--collective", "all_reduce", "--nproc", "2", "--timeout=-inf", "-o", "{out}"],
    ],
)
def test_a_non_finite_timeout_is_refused_before_anything_runs(tmp_path, capsys, argv):
    marker = tmp_path / "the-program-ran"
    (tmp_path / "program").mkdir()
    values = {
        "out": str(tmp_path / "out"),
        "touch": f"open({str(marker)!r}, 'w')",
        "program": str(tmp_path / "program"),
    }
    before = _snapshot(tmp_path)
    with pytest.raises(SystemExit) as refused:
        main([a.format(**values) for a in argv])
    assert refused.value.code == 2
    assert "--timeout" in capsys.readouterr().err
    assert _snapshot(tmp_path) == before and not marker.exists()


# item 10: an anchor repeated inside its own node is PyYAML's refusal

NESTED_DUPLICATE_ANCHOR = "a: &x\n  b: &x 1\nc: *x\n"


def test_a_backends_file_with_a_nested_duplicate_anchor_is_pyyamls_refusal(tmp_path):
    from conftest import small_trace, write_doc

    trace = write_doc(small_trace(), tmp_path / "trace.json")
    backends = tmp_path / "backends.yaml"
    backends.write_text(NESTED_DUPLICATE_ANCHOR)
    before = _snapshot(tmp_path)
    cmd = [*CLI, "replay", str(trace), "--backends", str(backends), "-o", str(tmp_path / "r.json")]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert str(backends) in run.stderr and "found duplicate anchor" in run.stderr
    assert _snapshot(tmp_path) == before


# items 2 and 11: JSON Lines lines


def _jsonl_header() -> str:
    from conftest import small_trace

    return json.dumps({k: v for k, v in small_trace().items() if k != "events"})


def _run_measured(argv, *, timeout=60):
    """Run the CLI in a fresh process; (exit code, stderr, seconds, peak RSS in MiB). The
    peak is the process's own (VmHWM, reset by exec): getrusage's ru_maxrss keeps the
    forking test worker's resident size across exec, whatever the command used."""
    probe = (
        "import sys\n"
        "from tracecanary.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
        "print(int(hwm.split()[1]) // 1024)\n"
        "sys.exit(code)\n"
    )
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-c", probe, *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return run.returncode, run.stderr, time.monotonic() - started, int(run.stdout.split()[-1])


def test_a_jsonl_line_of_hundreds_of_megabytes_is_refused_quickly_in_little_memory(tmp_path):
    from tracecanary.ingest import MAX_LINE_BYTES

    line_bytes = 8 * MAX_LINE_BYTES  # 256 MiB of "aaaa...", about 250 KB compressed
    path = tmp_path / "long-line.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(_jsonl_header().encode() + b'\n{"rank":0,"seq":0,"op":"')
        block = b"a" * (1 << 20)
        for _ in range(line_bytes >> 20):
            out.write(block)
    before = _snapshot(tmp_path)
    code, err, seconds, peak_mib = _run_measured(["ingest", path, "-o", tmp_path / "t.parquet"])
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1
    assert f"{path}: record 0: a line of more than {MAX_LINE_BYTES} bytes" in err
    assert _snapshot(tmp_path) == before
    assert seconds < 20 and peak_mib < 200 + 2 * (MAX_LINE_BYTES >> 20), (seconds, peak_mib)


@pytest.mark.parametrize("between", [" ", "", "\t "])
def test_two_json_objects_on_one_jsonl_line_are_refused_naming_the_line(tmp_path, between):
    from conftest import small_trace

    events = [json.dumps(e) for e in small_trace()["events"]]
    body = [*events[:2], events[2] + between + events[3], *events[4:]]
    path = tmp_path / "two-on-a-line.jsonl"
    path.write_text("\n".join([_jsonl_header(), *body]) + "\n")
    before = _snapshot(tmp_path)
    code, err, _, _ = _run_measured(["ingest", path, "-o", tmp_path / "t.parquet"])
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1
    assert f"{path}: record 2:" in err and "Extra data" in err, err
    assert _snapshot(tmp_path) == before


def test_blank_lines_between_jsonl_events_still_ingest(tmp_path):
    from conftest import small_trace

    events = [json.dumps(e) for e in small_trace()["events"]]
    path = tmp_path / "blank-lines.jsonl"
    path.write_text("\n".join([_jsonl_header(), events[0], "", " \t", *events[1:], ""]) + "\n\n")
    code, err, _, _ = _run_measured(["ingest", path, "-o", tmp_path / "t.parquet"])
    assert code == 0, err


def test_a_jsonl_header_line_over_the_document_limit_is_refused_before_it_is_parsed(
    tmp_path, monkeypatch
):
    path = tmp_path / "long-header.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(b'{"format":"tracecanary.trace/v1","meta":{"source":"' + b"a" * (8 << 20))
    before = _snapshot(tmp_path)
    monkeypatch.setenv("TRACECANARY_LIMITS", "max_json_document_bytes=1048576")
    code, err, seconds, _ = _run_measured(["ingest", path, "-o", tmp_path / "t.parquet"])
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1
    assert f"{path}: record header: the header line is over max_json_document_bytes" in err
    assert _snapshot(tmp_path) == before and seconds < 20


# item 4: an output that is, or holds, an input

DECODE_SMALL = Path(__file__).resolve().parents[1] / "resources" / "decode-small"
RANKS = [f"rank{r}.jsonl.gz" for r in range(4)]


@pytest.fixture
def decode_set(tmp_path, monkeypatch):
    """resources/decode-small copied into tmp_path (the working directory)."""
    for name in [*RANKS, "calibration.json"]:
        shutil.copyfile(DECODE_SMALL / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    "argv",
    [
        ["calibrate-clocks", "-o", "rank0.jsonl.gz", *RANKS],
        ["merge", *RANKS, "--calibration", "calibration.json", "-o", "rank2.jsonl.gz"],
        ["merge", *RANKS, "--calibration", "calibration.json", "-o", "calibration.json"],
        ["replay", "rank0.jsonl.gz", "-o", "rank0.jsonl.gz"],
        ["compile", "rank1.jsonl.gz", "--lossless", "-o", "./rank1.jsonl.gz"],
        [
            "compile",
            "rank1.jsonl.gz",
            "--lossless",
            "-o",
            "c.json",
            "--diagnostics-json",
            "rank1.jsonl.gz",
        ],
        ["ingest", "rank3.jsonl.gz", "-o", "{tmp}/sub/../rank3.jsonl.gz"],
        ["export-param", "sub/rank3.jsonl.gz", "-o", "sub", "--force"],
        ["export-param", "{tmp}/sub/rank3.jsonl.gz", "-o", "{tmp}/sub/", "--force"],
        ["replay", "rank2.jsonl.gz", "-o", "hardlink.json"],
        ["replay", "rank2.jsonl.gz", "-o", "symlink.json"],
    ],
)
def test_an_output_that_is_or_holds_an_input_is_refused_and_the_input_kept(decode_set, argv):
    (decode_set / "sub").mkdir()
    shutil.copyfile(decode_set / "rank3.jsonl.gz", decode_set / "sub" / "rank3.jsonl.gz")
    os.link(decode_set / "rank2.jsonl.gz", decode_set / "hardlink.json")
    os.symlink(decode_set / "rank2.jsonl.gz", decode_set / "symlink.json")
    before = _snapshot(decode_set)
    argv = [a.format(tmp=decode_set) for a in argv]
    code, err, _, _ = _run_measured(argv)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert "refusing to write over an input" in err and ("is the input" in err or "contains" in err)
    assert _snapshot(decode_set) == before


def test_an_output_beside_its_inputs_is_still_written(decode_set, run_cli):
    code, _, err = run_cli("calibrate-clocks", "-o", "clocks.json", *RANKS)
    assert code == 0, err
    assert (decode_set / "clocks.json").is_file()


# item 5: merge applies calibrate-clocks' happens-before check


def _shift_rank(path, hours: int = 1) -> None:
    """Add ``hours`` to every ts_ns of a JSON Lines capture, in place."""
    with gzip.open(path, "rt") as f:
        header, *events = f.read().splitlines()
    shifted = [header]
    for line in events:
        event = json.loads(line)
        event["ts_ns"] += hours * 3600 * 10**9
        shifted.append(json.dumps(event))
    with gzip.open(path, "wt") as f:
        f.write("\n".join(shifted) + "\n")


def test_merge_refuses_a_rank_shifted_by_an_hour_as_calibrate_clocks_does(decode_set, run_cli):
    _shift_rank(decode_set / "rank2.jsonl.gz")  # rank 3 shares its clock (hostb)
    before = _snapshot(decode_set)
    code, _, refused_by_calibration = run_cli("calibrate-clocks", *RANKS, "-o", "c.json")
    assert code == 2 and "impossible ordering on one clock" in refused_by_calibration
    code, _, err = run_cli(
        "merge", *RANKS, "--calibration", "calibration.json", "-o", "merged.jsonl.gz"
    )
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1
    assert "impossible ordering on one clock: rank 3 seq 4" in err and "field latency_ns" in err
    assert _snapshot(decode_set) == before


def test_merge_refuses_a_calibration_of_other_captures_and_takes_their_own(decode_set, run_cli):
    for name in ("rank2.jsonl.gz", "rank3.jsonl.gz"):  # all of clock hostb, an hour later
        _shift_rank(decode_set / name)
    before = _snapshot(decode_set)
    code, _, err = run_cli(
        "merge", *RANKS, "--calibration", "calibration.json", "-o", "merged.jsonl.gz"
    )
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1
    assert "rank0.jsonl.gz: record ranks 0,3: field ts_ns: the calibration puts rank 0" in err
    assert "beyond its uncertainty of 250 ns: impossible ordering" in err
    assert _snapshot(decode_set) == before
    assert run_cli("calibrate-clocks", *RANKS, "-o", "own.json")[0] == 0
    code, _, err = run_cli("merge", *RANKS, "--calibration", "own.json", "-o", "merged.json")
    assert code == 0 and "skew known" in err


# item 6: long lists of reports and canaries are checked item by item


@pytest.fixture(scope="module")
def isolated_report(tmp_path_factory):
    from conftest import small_trace, write_doc

    folder = tmp_path_factory.mktemp("report")
    trace = write_doc(small_trace(), folder / "trace.json")
    assert main(["replay", str(trace), "--isolated", "-o", str(folder / "report.json")]) == 0
    return json.loads((folder / "report.json").read_text())


def _long_configs(doc, last):
    doc["protocol"]["configs"] += [f"extra_{i}" for i in range(70)] + [last]


def _long_ablations(doc, last):
    doc["protocol"]["ablations"]["applied"] = ["skew", "overlap", "order"] + [last] * 70


def _long_times(doc, last):
    block = next(iter(doc["configs"].values()))["isolated"]
    block["time_ns"] = [float(i) + 0.5 for i in range(80)] + [last]


REPORT_MUTATIONS = {
    "a config name that is a path": (_long_configs, "../x"),
    "a config name twice": (_long_configs, "extra_3"),
    "an ablation outside the vocabulary": (_long_ablations, "bogus"),
    "a negative isolated time": (_long_times, -1.5),
}


@pytest.mark.parametrize("case", sorted(REPORT_MUTATIONS))
def test_the_skeleton_refuses_every_bad_item_jsonschema_refuses(isolated_report, case):
    import copy

    from tracecanary.errors import SchemaError
    from tracecanary.formats.schemas import jsonschema_validator, load_schema, validate
    from tracecanary.formats.skeleton import skeleton

    doc = copy.deepcopy(isolated_report)
    mutate, last = REPORT_MUTATIONS[case]
    mutate(doc, last)
    assert not jsonschema_validator(load_schema("report")).is_valid(doc)
    with pytest.raises(SchemaError):
        validate(skeleton(doc), "report", file="report.json")


@pytest.mark.parametrize("case", sorted(REPORT_MUTATIONS))
def test_compare_refuses_a_report_with_one_bad_item_in_a_long_list(tmp_path, isolated_report, case):
    good = tmp_path / "baseline.json"
    good.write_text(json.dumps(isolated_report))
    doc = json.loads(json.dumps(isolated_report))
    mutate, last = REPORT_MUTATIONS[case]
    mutate(doc, last)
    bad = tmp_path / "candidate.json"
    bad.write_text(json.dumps(doc))
    before = _snapshot(tmp_path)
    code, err, _, _ = _run_measured(["compare", good, bad, "-o", tmp_path / "verdict.json"])
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1
    assert f"{bad}: field " in err and "verdict" not in err
    assert _snapshot(tmp_path) == before


def test_a_long_valid_list_still_passes_and_keeps_its_length_class(isolated_report):
    import copy

    from tracecanary.formats.schemas import validate
    from tracecanary.formats.skeleton import SKELETON_MIN, skeleton

    doc = copy.deepcopy(isolated_report)
    _long_configs(doc, "extra_last")
    _long_times(doc, 7.0)
    validate(skeleton(doc), "report", file="report.json")
    assert len(skeleton(doc["protocol"]["configs"])) > SKELETON_MIN


_LIST_SCHEMAS = [
    {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "uniqueItems": True},
    {"type": "array", "items": {"enum": ["a", "b", True, None]}},
    {"type": "array", "items": {"type": "integer", "minimum": 0}, "maxItems": 64},
    {"type": "array", "items": {"type": "number", "exclusiveMinimum": 0, "maximum": 1000}},
    {"type": "array", "items": {"type": ["integer", "null"]}, "uniqueItems": True},
    {
        "type": "array",
        "items": {"type": "array", "items": {"type": "integer", "minimum": 0}, "maxItems": 3},
        "uniqueItems": True,
    },
    {"type": "array", "items": {"type": "array", "uniqueItems": True}},
]


@given(
    items=st.lists(
        st.one_of(
            st.sampled_from(["a", "b", "c", "../x", "", True, False, None]),
            st.integers(-3, 2000),
            st.floats(-2, 1001, allow_nan=False).map(lambda x: round(x, 1)),
        ),
        min_size=65,
        max_size=140,
    ),
    vectors=st.lists(st.lists(st.integers(-1, 5), max_size=4), min_size=65, max_size=100),
)
@settings(max_examples=150, deadline=None)
def test_the_skeleton_of_a_long_list_is_valid_exactly_when_the_list_is(items, vectors):
    from tracecanary.formats.schemas import jsonschema_validator
    from tracecanary.formats.skeleton import skeleton

    for schema in _LIST_SCHEMAS:
        validator = jsonschema_validator(
            {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
        )
        for doc in (items, vectors, sorted(i for i in items if type(i) is int)):
            assert validator.is_valid(skeleton(doc)) == validator.is_valid(doc), (schema, doc)


# items 8 and 9: capture -- CMD checks its output first, keeps recordings on failure and
# reads only regular, size-capped rank<N>.json files


def _kept_recordings(err: str) -> Path:
    """The staging directory a failed capture names (removed by the caller's test)."""
    marker = "the per-rank recordings are kept in "
    assert marker in err, err
    return Path(err.split(marker, 1)[1].split()[0].rstrip(";"))


def test_capture_refuses_a_non_empty_output_before_the_program_runs(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("someone's notes")
    marker = tmp_path / "the-program-ran"
    before = _snapshot(tmp_path)
    touch = f"open({str(marker)!r}, 'w')"
    code, err, _, _ = _run_measured(["capture", "-o", out, "--", sys.executable, "-c", touch])
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1
    assert f"{out}: field output: is an existing non-empty directory" in err
    assert not marker.exists() and _snapshot(tmp_path) == before


def _leave_in_record_dir(tmp_path, code: str) -> list[str]:
    """A capture of a program that only runs ``code`` with ``d`` its record directory."""
    program = f"import os, pathlib\nd = pathlib.Path(os.environ['TRACECANARY_RECORD_DIR'])\n{code}"
    return [
        "capture",
        "-o",
        tmp_path / "out",
        "--timeout",
        "20",
        "--",
        sys.executable,
        "-c",
        program,
    ]


_VALID_RANK0 = json.dumps(
    {
        "format": "tracecanary.trace/v1",
        "meta": {"world_size": 1, "source": "test"},
        "groups": [{"id": "world", "ranks": [0]}],
        "events": [
            {
                "rank": 0,
                "seq": 0,
                "op": "all_reduce",
                "bytes": 8,
                "dtype": "float32",
                "group": "world",
                "ts_ns": 1,
            }
        ],
    }
)

RECORD_DIR_CASES = {
    "a name that is no rank number": (
        "(d / 'rank_x.json').write_text('{}')",
        "rank_x.json: is not a file the recorder writes",
    ),
    "a FIFO": ("os.mkfifo(d / 'rank9.json')", "rank9.json: is a FIFO in the recording directory"),
    "a symlink to /dev/zero": (
        "os.symlink('/dev/zero', d / 'rank0.json')",
        "rank0.json: is a symlink in the recording directory",
    ),
    "a sparse 3 GiB file": (
        "f = open(d / 'rank0.json', 'wb'); f.truncate(3 << 30); f.close()",
        "rank0.json: is 3221225472 bytes, over max_json_document_bytes=",
    ),
    "a stray file": ("(d / 'notes.txt').write_text('x')", "notes.txt: is not a file the recorder"),
}


@pytest.mark.parametrize("case", sorted(RECORD_DIR_CASES))
def test_capture_reads_only_regular_size_capped_rank_files_from_its_record_dir(tmp_path, case):
    code_to_run, message = RECORD_DIR_CASES[case]
    before = _snapshot(tmp_path)
    code, err, seconds, peak_mib = _run_measured(_leave_in_record_dir(tmp_path, code_to_run))
    kept = _kept_recordings(err)
    shutil.rmtree(kept)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert f"{kept}/{message}" in err
    assert _snapshot(tmp_path) == before
    assert seconds < 20 and peak_mib < 500, (seconds, peak_mib)


def test_a_capture_that_fails_after_recording_keeps_the_recordings_and_says_where(tmp_path):
    bad_rank = _VALID_RANK0.replace('"all_reduce"', '"all_reduce_v2"')
    argv = _leave_in_record_dir(tmp_path, f"(d / 'rank0.json').write_text({bad_rank!r})")
    before = _snapshot(tmp_path)
    code, err, _, _ = _run_measured(argv)
    kept = _kept_recordings(err)
    try:
        assert code == 2, err
        assert len(err.strip().splitlines()) == 1
        assert "all_reduce_v2" in err
        assert (kept / "rank0.json").read_text() == bad_rank
        assert _snapshot(tmp_path) == before
    finally:
        shutil.rmtree(kept)


def test_a_capture_that_records_nothing_leaves_no_staging_directory(tmp_path):
    code, err, _, _ = _run_measured(_leave_in_record_dir(tmp_path, "pass"))
    assert code == 1 and "recorded no collectives" in err
    assert "kept in" not in err


def test_the_recorded_programs_own_arguments_are_not_inputs_of_capture(tmp_path):
    out = tmp_path / "out"
    out.mkdir()  # the program is told to write there too, as a training's --logdir
    argv = ["capture", "-o", out, "--", sys.executable, "-c", "import sys", out]
    code, err, _, _ = _run_measured(argv)
    assert code == 1 and "recorded no collectives" in err, err
