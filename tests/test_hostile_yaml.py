"""YAML under the resource policy (issue 17, defect 6): one loader
(``tracecanary.limits.load_yaml``) for every YAML the package reads: backends,
tolerances, physical configurations and campaign configs. A "billion laughs" document
is exit 2 in bounded time and memory; so are deep nesting, oversized files, recursive
aliases, repeated keys and Python tags."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tracecanary.errors import InputError, ResourceLimitExceeded
from tracecanary.limits import load_yaml

SECONDS = 60  # refused after composing a few hundred nodes; 248 s was the defect
HEADROOM_BYTES = 256 << 20  # address space the refusal may add (the defect used 5.4 GB)


def billion_laughs(levels: int = 9, width: int = 9) -> str:
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels + 1):
        refs = ", ".join([f"*l{level - 1}"] * width)
        lines.append(f"l{level}: &l{level} [{refs}]")
    return "\n".join(lines) + "\n"


READERS = {
    "backends": "from tracecanary.sim.backends import load_backends as read",
    "tolerances": "from tracecanary.verify.behavior import load_tolerances as read",
    "physical": "from tracecanary.physical.config import load_configs as read",
    "campaign-config": "from tracecanary.campaign.config_check import "
    "refuse_evaluating_config as read",
}


def _run_capped(reader: str, path: Path) -> dict:
    """Call one real reader on ``path`` in a child whose address space is capped at what
    it uses after imports plus HEADROOM_BYTES; report how it ended."""
    script = f"""
import json, resource, sys
{READERS[reader]}
from tracecanary.errors import TraceCanaryError
with open("/proc/self/statm") as f:
    used = int(f.read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (used + {HEADROOM_BYTES}, used + {HEADROOM_BYTES}))
try:
    read({str(path)!r})
    print(json.dumps({{"ended": "accepted"}}))
except TraceCanaryError as err:
    print(json.dumps({{"ended": type(err).__name__, "exit": err.exit_code, "line": err.one_line()}}))
"""
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=SECONDS
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_billion_laughs_yaml_is_exit_2_in_bounded_time_and_memory(tmp_path, reader):
    path = tmp_path / "laughs.yaml"
    path.write_text(billion_laughs())
    assert path.stat().st_size < 4096
    ended = _run_capped(reader, path)
    assert ended["ended"] == "ResourceLimitExceeded" and ended["exit"] == 2, ended
    assert "max_yaml_nodes" in ended["line"] and str(path) in ended["line"]


def test_many_aliases_to_a_small_node_are_refused_by_count(tmp_path):
    path = tmp_path / "aliases.yaml"
    path.write_text("a: &a 1\nb: [" + ", ".join(["*a"] * 2000) + "]\n")
    with pytest.raises(ResourceLimitExceeded, match="max_yaml_aliases"):
        load_yaml(path)


def test_deep_yaml_nesting_is_refused_before_recursion(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ResourceLimitExceeded, match="max_depth"):
        load_yaml(path)


def test_an_oversized_yaml_file_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACECANARY_LIMITS", "max_yaml_bytes=1000")
    path = tmp_path / "big.yaml"
    path.write_text("a: " + "x" * 2000 + "\n")
    with pytest.raises(ResourceLimitExceeded, match="max_yaml_bytes=1000"):
        load_yaml(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: &a [*a]\n", "recursive YAML alias"),
        ("a: 1\nb: 2\na: 3\n", re.escape("duplicate key 'a' (line 3)")),
        ("a: !!python/object/apply:os.system [id]\n", "could not determine a constructor"),
        ("a: [1, 2\n", re.escape("not valid YAML (line 2)")),
        (b"a: \xff\n", "not UTF-8"),
    ],
    ids=["recursive-alias", "duplicate-key", "python-tag", "syntax", "not-utf8"],
)
def test_bad_yaml_is_one_input_error_naming_the_file(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(InputError, match=message) as caught:
        load_yaml(path)
    assert caught.value.file == str(path)


def test_a_fifo_in_place_of_a_yaml_file_is_refused_without_blocking(tmp_path):
    import os

    os.mkfifo(tmp_path / "pipe.yaml")
    with pytest.raises(InputError, match="not a regular file"):
        load_yaml(tmp_path / "pipe.yaml")


def test_anchors_and_merge_keys_within_limits_still_load(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("base: &b {x: 1}\none: {<<: *b, y: 2}\nlist: [*b, *b]\n")
    assert load_yaml(path) == {
        "base": {"x": 1},
        "one": {"x": 1, "y": 2},
        "list": [{"x": 1}, {"x": 1}],
    }


YAML_READS = re.compile(r"yaml\.(safe_|full_|unsafe_)?load|yaml\.(compose|parse|scan)|Loader\b")


def test_no_module_of_the_package_reads_yaml_around_the_bounded_loader():
    src = Path(__file__).resolve().parents[1] / "src" / "tracecanary"
    offenders = [
        str(p.relative_to(src))
        for p in src.rglob("*.py")
        if p.name != "limits.py" and YAML_READS.search(p.read_text())
    ]
    assert offenders == []
