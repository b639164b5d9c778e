"""JSON nesting depth measured on the text: exact for valid JSON, chunk-size independent,
and the refusal every JSON reader applies before parsing."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracecanary.errors import ResourceLimitExceeded
from tracecanary.json_depth import max_nesting_depth
from tracecanary.limits import Limits, parse_json_bytes


def reference_depth(text: str) -> int:
    """A byte-at-a-time scanner with the same rules (a backslash escapes the next byte,
    quotes toggle strings, brackets outside strings count)."""
    depth = deepest = 0
    in_string = escape = False
    for ch in text:
        if escape:
            escape = False
        elif ch == "\\":
            escape = True
        elif ch == '"':
            in_string = not in_string
        elif in_string:
            continue
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def parsed_depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max((parsed_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((parsed_depth(v) for v in value), default=0)
    return 0


# strings full of the bytes that matter: brackets, quotes and runs of backslashes
tricky_text = st.text(alphabet='[]{}"\\ab\n/u', max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | tricky_text,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(tricky_text, children, max_size=4)
    ),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(value=json_values, chunk=st.integers(min_value=1, max_value=9))
def test_depth_of_valid_json_equals_the_parsed_depth_for_any_chunk_size(value, chunk):
    text = json.dumps(value, ensure_ascii=False)
    assert max_nesting_depth(text, chunk_bytes=chunk) == parsed_depth(value)
    assert max_nesting_depth(text.encode("utf-8")) == parsed_depth(value)


@settings(max_examples=500, deadline=None)
@given(text=st.text(alphabet='[]{}"\\x', max_size=60), chunk=st.integers(1, 8))
def test_depth_of_any_text_matches_the_byte_at_a_time_scanner(text, chunk):
    assert max_nesting_depth(text, chunk_bytes=chunk) == reference_depth(text)


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ('"[[{{"', 0),
        ('["\\"[["]', 1),  # an escaped quote does not end the string
        ('["\\\\", [[]]]', 3),  # an escaped backslash does not escape the quote after it
        ('["\\\\\\"[", [[]]]', 3),
        ('{"a": [1, {"b": []}]}', 4),
    ],
)
def test_depth_examples(text, depth):
    assert max_nesting_depth(text) == depth


def test_a_backslash_ending_a_chunk_escapes_the_first_byte_of_the_next():
    text = '["ab\\"[[[[", []]'
    cut = text.index("\\") + 1
    for chunk in (cut, 1, 2, 3):
        assert max_nesting_depth(text, chunk_bytes=chunk) == 2


def test_parse_refuses_one_level_past_max_depth_and_accepts_the_limit():
    limits = Limits(max_depth=8)
    at_limit = "[" * 8 + "]" * 8
    assert parse_json_bytes(at_limit, file="x.json", limits=limits) == json.loads(at_limit)
    with pytest.raises(ResourceLimitExceeded, match="max_depth=8") as err:
        parse_json_bytes("[" * 9 + "]" * 9, file="x.json", limits=limits, record=3)
    assert err.value.file == "x.json" and err.value.record == 3


def test_brackets_inside_strings_do_not_count_toward_the_limit():
    limits = Limits(max_depth=2)
    text = json.dumps({"name": "[[[[{{{{ nested-looking ]]]]", "v": [1]})
    assert parse_json_bytes(text, file="x.json", limits=limits)["v"] == [1]
