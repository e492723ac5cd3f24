"""Whether a sandbox child's answer is one JSON object, told without decoding it.

The sandbox server relays each child's answer (the document's text) to its owner, and must
not make a ``str`` or ``bytes`` of it: an immutable copy cannot be zeroed, and freed, its
memory would keep one tenant's text for the next tenant's child to find. So the answer is
matched, in the buffer the server zeroes, against JSON as ``json.dumps`` writes it by default
— ASCII only, spaces its only whitespace — which also means it holds no newline and is one
line of the server's answers.
"""

from __future__ import annotations

import re

__all__ = ["is_json_object"]

_STRING = rb'"(?:[ !#-\[\]-~]++|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*+"'
_SCALAR = rb"-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?(?:[eE][-+]?[0-9]++)?|true|false|null|NaN|-?Infinity"
_PRIMITIVE = rb"(?:" + _STRING + rb"|" + _SCALAR + rb")"
_ONE_VALUE = re.compile(rb" *+" + _PRIMITIVE)
# An array's values, many at one match (a .docx's boundaries, a PDF's pages).
_ARRAY_VALUES = re.compile(rb" *+" + _PRIMITIVE + rb"(?: *+, *+" + _PRIMITIVE + rb")*+")
_KEY = re.compile(rb" *+" + _STRING + rb" *+:")
_OPENING = re.compile(rb" *+([{[])")
_PUNCTUATION = re.compile(rb" *+([]},])")
_SPACES = re.compile(rb" *+")
# Far deeper than any reader's answer (three levels), far below the recursion limit of the
# owner's ``json.loads``.
_MAX_DEPTH = 16


def is_json_object(answer: memoryview) -> bool:
    """Whether ``answer`` is one JSON object, as a child's ``json.dumps`` writes it.

    Checked by matching, not decoding: the server never makes a ``str`` or ``bytes`` of a
    child's answer (see the module docstring); the matches' spans are all it looks at, and
    only punctuation is ever taken out of it.
    """
    position, closers = 0, bytearray()
    first = _OPENING.match(answer)
    if first is None or first.group(1) != b"{":
        return False
    expecting = "value"
    while True:
        if expecting == "value":
            values = _ARRAY_VALUES if closers.endswith(b"]") else _ONE_VALUE
            found = values.match(answer, position)
            if found is not None:
                position, expecting = found.end(), "end"
                continue
            opening = _OPENING.match(answer, position)
            if opening is None or len(closers) >= _MAX_DEPTH:
                return False
            position = opening.end()
            closers += b"}" if opening.group(1) == b"{" else b"]"
            closing = _PUNCTUATION.match(answer, position)
            if closing is not None and closing.group(1) == closers[-1:]:
                position, expecting = closing.end(), "end"
                del closers[-1]
            else:
                expecting = "key" if closers.endswith(b"}") else "value"
        elif expecting == "key":
            key = _KEY.match(answer, position)
            if key is None:
                return False
            position, expecting = key.end(), "value"
        else:  # a value ended
            if not closers:
                return _SPACES.fullmatch(answer, position) is not None
            mark = _PUNCTUATION.match(answer, position)
            if mark is None:
                return False
            position = mark.end()
            if mark.group(1) == b",":
                expecting = "key" if closers.endswith(b"}") else "value"
            elif mark.group(1) == closers[-1:]:
                del closers[-1]
            else:
                return False
