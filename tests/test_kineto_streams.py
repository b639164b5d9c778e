"""A gloo event's stream names its process group, not the run-loop thread that ran it:
gloo's two run-loop threads take a group's work in turn, so a thread-named stream made
each training step look different to the compiler. The threads stay as group evidence in
``meta.kineto.group_threads``. Synthetic single-rank traces built here."""

from __future__ import annotations

from tracecanary.formats.schemas import validate
from tracecanary.kineto import convert
from tracecanary.kineto.evidence import GROUP_THREADS_KEY, gloo_stream, is_gloo_stream

BASE_NS = 1_790_857_026_000_000_000
CALLER_TID = 100
RUNLOOP_TIDS = (101, 102)


def _gloo_all_reduce(ts_us: float, work_tid: int, elements: int) -> list[dict]:
    """A c10d all_reduce on the calling thread and its gloo work on a run-loop thread."""
    return [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "c10d::allreduce_",
            "pid": 1,
            "tid": CALLER_TID,
            "ts": ts_us,
            "dur": 5.0,
            "args": {
                "Input Dims": [[[elements]], [], [], [], [], []],
                "Input type": ["TensorList", "", "", "", "Scalar", "Scalar"],
                "Concrete Inputs": ["", "", "", "", "False", "-1"],
            },
        },
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "gloo:all_reduce",
            "pid": 1,
            "tid": work_tid,
            "ts": ts_us + 10.0,
            "dur": 5.0,
            "args": {"Input Dims": [[elements]], "Input type": ["float"]},
        },
    ]


def _trace(steps: int) -> dict:
    """``steps`` steps of two all_reduces (two bucket sizes) whose work lands on the
    run-loop threads in a different order every step, as gloo's threads do."""
    events: list[dict] = []
    for step in range(steps):
        first, second = RUNLOOP_TIDS if step % 3 else RUNLOOP_TIDS[::-1]
        events += _gloo_all_reduce(1000.0 * step, first, 256)
        events += _gloo_all_reduce(1000.0 * step + 400.0, second, 1024)
    pg_config = [
        {
            "pg_name": "0",
            "pg_desc": "default_pg",
            "backend_config": "cpu:gloo",
            "pg_size": 2,
            "ranks": [0, 1],
        }
    ]
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "gloo", "rank": 0, "world_size": 2, "pg_config": pg_config},
        "traceEvents": events,
        "baseTimeNanoseconds": BASE_NS,
    }


def test_gloo_stream_names_the_process_group_whatever_thread_ran_the_work():
    doc = convert(_trace(6), file="gloo.json")
    validate(doc, "trace", file="gloo.json")
    events = doc["events"]
    assert len(events) == 12
    assert {e["stream"] for e in events} == {gloo_stream("0")}
    # so every step has the same signature sequence, though the threads swapped
    steps = [tuple((e["bytes"], e["stream"]) for e in events[i : i + 2]) for i in (0, 2, 4, 6)]
    assert len(set(steps)) == 1


def test_gloo_run_loop_threads_are_kept_as_group_evidence_outside_the_stream():
    doc = convert(_trace(6), file="gloo.json")
    assert doc["meta"]["kineto"][GROUP_THREADS_KEY] == {"0": list(RUNLOOP_TIDS)}
    assert not any(str(tid) in e["stream"] for e in doc["events"] for tid in RUNLOOP_TIDS)


def test_gloo_stream_helpers_recognise_only_their_own_streams():
    assert is_gloo_stream(gloo_stream("unknown:gloo-thread-unattributed"))
    assert not is_gloo_stream("cuda:0/stream:7")
    assert not is_gloo_stream(None)
