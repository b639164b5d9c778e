"""Several Kineto inputs imported in worker processes: same documents, same first
error, as a one-by-one import."""

from __future__ import annotations

import json

from test_kineto_synthetic import kineto, nccl_call, write

from tracecanary.kineto import import_kineto_file
from tracecanary.kineto.batch import import_kineto_files


def rank_files(tmp_path, ranks: int = 3):
    return [
        write(tmp_path, kineto(nccl_call(10.0 + r, ext=4), rank=r, world=ranks), f"r{r}.json.gz")
        for r in range(ranks)
    ]


def test_workers_return_each_files_own_import_in_input_order(tmp_path):
    paths = rank_files(tmp_path)
    assert import_kineto_files(paths, jobs=2) == [import_kineto_file(p) for p in paths]


def test_cli_output_is_the_same_with_one_or_several_jobs(tmp_path, run_cli):
    paths = rank_files(tmp_path)
    outputs = {}
    for jobs in ("1", "3"):
        out = tmp_path / f"out{jobs}"
        code, _, err = run_cli("import-kineto", *paths, "--jobs", jobs, "-o", out)
        assert code == 0, err
        outputs[jobs] = {p.name: p.read_bytes() for p in out.iterdir()}
    assert outputs["1"] == outputs["3"] and len(outputs["1"]) == 3


def test_the_first_failing_input_in_order_is_reported_whole(tmp_path, run_cli):
    good = rank_files(tmp_path, 2)
    bad_second = write(tmp_path, b"{not json", "bad1.json")
    bad_third = write(tmp_path, json.dumps({"traceEvents": []}).encode(), "bad2.json")
    out = tmp_path / "out"
    code, _, err = run_cli(
        "import-kineto", good[0], bad_second, bad_third, good[1], "--jobs", "2", "-o", out
    )
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(bad_second) in lines[0] and "not JSON" in lines[0], lines
    assert not out.exists()


def test_jobs_below_one_is_refused(tmp_path, run_cli):
    paths = rank_files(tmp_path, 2)
    code, _, err = run_cli("import-kineto", *paths, "--jobs", "0", "-o", tmp_path / "out")
    assert code == 2 and "--jobs" in err
