"""``yaml_subset`` answers exactly as PyYAML does under the policy, or declines.

``limits.parse_yaml_text`` returns the subset's value without importing PyYAML, so a
value PyYAML would not give (another type, ``1`` for ``True``, a copy where an alias
shares one object) or a document PyYAML would refuse changes what a command reads. These
tests hold the subset to ``limits._parse_yaml_text_pyyaml`` (PyYAML's safe loader under
the policy): on every YAML file of the repository, on thousands of generated documents
built from the constructs the subset reads and from near misses of them, under the
default limits and under tight ones, and on the refusals, which must keep PyYAML's
words."""

from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import same_yaml_value as same

from tracecanary import limits as limits_module
from tracecanary import yaml_subset
from tracecanary.errors import TraceCanaryError
from tracecanary.limits import Limits, parse_yaml_text

REPO = Path(__file__).resolve().parents[1]
DEFAULT = Limits()
TIGHT = [Limits(max_depth=6), Limits(max_yaml_aliases=3), Limits(max_yaml_nodes=60)]
DECLINED = yaml_subset.DECLINED


def subset(text: str, limits: Limits = DEFAULT):
    """The subset's value, or DECLINED; any other exception fails the calling test (the
    production entry point ``parse`` would turn it into a decline and hide it)."""
    try:
        return yaml_subset._parse(text, limits)  # noqa: SLF001
    except yaml_subset._Declined:  # noqa: SLF001
        return DECLINED


def pyyaml(text: str, limits: Limits = DEFAULT):
    return limits_module._parse_yaml_text_pyyaml(text, file="doc.yaml", limits=limits)  # noqa: SLF001


def sharing(value) -> list[int]:
    """For each container met walking ``value`` (each one entered once), the index of its
    first meeting: two values share objects alike when these lists are equal."""
    first: dict[int, int] = {}
    order: list[int] = []
    stack = [value]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict | list):
            continue
        seen = first.setdefault(id(node), len(order))
        order.append(seen)
        if seen == len(order) - 1:
            stack.extend(reversed(list(node.values()) if isinstance(node, dict) else node))
    return order


def repository_yaml_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "*.yaml", "*.yml"], cwd=REPO, capture_output=True, text=True,
        check=True,
    ).stdout.split()  # fmt: skip
    return [REPO / name for name in listed]


# ---------------------------------------------------------------------------------------
# (a) the repository's own YAML


def test_the_repository_has_the_yaml_files_the_subset_was_built_for():
    names = {p.relative_to(REPO).as_posix() for p in repository_yaml_files()}
    assert {
        "src/tracecanary/defaults/backends.yaml",
        "src/tracecanary/defaults/physical.yaml",
        "src/tracecanary/defaults/tolerances.yaml",
        "config/campaign.yaml",
        "environment.yml",
        "workflow/profiles/slurm/config.yaml",
    } <= names


@pytest.mark.parametrize(
    "path", repository_yaml_files(), ids=lambda p: p.relative_to(REPO).as_posix()
)
def test_every_yaml_file_of_the_repository_is_read_by_the_subset_as_pyyaml_reads_it(path):
    text = path.read_text(encoding="utf-8")
    got = subset(text)
    assert got is not DECLINED
    want = pyyaml(text)
    assert same(got, want)
    assert sharing(got) == sharing(want)


def test_every_alias_of_one_anchor_is_one_object_as_pyyaml_gives_it():
    text = (REPO / "src/tracecanary/defaults/backends.yaml").read_text()
    got = subset(text)
    platform = got["x-platform"]
    assert [c["candidates"] is platform for c in got["configs"].values()] == [
        True, True, True, True, False,
    ]  # fmt: skip
    shared = subset("a: &s shared text\nb: *s\nc: [x]\nd: &l [x]\ne: *l\n")
    assert shared["b"] is shared["a"] and shared["e"] is shared["d"]
    assert shared["c"] is not shared["d"]


def test_the_resolver_table_is_pyyaml_s_own():
    """The subset copies PyYAML's implicit resolvers (which tag a plain scalar gets);
    this pins the copy to the PyYAML installed, first character by first character."""

    mine = {
        first: [(tag, re.compile(pattern, flags)) for tag, pattern, flags in entries]
        for first, entries in yaml_subset._RESOLVERS.items()  # noqa: SLF001
    }
    loader = limits_module._bounded_yaml_loader()  # noqa: SLF001

    def table(resolvers):
        return {
            first: [(tag, regexp.pattern, regexp.flags) for tag, regexp in entries]
            for first, entries in resolvers.items()
        }

    assert table(mine) == table(loader.yaml_implicit_resolvers)
    assert yaml_subset._BOOLS == loader.bool_values  # noqa: SLF001


