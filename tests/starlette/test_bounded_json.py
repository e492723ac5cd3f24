"""Depth-bounded JSON parsing: the depth is measured without recursion, strings excluded."""

from __future__ import annotations

import json

import pytest

from esra.starlette._bounded_json import (
    InvalidJsonError,
    JsonTooDeepError,
    loads_bounded,
    nesting_depth,
)


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ('"[[[["', 0),
        ("[]", 1),
        ('{"a": [{"b": []}]}', 4),
        ('["]]]\\"[[", [[1]]]', 3),  # brackets and an escaped quote inside a string
        ('["\\\\", [2]]', 2),  # an escaped backslash ends just before the closing quote
        ("[" * 100_000, 100_000),
        ('["unterminated [[[[', 1),
        ('["ends in a backslash \\', 1),
    ],
)
def test_nesting_depth_counts_structure_not_string_contents(text: str, depth: int) -> None:
    """Only the arrays and objects outside string literals count."""
    assert nesting_depth(text) == depth


def test_deep_input_is_refused_before_the_parser_recurses() -> None:
    """``"[" * 100000`` is a classified error, not a RecursionError."""
    with pytest.raises(JsonTooDeepError) as refused:
        loads_bounded(b"[" * 100_000, max_depth=32)
    assert (refused.value.depth, refused.value.max_depth) == (100_000, 32)
    assert "at most 32" in str(refused.value)


def test_the_bound_is_inclusive() -> None:
    """Exactly ``max_depth`` levels parse; one more is refused."""
    assert loads_bounded(b"[" * 5 + b"]" * 5, max_depth=5) == [[[[[]]]]]
    with pytest.raises(JsonTooDeepError):
        loads_bounded(b"[" * 6 + b"]" * 6, max_depth=5)


def test_quadratic_inputs_are_measured_in_one_pass() -> None:
    """An unterminated string of escaped quotes (a backtracking trap) is still measured."""
    text = '"' + '\\"' * 200_000 + "\\"
    assert nesting_depth(text) == 0


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"\xff\xfe\x00", "not UTF-8"),
        (b"{", "not valid JSON (line 1)"),
        (b'{"a": 1}\n}', "not valid JSON (line 2)"),
    ],
)
def test_invalid_bodies_are_classified(data: bytes, words: str) -> None:
    """Invalid UTF-8 and invalid JSON raise ``InvalidJsonError`` with a safe message."""
    with pytest.raises(InvalidJsonError, match=words.replace("(", r"\(").replace(")", r"\)")):
        loads_bounded(data)


def test_valid_json_parses_as_json_loads_does() -> None:
    """Within the bound the result is ``json.loads``'s own."""
    document = {"id": "x", "bindings": [{"source": "s", "fields": ["a", "b"]}], "n": 1.5}
    assert loads_bounded(json.dumps(document).encode()) == document
