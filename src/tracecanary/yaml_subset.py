"""A YAML document read in plain Python for the subset of YAML our configuration files
use, without importing PyYAML (whose import costs a command about 17 ms here, and whose
pure-Python parse of the shipped backends.yaml about 10 ms more).

Guarantee: wherever ``parse`` returns a value, ``limits.parse_yaml_text``'s PyYAML path
(PyYAML's safe loader under the resource policy) returns an equal value of the same
Python types all the way down (dict, list, str, int, float, bool, None; ``True`` is not
``1``; dict keys in the same order), every alias of one anchor being one object as there,
and would refuse nothing. Everywhere else ``parse`` returns ``DECLINED`` and PyYAML
decides, so a refusal is PyYAML's, word for word: a syntax error, a repeated key, a
repeated or undefined anchor (a recursive alias is one), a tab, a character outside
printable ASCII, a document near a limit (nesting over half of ``max_depth`` or over 32
levels, more than half of ``max_yaml_aliases`` aliases or of ``max_yaml_nodes`` nodes with
aliases expanded), a line over 1,000 characters.

The subset, in one document with a block mapping or block sequence at column 0 (a text
of comments and blank lines alone is None, as PyYAML gives it):
whole-line and trailing (`` #``) comments and blank lines; block mappings whose keys are
plain words (``[A-Za-z0-9_][A-Za-z0-9_./+-]*``) resolving to strings; block sequences,
``- key: value`` opening a mapping in one; one-line flow sequences and mappings of
scalars (``[a, 'b']``, ``{k: v}``, nothing nested); single-line plain, single-quoted and
double-quoted (without ``\\``) scalars; anchors and aliases in block context; block
scalars ``|``, ``|-``, ``>``, ``>-`` whose lines are all at one indentation, with no blank
line inside. Everything else is declined: directives and document markers, tags,
``?`` keys, merge keys, multi-line plain or quoted scalars, indentless sequences, flow
collections that nest or span lines, keep (``+``) or explicit indentation indicators.

A plain scalar gets PyYAML's own tag (``_RESOLVERS`` copies PyYAML's implicit resolvers,
YAML 1.1; tests/test_yaml_subset.py pins the copy to the installed PyYAML), and is
converted only where the conversion is sure to be the safe constructor's: strings,
null, the 18 booleans, integers ``[-+]?(0|[1-9][0-9]*)`` and floats ``[-+]?[0-9]+.[0-9]+``.
Any other int or float form (hex, octal, underscores, sexagesimal, exponents, ``.inf``),
a timestamp, ``<<`` and ``=`` are declined."""

from __future__ import annotations

import re
from typing import Any, Protocol


class YamlLimits(Protocol):
    """The limits the subset keeps well inside (``limits.Limits`` has them)."""

    max_depth: int
    max_yaml_aliases: int
    max_yaml_nodes: int


class _DeclinedType:
    def __repr__(self) -> str:
        return "DECLINED"


DECLINED = _DeclinedType()  # what ``parse`` returns where PyYAML must answer


class _Declined(Exception):
    """The subset cannot answer for this document; PyYAML must."""


def parse(text: str, *, limits: YamlLimits) -> Any:
    """The value PyYAML's path gives for ``text`` under ``limits`` (see the module
    docstring), or ``DECLINED``. Never raises: an error the subset did not foresee is a
    decline too."""
    try:
        return _parse(text, limits)
    except Exception:  # _Declined, or a case not foreseen: PyYAML decides
        return DECLINED


def _parse(text: str, limits: YamlLimits) -> Any:
    """``parse`` raising ``_Declined`` (and letting any other error out, for the tests)."""
    if _OUTSIDE.search(text):
        raise _Declined
    return _Parser(text, limits).document()


