"""The per-source timeline: source lanes beside the canary's executed occurrences, tail
windows, a straggler view; deterministic PNG bytes; refuses a canary of another source."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from conftest import REPO

from tracecanary.campaign.timeline import _tail_windows, write_timeline
from tracecanary.cli import main
from tracecanary.errors import InputError

ADVERSARIAL = REPO / "resources" / "traces" / "adversarial.json"


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def source_and_canary(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("timeline")
    table, canary = tmp / "adv.parquet", tmp / "canary.json"
    assert main(["ingest", str(ADVERSARIAL), "-o", str(table)]) == 0
    # reduced execution: 51 of the 100 occurrences execute, weighted
    argv = ["compile", str(table), "--lossless", "--max-executed-repeats", "1", "-o", str(canary)]
    assert main(argv) == 0
    return table, canary


def test_timeline_png_is_byte_identical_across_runs_and_wide_enough_to_read(
    source_and_canary, tmp_path
):
    table, canary = source_and_canary
    first, second = tmp_path / "a.png", tmp_path / "b.png"
    write_timeline(str(table), str(canary), str(first), source="adversarial")
    write_timeline(str(table), str(canary), str(second), source="adversarial")
    assert first.read_bytes() == second.read_bytes()
    width, height = png_size(first)
    assert width >= 1000 and height >= 700


def test_timeline_refuses_a_canary_of_another_source_and_leaves_no_file(
    source_and_canary, tmp_path
):
    table, _ = source_and_canary
    prefix = tmp_path / "prefix.json"  # a canary of the first 10 occurrences only
    assert main(["compile", str(table), "--prefix", "10", "--lossless", "-o", str(prefix)]) == 0
    out = tmp_path / "t.png"
    with pytest.raises(InputError, match="not a canary of this source"):
        write_timeline(str(table), str(prefix), str(out), source="adversarial")
    assert not out.exists()


def test_tail_windows_are_the_runs_of_consecutive_tail_occurrences():
    tail = np.array([0, 1, 1, 0, 0, 1, 0, 1, 1, 1], dtype=bool)
    assert [(int(a), int(b)) for a, b in _tail_windows(tail)] == [(1, 3), (5, 6), (7, 10)]
    assert _tail_windows(np.zeros(4, dtype=bool)) == []