# ---------------------------------------------------------------------------------------
# (b) generated documents: agreement with PyYAML, or a decline

# plain scalars the subset must read (any of them may be a value)
SURE_SCALARS = [
    "ring", "LL128", "Simple", "a b", "a  b", "x-platform", "tracecanary.backends/v1",
    "2us", "1K", "64M", "../shared/x.txt", "-e .", "python>=3.11", "p50=3%,p95=5%",
    "NCCL_PROTO=^LL128 (LL128 disabled), otherwise", "a:b", "a#b", 'say "hi"', "it's",
    "_x", "(p)", "$HOME", "=x", "<x", "~x", "0", "7", "-3", "+5", "120", "-0", "0.5",
    "-1.25", "+2.0", "007.50", "-0.0", "true", "False", "TRUE", "yes", "No", "ON", "off",
    "null", "Null", "NULL", "~", "09", "1.2.3", "0xg", "1e", "y", "n", "nULL", "tRUE",
]  # fmt: skip
# the same in a flow collection (no comma, colon or bracket there)
FLOW_SURE = [s for s in SURE_SCALARS if not set(s) & set(",:#'\"[]{}?")]
# near misses: plain scalars the subset declines, or that are not plain scalars at all
NEAR_SCALARS = [
    ".inf", "-.Inf", ".NaN", "1e3", "1.0e+3", "1.5e3", "0x1F", "0o17", "0b101", "012",
    "1_000", "1.5_0", "1:30", "190:20:30.15", "2001-12-14", "2001-12-14 21:59:43.10 -5",
    "<<", "=", "1.", ".5", "-", "--x", "a: b", "a #b", "a:", ": a", "x,y", "[a]", "{a: 1}",
    "[a, [b]]", "{a: [b]}", "[a,]", "[ ]", "&x", "*x", "*nowhere", "!t", "!!str 1", "? k",
    "%x", "@x", "`x", "|", ">", ">+", "|2", "a\tb", "\u00e9t\u00e9", "- a", "#c", "'open",
    '"esc\\n"', "'q''q'", '"dq"', "''", '""', "a\\b", "[a, b]x", "'a'b", "'a'#c",
    "1" * 5000, "[" * 12 + "]" * 12, "\x07", "a\u2028b",
]  # fmt: skip
SURE_KEYS = ["a", "b", "key", "x-y", "p50", "mem_mb_per_cpu", "k.v", "A1", "_k", "Yes2"]
NEAR_KEYS = [
    "1", "yes", "on", "Off", "null", "~", "1.5", "<<", "a b", "'q'", '"q"', "-k", "2001-12-14",
    "=", "? x", "k ", "0x1F", "True", "k" * 1100,
]  # fmt: skip
QUOTED = ["''", '""', "'a b'", '"a b"', "'it''s'", "'1'", '"true"', "'#x'", '" spaced "']