# PyYAML's implicit resolvers (yaml/resolver.py), in its order: tag, pattern and flags, and
# the first characters each is registered for; a plain scalar gets the tag of the first
# that matches. Compiled on first use (re's cache): most files need few of them.
_IMPLICIT = [
    ("tag:yaml.org,2002:bool",
     (r'''^(?:yes|Yes|YES|no|No|NO
                    |true|True|TRUE|false|False|FALSE
                    |on|On|ON|off|Off|OFF)$''', re.X),
     list("yYnNtTfFoO")),
    ("tag:yaml.org,2002:float",
     (r'''^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
                    |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
                    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
                    |[-+]?\.(?:inf|Inf|INF)
                    |\.(?:nan|NaN|NAN))$''', re.X),
     list("-+0123456789.")),
    ("tag:yaml.org,2002:int",
     (r'''^(?:[-+]?0b[0-1_]+
                    |[-+]?0[0-7_]+
                    |[-+]?(?:0|[1-9][0-9_]*)
                    |[-+]?0x[0-9a-fA-F_]+
                    |[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$''', re.X),
     list("-+0123456789")),
    ("tag:yaml.org,2002:merge", (r'^(?:<<)$', 0), ["<"]),
    ("tag:yaml.org,2002:null",
     (r'''^(?: ~
                    |null|Null|NULL
                    | )$''', re.X),
     ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:timestamp",
     (r'''^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
                    |[0-9][0-9][0-9][0-9] -[0-9][0-9]? -[0-9][0-9]?
                     (?:[Tt]|[ \t]+)[0-9][0-9]?
                     :[0-9][0-9] :[0-9][0-9] (?:\.[0-9]*)?
                     (?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$''', re.X),
     list("0123456789")),
    ("tag:yaml.org,2002:value", (r'^(?:=)$', 0), ["="]),
    ("tag:yaml.org,2002:yaml", (r'^(?:!|&|\*)$', 0), list("!&*")),
]  # fmt: skip
_RESOLVERS: dict[str, list[tuple[str, str, int]]] = {}
for _tag, (_pattern, _flags), _firsts in _IMPLICIT:
    for _first in _firsts:
        _RESOLVERS.setdefault(_first, []).append((_tag, _pattern, _flags))

_BOOLS = {"yes": True, "no": False, "true": True, "false": False, "on": True, "off": False}
_SURE_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_SURE_FLOAT = re.compile(r"[-+]?[0-9]+\.[0-9]+")


def _resolve(text: str) -> Any:
    """The value PyYAML's safe loader makes of plain scalar ``text``, or ``_Declined``.
    The sure forms skip the table: every ``_SURE_INT`` text gets PyYAML's int tag (no
    resolver before it matches, its own does) and every ``_SURE_FLOAT`` text its float
    tag (the first resolver for a digit or sign, matching), whose values the safe
    constructor makes as ``int(text)`` and ``float(text)`` do."""
    if _SURE_INT.fullmatch(text):
        return int(text)
    if _SURE_FLOAT.fullmatch(text):
        return float(text)
    resolvers = _RESOLVERS.get(text[:1], ())
    tag = next((tag for tag, pattern, flags in resolvers if re.match(pattern, text, flags)), None)
    if tag is None:
        return text  # no resolver matches: a string
    if tag == "tag:yaml.org,2002:bool":
        return _BOOLS[text.lower()]
    if tag == "tag:yaml.org,2002:null":
        return None
    raise _Declined  # other int and float forms, timestamps, << and =


_OUTSIDE = re.compile(r"[^\n\x20-\x7e]|^(?:---|\.\.\.)|^.{1001}", re.M)  # and markers, long lines
_KEY = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_./+-]*):(?: +|$)")  # a key and its value indicator
_ENTRY = re.compile(r"-(?: +|$)")  # a block sequence entry indicator
_ANCHOR = re.compile(r"&([A-Za-z0-9_-]+)(?: +|$)")
_ALIAS = re.compile(r"\*([A-Za-z0-9_-]+)")
_END = re.compile(r" *| +#.*")  # what may follow a node on its line
_BLOCK_HEADER = re.compile(r"([|>])(-?)(?: *| +#.*)")
_SINGLE = re.compile(r"'((?:[^']|'')*)'")
_DOUBLE = re.compile(r'"([^"\\]*)"')
_NOT_PLAIN_START = set("-?:,[]{}#&*!|>'\"%@` ")  # PyYAML's check_plain, block context
# a flow plain scalar: no comma, colon, bracket, brace, '#', '?', quote, backslash or tab
_FLOW_PLAIN = re.compile(
    r"(?:[A-Za-z0-9_./~()<=$^+;]|-(?=[A-Za-z0-9_./~()<=$^+;]))[A-Za-z0-9_./~()<>=$^+;!&*|%@ -]*"
)


