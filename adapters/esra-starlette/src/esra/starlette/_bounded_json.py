"""Parsing request JSON with a bound on nesting depth, checked before the parser runs.

``json.loads`` recurses once per nesting level, so ``"[" * 100000`` ends in a
``RecursionError`` deep inside the decoder — an unclassified 500 and a traceback. The depth
is measured first, in one linear pass that needs no recursion: string literals are cut out
(so brackets inside strings do not count), then the remaining brackets are summed. Only a
body within the bound is handed to the parser.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

__all__ = [
    "MAX_JSON_DEPTH",
    "InvalidJsonError",
    "JsonTooDeepError",
    "loads_bounded",
    "nesting_depth",
]

# Configuration documents nest a handful of levels; 32 leaves ample room for any of them
# while keeping every later recursive walk (structuring, validation) far from the limit.
MAX_JSON_DEPTH = 32

# A string literal, or an unterminated one running to the end (possibly ending in a lone
# backslash): possessive quantifiers, so every attempt either matches or fails at once and
# the pass stays linear whatever the input (no backtracking over an unclosed string).
_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?+\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class InvalidJsonError(ValueError):
    """The body is not UTF-8 JSON; the message says where, safe to show the caller."""


class JsonTooDeepError(InvalidJsonError):
    """The body nests arrays and objects deeper than the bound."""

    def __init__(self, depth: int, max_depth: int) -> None:
        super().__init__(
            f"The body nests arrays and objects {depth} levels deep; at most {max_depth} "
            "are accepted."
        )
        self.depth = depth
        self.max_depth = max_depth


def nesting_depth(text: str) -> int:
    """How deeply the arrays and objects of the JSON ``text`` nest (0 for a scalar).

    Meaningful for valid JSON; for anything else it is a number the parser then refuses.
    """
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    steps = map(_STEP.__getitem__, brackets)
    return max(accumulate(steps), default=0)


def loads_bounded(data: bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``data`` (UTF-8 JSON, RFC 8259 §8.1) parsed, if it nests at most ``max_depth`` levels.

    Raises:
        JsonTooDeepError: the body nests deeper than ``max_depth``; nothing was parsed.
        InvalidJsonError: the body is not UTF-8 or not JSON.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidJsonError("The body is not UTF-8 text.") from None
    depth = nesting_depth(text)
    if depth > max_depth:
        raise JsonTooDeepError(depth, max_depth)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidJsonError(f"The body is not valid JSON (line {exc.lineno}).") from None
    except ValueError:  # an integer past Python's int-string limit (4,300 digits)
        raise InvalidJsonError("The body is not valid JSON (a number too long).") from None