class Gen:
    """Random YAML texts from the constructs the subset reads; ``near`` adds near misses
    (scalars, keys and layouts it must decline or read as PyYAML does)."""

    def __init__(self, rng: random.Random, near: bool) -> None:
        self.rng, self.near = rng, near
        self.anchors: list[str] = []
        self.count = 0
        self.lines: list[str] = []

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, sure: list[str], near: list[str]) -> str:
        return self.rng.choice(near if self.near and self.chance(0.15) else sure)

    def key(self, used: set[str]) -> str:
        while True:
            key = self.pick(SURE_KEYS, NEAR_KEYS) + (
                str(self.rng.randrange(3)) if self.chance(0.5) else ""
            )
            if key not in used or (self.near and self.chance(0.2)):  # a repeated key
                used.add(key)
                return key

    def tail(self) -> str:
        """What may end a line: nothing, spaces, a comment."""
        r = self.rng.random()
        if r < 0.15:
            return "  # a comment: with [brackets], 'quotes' & *stars"
        if r < 0.25:
            return " " * self.rng.randint(1, 3)
        if self.near and r < 0.28:
            return "#tight"
        return ""

    def flow(self) -> str:
        def scalar() -> str:
            return (
                self.rng.choice(QUOTED) if self.chance(0.1) else self.pick(FLOW_SURE, NEAR_SCALARS)
            )

        sp = " " * self.rng.randint(0, 2)
        if self.chance(0.5):
            items = [scalar() for _ in range(self.rng.randint(0, 4))]
            return "[" + sp + ("," + sp).join(items) + "]"
        used: set[str] = set()
        items = [f"{self.key(used)}: {scalar()}" for _ in range(self.rng.randint(0, 4))]
        return "{" + sp + ("," + sp).join(items) + "}"

    def inline(self) -> str:
        """A value written on its own line: scalar, quoted, flow or alias, maybe anchored."""
        r = self.rng.random()
        if r < 0.5:
            value = self.pick(SURE_SCALARS, NEAR_SCALARS)
        elif r < 0.6:
            value = self.rng.choice(QUOTED)
        elif r < 0.8:
            value = self.flow()
        elif self.anchors:
            return "*" + self.rng.choice(self.anchors)
        else:
            value = "plain"
        if self.chance(0.15):
            name = self.anchor()
            value = f"&{name} {value}"
            self.anchors.append(name)
        return value

    def anchor(self) -> str:
        """A new anchor name (an alias may use it once its node is written)."""
        self.count += 1
        if self.near and self.anchors and self.chance(0.1):
            return self.anchors[0]  # an anchor defined twice
        return f"n{self.count}"

    def value(self, head: str, indent: int, depth: int, parent: int) -> None:
        """Write ``head`` (``key:`` or ``-``) and its value at ``indent``; ``parent`` is the
        indentation a nested block must exceed."""
        r = self.rng.random()
        if depth > 0 and r < 0.3:
            name = self.anchor() if self.chance(0.2) else None
            anchor = f" &{name}" if name else ""
            self.lines.append(f"{' ' * indent}{head}{anchor}{self.tail()}")
            step = self.rng.randint(1, 4)
            if self.near and self.chance(0.1):
                step = 0  # a nested block at its key's indentation
            self.block(parent + step, depth - 1)
            if name:
                self.anchors.append(name)
        elif r < 0.38:
            style = self.rng.choice(
                [">-", ">", "|", "|-"] + ([">+", "|2", "|+"] if self.near else [])
            )
            self.lines.append(f"{' ' * indent}{head} {style}{self.tail()}")
            body = parent + self.rng.randint(1, 3)
            for _ in range(self.rng.randint(1, 3)):
                line = " " * body + self.rng.choice(
                    ["some text", "# not a comment", "x: y", "a  b "]
                )
                if self.near and self.chance(0.1):
                    line = self.rng.choice(["", " " * (body + 2), " " * (body + 2) + "deeper"])
                self.lines.append(line)
        elif r < 0.42:
            self.lines.append(f"{' ' * indent}{head}{self.tail()}")  # null
        else:
            self.lines.append(f"{' ' * indent}{head} {self.inline()}{self.tail()}")

    def block(self, indent: int, depth: int) -> None:
        if self.chance(0.6):
            used: set[str] = set()
            for _ in range(self.rng.randint(1, 4)):
                self.noise(indent)
                self.value(self.key(used) + ":", indent, depth, indent)
        else:
            for _ in range(self.rng.randint(1, 4)):
                self.noise(indent)
                pad = " " * self.rng.randint(1, 2)
                if depth > 0 and self.chance(0.25):  # - key: value, more keys below
                    used: set[str] = set()
                    column = indent + 1 + len(pad)
                    self.value(f"-{pad}{self.key(used)}:", indent, depth - 1, column)
                    for _ in range(self.rng.randint(0, 2)):
                        self.value(self.key(used) + ":", column, depth - 1, column)
                else:
                    self.value("-", indent, depth, indent)

    def noise(self, indent: int) -> None:
        """Blank lines and whole-line comments, at any indentation."""
        if self.chance(0.15):
            self.lines.append(
                " " * self.rng.randint(0, indent + 2) + self.rng.choice(["", "# note", "#"])
            )

    def document(self) -> str:
        self.block(0, self.rng.randint(0, 4))
        if self.near and self.chance(0.5):
            self.mutate()
        return "\n".join(self.lines) + ("\n" if self.chance(0.9) else "")

    def mutate(self) -> None:
        """One layout near miss: a tab, a marker, an indentation off by one, a character
        dropped or added, a repeated line, a deep or alias-heavy tail."""
        rng, lines = self.rng, self.lines
        at = rng.randrange(len(lines))
        kind = rng.randrange(9)
        if kind == 0:
            line = lines[at]
            cut = rng.randrange(len(line) + 1)
            lines[at] = (
                line[:cut]
                + rng.choice(["\t", " ", ":", "#", "-", "&", "*", "[", "'", '"', "\r"])
                + line[cut:]
            )
        elif kind == 1 and lines[at]:
            cut = rng.randrange(len(lines[at]))
            lines[at] = lines[at][:cut] + lines[at][cut + 1 :]
        elif kind == 2:
            lines[at] = rng.choice([" ", ""]) + lines[at] if rng.random() < 0.5 else lines[at][1:]
        elif kind == 3:
            lines.insert(
                at, rng.choice(["---", "...", "%YAML 1.1", "--- # doc", "? complex", "<<: *n0"])
            )
        elif kind == 4:
            lines.insert(at, lines[at])
        elif kind == 5:
            deep = rng.randint(5, 40)
            lines.extend(f"{' ' * i}d{i}:" for i in range(deep))
            lines.append(" " * deep + "leaf: 1")
        elif kind == 6:  # aliases in block sequences, their expansion growing
            lines += ["z0: &z0 [a, b]", "z1: &z1"] + ["  - *z0"] * rng.randint(1, 9)
            lines += ["z2:"] + ["  - *z1"] * rng.randint(1, 9)
        elif kind == 7:
            lines[at] = lines[at] + " " * rng.randint(1, 3)
        else:
            lines.insert(at, "zz: " + rng.choice(NEAR_SCALARS))


