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


@pytest.fixture(params=["libyaml", "pure-python"])
def parser(request, monkeypatch):
    """The policy's loader on libyaml (CSafeLoader's parser) and, as where PyYAML was
    built without libyaml, on PyYAML's pure-Python parser."""
    import yaml

    from tracecanary import limits

    if request.param == "pure-python":
        monkeypatch.setattr(yaml, "__with_libyaml__", False)
    elif not yaml.__with_libyaml__:
        pytest.skip("PyYAML was built without libyaml")
    limits._bounded_yaml_loader.cache_clear()  # noqa: SLF001 - the class is built per parser
    yield request.param
    limits._bounded_yaml_loader.cache_clear()  # noqa: SLF001


def test_yaml_is_parsed_by_libyaml_where_pyyaml_has_it():
    import yaml

    from tracecanary import limits

    bases = limits._bounded_yaml_loader().__mro__  # noqa: SLF001
    assert any(base.__name__ == "CParser" for base in bases) == yaml.__with_libyaml__


def repository_yaml_files() -> list[Path]:
    repo = Path(__file__).resolve().parents[1]
    listed = subprocess.run(
        ["git", "ls-files", "*.yaml", "*.yml"], cwd=repo, capture_output=True, text=True,
        check=True,
    ).stdout.split()  # fmt: skip
    return [repo / name for name in listed]


def test_every_yaml_file_of_the_repository_loads_to_pyyaml_s_safe_value(parser):
    import yaml

    paths = repository_yaml_files()
    assert any(p.name == "backends.yaml" for p in paths)
    for path in paths:
        assert load_yaml(path) == yaml.safe_load(path.read_text(encoding="utf-8")), path


def test_every_alias_of_one_anchor_is_one_object(parser, tmp_path):
    path = tmp_path / "shared.yaml"
    path.write_text("a: &s shared text\nb: *s\nc: [x]\nd: &l [x]\ne: *l\n")
    doc = load_yaml(path)
    assert doc["b"] is doc["a"] and doc["e"] is doc["d"] and doc["c"] is not doc["d"]


def billion_laughs_in_block_sequences() -> str:
    lines = ["l0: &l0"] + ["  - lol"] * 9
    for i in range(1, 10):
        lines += [f"l{i}: &l{i}"] + [f"  - *l{i - 1}"] * 9
    return "\n".join(lines) + "\n"


REFUSED = {  # text, refusal, what its one line says
    "duplicate-key": ("a: 1\nb: 2\na: 3\n", InputError, "field a: duplicate key 'a' (line 3)"),
    "billion-laughs": (billion_laughs(), ResourceLimitExceeded, "over max_yaml_nodes=1000000"),
    "billion-laughs-in-block-sequences": (
        billion_laughs_in_block_sequences(), ResourceLimitExceeded, "max_yaml_nodes",
    ),
    "many-aliases": (
        "a: &a 1\nb: [" + ", ".join(["*a"] * 2000) + "]\n", ResourceLimitExceeded,
        "YAML alias references is 1001, over max_yaml_aliases=1000",
    ),
    "many-aliases-in-a-block-sequence": (
        "a: &a 1\nb:\n" + "  - *a\n" * 2000, ResourceLimitExceeded, "max_yaml_aliases=1000",
    ),
    "deep-block": (
        "".join(f"{' ' * i}k:\n" for i in range(80)) + " " * 80 + "k: leaf\n",
        ResourceLimitExceeded, "YAML nesting deeper than max_depth=64",
    ),
    "deep-flow": ("a: " + "[" * 100 + "]" * 100 + "\n", ResourceLimitExceeded, "max_depth=64"),
    "recursive-alias": ("a: &a\n  - *a\n", InputError, "recursive YAML alias"),
    "tab": ("a:\n\tb: 1\n", InputError, "not valid YAML (line 2): while scanning for the next"),
    "unclosed": ("a: [1, 2\n", InputError, "not valid YAML (line 2): while parsing a flow seq"),
    "two-values-on-one-line": ("a: b: c\n", InputError, "not valid YAML (line 1): mapping values"),
    "indentation": ("a:\n    b: 1\n  c: 2\n", InputError, "not valid YAML (line 3): while parsing"),
    "control-character": ("a: \x07\n", InputError, "not valid YAML: unacceptable character #x0007"),
    "undefined-alias": ("a: *nowhere\n", InputError, "(line 1): found undefined alias 'nowhere'"),
    "duplicate-anchor": (
        "a: &x\n  b: &x 1\nc: *x\n", InputError,
        "(line 2): found duplicate anchor 'x'; first occurrence (line 1), second occurrence",
    ),
    "python-tag": (
        "a: !!python/name:os.system\n", InputError,
        "(line 1): could not determine a constructor for the tag",
    ),
    "two-documents": ("a: 1\n---\nb: 2\n", InputError, "expected a single document"),
    "integer-too-long": ("a: 1" + "0" * 5000 + "\n", InputError, "not valid YAML: Exceeds the"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(REFUSED), ids=list(REFUSED))
def test_each_refusal_names_the_file_and_what_it_refuses(parser, tmp_path, case):
    text, refusal, words = REFUSED[case]
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(refusal) as caught:
        load_yaml(path)
    assert type(caught.value) is refusal and caught.value.exit_code == 2
    line = caught.value.one_line()
    assert line.startswith(f"{path}: ") and words in line, line


YAML_READS = re.compile(r"yaml\.(safe_|full_|unsafe_)?load|yaml\.(compose|parse|scan)|Loader\b")


def test_no_module_of_the_package_reads_yaml_around_the_bounded_loader():
    src = Path(__file__).resolve().parents[1] / "src" / "tracecanary"
    offenders = [
        str(p.relative_to(src))
        for p in src.rglob("*.py")
        if p.name != "limits.py" and YAML_READS.search(p.read_text())
    ]
    assert offenders == []