class _Parser:
    """One pass over the lines; every method declines (raises ``_Declined``) where the
    text leaves the subset. Values come with their node count, aliases expanded."""

    def __init__(self, text: str, limits: YamlLimits) -> None:
        self.lines = text.split("\n")
        self.i = 0  # the next line not yet read
        self.anchors: dict[str, tuple[Any, int]] = {}
        self.open_anchors: set[str] = set()  # anchors whose node is being read
        self.aliases = 0
        self.max_depth = min(32, limits.max_depth // 2)
        self.max_aliases = limits.max_yaml_aliases // 2
        self.max_nodes = limits.max_yaml_nodes // 2

    def document(self) -> Any:
        line = self._content()
        if line is None:
            return None  # no node at all (comments, blank lines): PyYAML gives None
        if line[0] != 0:
            raise _Declined
        value, _ = self._block(-1, 1)
        if self._content() is not None:
            raise _Declined
        return value

    def _content(self) -> tuple[int, str] | None:
        """(indentation, text) of the next line that is neither blank nor a comment,
        skipping those (it is not consumed); None at the end."""
        while self.i < len(self.lines):
            line = self.lines[self.i]
            text = line.lstrip(" ")
            if text and text[0] != "#":
                return len(line) - len(text), text
            self.i += 1
        return None

    def _count(self, size: int, depth: int) -> None:
        if size > self.max_nodes or depth > self.max_depth:
            raise _Declined

    def _block(self, parent: int, depth: int) -> tuple[Any, int]:
        """The node on the following lines, indented past ``parent``: a block mapping or
        sequence, or else an empty node (None)."""
        line = self._content()
        if line is None or line[0] <= parent:
            return None, 1
        if _ENTRY.match(line[1]):
            return self._sequence(line[0], depth)
        return self._mapping(line[0], depth, None)

    def _sequence(self, indent: int, depth: int) -> tuple[list, int]:
        self._count(1, depth + 1)
        items, size = [], 1
        while (line := self._content()) is not None and line[0] >= indent:
            entry = _ENTRY.match(line[1])
            if line[0] > indent or not entry:
                raise _Declined
            self.i += 1
            rest, column = line[1][entry.end() :], indent + entry.end()
            if _KEY.match(rest):  # - key: value opens a mapping at the key's column
                value, n = self._mapping(column, depth + 1, rest)
            else:
                value, n = self._value(rest, indent, depth + 1)
            items.append(value)
            size += n
            self._count(size, depth)
        return items, size

    def _mapping(self, indent: int, depth: int, first: str | None) -> tuple[dict, int]:
        """A block mapping at column ``indent``; ``first`` is its first entry's text when
        that entry was read from a sequence entry's line."""
        self._count(1, depth + 1)
        result: dict = {}
        size, text = 1, first
        while True:
            if text is None:
                line = self._content()
                if line is None or line[0] < indent:
                    break
                if line[0] > indent:
                    raise _Declined
                text = line[1]
                self.i += 1
            key = _KEY.match(text)
            if not key or key[1] in result or _resolve(key[1]) != key[1]:
                raise _Declined  # not a key, a repeated key, a key that is not a string
            value, n = self._value(text[key.end() :], indent, depth + 1)
            result[key[1]] = value
            size += 1 + n
            self._count(size, depth)
            text = None
        return result, size

    def _value(self, rest: str, parent: int, depth: int) -> tuple[Any, int]:
        """The node after ``key:`` or ``-`` (``rest``: the line after the indicator and
        its spaces) in a block collection at column ``parent``."""
        if not rest or rest[0] == "#":
            return self._block(parent, depth)
        if rest[0] == "&":
            anchor = _ANCHOR.match(rest)
            rest = rest[anchor.end() :] if anchor else ""
            if not anchor or rest[:1] in ("&", "*"):
                raise _Declined  # a bad anchor, or one node with two properties
            name = anchor[1]
            if name in self.anchors or name in self.open_anchors:
                raise _Declined  # a repeated anchor, one nested inside its own node too
            self.open_anchors.add(name)
            node = self._value(rest, parent, depth)
            self.open_anchors.discard(name)
            self.anchors[name] = node  # only now: an alias inside it is declined
            return node
        if rest[0] == "*":
            alias = _ALIAS.match(rest)
            self.aliases += 1
            if (
                not alias
                or alias[1] not in self.anchors  # undefined, or an alias inside its anchor
                or not _END.fullmatch(rest, alias.end())
                or self.aliases > self.max_aliases
            ):
                raise _Declined
            value, size = self.anchors[alias[1]]
            self._count(size, depth)
            return value, size
        if rest[0] in "|>":
            return self._block_scalar(rest, parent), 1
        self._count(1, depth)
        if rest[0] in "[{":
            value, size, end = self._flow(rest, depth)
        elif rest[0] in "'\"":
            value, end = _quoted(rest, 0)
            size = 1
        else:
            return _plain(rest), 1
        if not _END.fullmatch(rest, end):
            raise _Declined
        return value, size

    def _block_scalar(self, header: str, parent: int) -> str:
        """A literal or folded scalar whose lines all sit at one column past ``parent``,
        with no blank line among them; clipped or stripped."""
        style = _BLOCK_HEADER.fullmatch(header)
        if not style:
            raise _Declined
        body: list[str] = []
        column = None
        while self.i < len(self.lines):
            line = self.lines[self.i]
            text = line.lstrip(" ")
            indent = len(line) - len(text)
            if column is None:
                if not text or indent <= parent:
                    raise _Declined  # an empty scalar, or a blank line first
                column = indent
            if not text or indent < column:
                break
            if indent > column:
                raise _Declined
            body.append(text)
            self.i += 1
        if column is None:
            raise _Declined
        last_line_break = "\n" if self.i < len(self.lines) else ""
        after = self.i
        while after < len(self.lines) and not self.lines[after].strip(" "):
            if len(self.lines[after]) >= column:
                raise _Declined  # a line of spaces PyYAML would count as content
            after += 1
        if (
            after < len(self.lines)
            and len(self.lines[after]) - len(self.lines[after].lstrip(" ")) >= column
        ):
            raise _Declined  # a blank line inside the scalar
        value = (" " if style[1] == ">" else "\n").join(body)
        return value if style[2] == "-" else value + last_line_break

    def _flow(self, text: str, depth: int) -> tuple[Any, int, int]:
        """A one-line flow sequence or mapping of scalars starting at ``text[0]``: its
        value, node count and the index after its closing bracket."""
        self._count(1, depth + 1)
        mapping = text[0] == "{"
        close = "}" if mapping else "]"
        result: Any = {} if mapping else []
        size = 1
        at = _skip_spaces(text, 1)
        if text[at : at + 1] == close:
            return result, size, at + 1
        while True:
            if mapping:
                key = _KEY.match(text, at)
                if not key or not text[key.end() - 1 : key.end()] == " ":
                    raise _Declined  # {k:v} and {k:} left to PyYAML
                if key[1] in result or _resolve(key[1]) != key[1]:
                    raise _Declined
                at = key.end()
            value, at = _flow_scalar(text, at)
            if mapping:
                result[key[1]] = value
                size += 2
            else:
                result.append(value)
                size += 1
            self._count(size, depth)
            at = _skip_spaces(text, at)
            if text[at : at + 1] == close:
                return result, size, at + 1
            if text[at : at + 1] != ",":
                raise _Declined
            at = _skip_spaces(text, at + 1)
            if text[at : at + 1] == close:
                raise _Declined  # a trailing comma


def _skip_spaces(text: str, at: int) -> int:
    while text[at : at + 1] == " ":
        at += 1
    return at


def _quoted(text: str, at: int) -> tuple[str, int]:
    """A single-line quoted scalar at ``text[at]``: its value and the index after it.
    Double quotes with an escape (``\\``) are declined."""
    if text[at] == "'":
        match = _SINGLE.match(text, at)
        if match:
            return match[1].replace("''", "'"), match.end()
    else:
        match = _DOUBLE.match(text, at)
        if match:
            return match[1], match.end()
    raise _Declined


def _plain(text: str) -> Any:
    """The value of a single-line plain scalar in block context that fills ``text`` up
    to an optional `` #`` comment."""
    if text[0] in _NOT_PLAIN_START and not (text[0] == "-" and text[1:2] not in ("", " ")):
        raise _Declined
    cut = text.find(" #")
    scalar = (text if cut < 0 else text[:cut]).rstrip(" ")
    if ": " in scalar or scalar.endswith(":"):
        raise _Declined  # a mapping where a scalar must be: PyYAML refuses it
    return _resolve(scalar)


def _flow_scalar(text: str, at: int) -> tuple[Any, int]:
    """A scalar inside a flow collection at ``text[at]``: its value and the index after
    it (trailing spaces not included)."""
    if text[at : at + 1] in ("'", '"'):
        return _quoted(text, at)
    match = _FLOW_PLAIN.match(text, at)
    if not match:
        raise _Declined
    scalar = match[0].rstrip(" ")
    return _resolve(scalar), at + len(scalar)