def judged(text: str, limits: Limits):
    """The subset's answer on ``text`` after checking it against PyYAML's: DECLINED, or
    the value PyYAML gives (same types, same sharing); PyYAML's refusal must be a decline.
    Returns (the subset's answer, PyYAML's refusal or None)."""
    got = subset(text, limits)
    try:
        want, refused = pyyaml(text, limits), None
    except TraceCanaryError as err:
        refused = err
    if refused is not None:
        assert got is DECLINED, f"PyYAML refuses ({refused.one_line()}), the subset read:\n{text}"
    elif got is not DECLINED:
        assert same(got, want), f"{got!r} != {want!r} for\n{text}"
        assert sharing(got) == sharing(want), text
    return got, refused


def test_generated_documents_are_read_as_pyyaml_reads_them_or_declined():
    rng = random.Random(20240611)
    seen = dict.fromkeys(["clean", "clean read", "near read", "refused", "refused by a limit"], 0)
    for n in range(2500):
        near = n % 2 == 1
        text = Gen(rng, near).document()
        got, refused = judged(text, DEFAULT)
        refused_tight = [judged(text, limits)[1] for limits in TIGHT]
        seen["clean"] += not near
        seen["clean read" if not near else "near read"] += got is not DECLINED
        seen["refused"] += refused is not None
        seen["refused by a limit"] += refused is None and any(refused_tight)
    # the comparisons above ran on real answers and real refusals, not on declines alone
    assert seen["clean read"] >= 0.95 * seen["clean"], seen
    assert seen["near read"] >= 200 and seen["refused"] >= 200, seen
    assert seen["refused by a limit"] >= 50, seen


@pytest.mark.parametrize(
    "text",
    [
        "a: yes\nb: On\nc: ~\nd: 0\ne: -0.0\nf: '1'\ng: 09\nh: 1.2.3\n",
        "- a\n-\n- - nested\n",
        "a: >-\n  one\n  two\n\nb: |\n  one\n  two\n",
        "a: |\n  kept\n",
        "a: >\n  last line, no newline",
        "l: [a, 'b, c', \"d\"]\nm: {k: v, w: ~}\ne: []\nf: {}\n",
        "- k: v\n  j: w\n-   x: 1\n    y: [2]\n",
        "x: &a\n  - 1\ny: *a\nz: *a\n",
    ],
)
def test_hand_written_documents_agree_with_pyyaml(text):
    got = subset(text)
    want = pyyaml(text)
    assert got is DECLINED or (same(got, want) and sharing(got) == sharing(want))


def test_the_subset_answers_the_forms_it_claims():
    assert subset("a: yes\nb: On\nc: ~\nd: 0\ne: -0.0\nf: '1'\ng: 09\nh: 1.2.3\n") == {
        "a": True, "b": True, "c": None, "d": 0, "e": -0.0, "f": "1", "g": "09", "h": "1.2.3",
    }  # fmt: skip
    assert subset("a: >-\n  one\n  two\n\nb: |\n  one\n  two\n") == {
        "a": "one two",
        "b": "one\ntwo\n",
    }
    assert subset("a: >\n  last line, no newline") == {"a": "last line, no newline"}
    assert subset("# only a comment\n\n") is None
    assert subset("") is None


