"""The sandbox server's check of a child's answer, which it relays without decoding it:
whatever ``json.dumps`` writes of an object passes, and whatever passes is one JSON object
on one line."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from esra.core._docstore._json_shape import is_json_object

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and infinities too, as json.dumps writes them
    | st.text()
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=10,  # nested at most 11 deep: within the check's 16
)


@settings(max_examples=400)
@given(st.dictionaries(st.text(), _VALUES, max_size=5))
def test_every_object_json_dumps_writes_passes(answer: dict[str, Any]) -> None:
    assert is_json_object(memoryview(json.dumps(answer).encode()))


@settings(max_examples=400)
@given(st.binary(max_size=80) | _VALUES.map(lambda v: json.dumps(v).encode()))
def test_whatever_passes_is_one_json_object_on_one_line(answer: bytes) -> None:
    if is_json_object(memoryview(answer)):
        assert b"\n" not in answer
        assert isinstance(json.loads(answer), dict)


def test_what_a_child_must_not_slip_through_is_refused() -> None:
    for answer in (
        b'{"text": "a"}\n{"sandbox_retry": true}',  # a second line of the server's answers
        b'{"text": "a"} {"b": 1}',  # two objects
        '{"text": "\u00e9"}'.encode(),  # not json.dumps' ASCII
        b'{"text": "a"',  # torn
        b'["text"]',  # not an object
        b'{"a": ' + b"[" * 16 + b"]" * 16 + b"}",  # deeper than any reader's answer
        b"",
    ):
        assert not is_json_object(memoryview(answer)), answer