@pytest.mark.parametrize(
    "text",
    [
        "a: 0x1F\n", "a: 1.0e+3\n", "a: .inf\n", "a: 012\n", "a: 1_000\n", "a: 1:30\n",
        "a: 2001-12-14\n", "a: =\n", "<<: {b: 1}\n", "1: a\n", "on: a\n", "a: !!str 1\n",
        "--- \na: 1\n", "a: b\n...\n", "%YAML 1.1\n---\na: 1\n", "a: 'x\n  y'\n",
        "a: b\n  c\n", "a: [b,\n  c]\n", "a: |+\n  x\n", "a: |2\n   x\n", "a: |\n  x\n\n  y\n",
        "a:\n- b\n", "a: |\n  x\n\n  # c\nb: 1\n", "a: |\n  x\n   \nb: 1\n", "? a\n: b\n", 'a: "\\t"\n', "a:\tb\n", "a: 1\na: 2\n", "a: [[b]]\n",
        "a: \u00e9\n", "a: *b\n", "a: &x 1\nb: &x 2\n", "x\n", "[a]\n", "  a: 1\n",
    ],
)  # fmt: skip
def test_forms_outside_the_subset_are_declined(text):
    assert subset(text) is DECLINED


# ---------------------------------------------------------------------------------------
# (c) no PyYAML import where the subset answers


def test_loading_the_shipped_backends_does_not_import_pyyaml():
    probe = (
        "import sys\n"
        "from tracecanary.limits import load_yaml\n"
        "doc = load_yaml(sys.argv[1])\n"
        "assert doc['format'] == 'tracecanary.backends/v1', doc\n"
        "print('yaml' in sys.modules)\n"
    )
    path = REPO / "src/tracecanary/defaults/backends.yaml"
    run = subprocess.run(
        [sys.executable, "-c", probe, str(path)], capture_output=True, text=True, check=True
    )
    assert run.stdout.strip() == "False"


def test_parse_yaml_text_gives_the_subset_s_value_and_pyyaml_s_beyond_it():
    assert parse_yaml_text("a: [1, x]\n", file="f.yaml") == {"a": [1, "x"]}
    assert parse_yaml_text("a: 0x10\nb: 1e3\n", file="f.yaml") == {"a": 16, "b": "1e3"}
    assert parse_yaml_text("base: &b {x: 1}\none: {<<: *b, y: 2}\n", file="f.yaml") == {
        "base": {"x": 1},
        "one": {"x": 1, "y": 2},
    }


# ---------------------------------------------------------------------------------------
# (d) refusals keep PyYAML's words


def billion_laughs() -> str:
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 10)]
    return "\n".join(lines) + "\n"


def billion_laughs_in_block_sequences() -> str:
    lines = ["l0: &l0"] + ["  - lol"] * 9
    for i in range(1, 10):
        lines += [f"l{i}: &l{i}"] + [f"  - *l{i - 1}"] * 9
    return "\n".join(lines) + "\n"


REFUSED = {
    "duplicate-key": "a: 1\nb: 2\na: 3\n",
    "billion-laughs": billion_laughs(),
    "billion-laughs-in-block-sequences": billion_laughs_in_block_sequences(),
    "many-aliases": "a: &a 1\nb: [" + ", ".join(["*a"] * 2000) + "]\n",
    "many-aliases-in-a-block-sequence": "a: &a 1\nb:\n" + "  - *a\n" * 2000,
    "deep-block": "".join(f"{' ' * i}k:\n" for i in range(80)) + " " * 80 + "k: leaf\n",
    "deep-flow": "a: " + "[" * 100 + "]" * 100 + "\n",
    "recursive-alias": "a: &a\n  - *a\n",
    "tab": "a:\n\tb: 1\n",
    "syntax-unclosed": "a: [1, 2\n",
    "syntax-mapping-in-value": "a: b: c\n",
    "syntax-indentation": "a:\n    b: 1\n  c: 2\n",
    "control-character": "a: \x07\n",
    "undefined-alias": "a: *nowhere\n",
}


@pytest.mark.parametrize("text", list(REFUSED.values()), ids=list(REFUSED))
def test_refusals_are_pyyaml_s_word_for_word(text):
    assert subset(text) is DECLINED
    with pytest.raises(TraceCanaryError) as direct:
        pyyaml(text)
    with pytest.raises(TraceCanaryError) as hooked:
        parse_yaml_text(text, file="doc.yaml")
    assert type(hooked.value) is type(direct.value)
    assert hooked.value.one_line() == direct.value.one_line()


def test_an_error_inside_the_subset_is_a_decline(monkeypatch):
    def broken(text, limits):
        raise IndexError("a case the subset did not foresee")

    production = getattr(yaml_subset.parse, "__wrapped__", yaml_subset.parse)  # conftest's check
    monkeypatch.setattr(yaml_subset, "parse", production)
    monkeypatch.setattr(yaml_subset, "_parse", broken)
    assert yaml_subset.parse("a: 1\n", limits=DEFAULT) is DECLINED
    assert parse_yaml_text("a: 1\n", file="f.yaml") == {"a": 1}
