"""No reading of Oracle Text's escapes lets a term's content out of its braces.

Oracle Text has two escapes: braces (``{...}``, a ``}`` inside doubled) and the backslash
(``\\x``). The reference says everything between the braces is escaped and gives ``}}`` for a
closing brace inside them; it does not say whether a backslash inside braces is literal or
escapes the next character. No Oracle runs here, so both readings are checked with a scanner
of each. Under the second, a token ending in a backslash (``a\\``) hid its closing brace, and
the token ``\\}|x\\`` rendered as ``{\\}}|x\\}``: the escape ended inside the content, and
``|`` (OR) stood outside every brace, an operator from a term. Rendering a
backslash as a word separator (which it is to the default BASIC_LEXER, where a character that
is no letter, digit, printjoin or skipjoin separates words) leaves nothing to decide.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esra.oracle._fulltext import oracle_text_expression, oracle_text_term
from esra.sql import SearchTerms

_OPERATORS = {"AND", "ACCUM", "NOT", "OR"}


def _outside(expression: str, *, backslash_escapes: bool) -> str:
    """What stands outside every escape, with escaped text (braces included) as spaces."""
    out: list[str] = []
    i, n = 0, len(expression)
    while i < n:
        ch = expression[i]
        if ch == "{":
            i += 1
            while i < n:
                escaped = backslash_escapes and expression[i] == "\\"
                if escaped or expression[i : i + 2] == "}}":
                    i += 2
                elif expression[i] == "}":
                    i += 1
                    break
                else:
                    i += 1
            out.append(" ")
        elif ch == "\\":
            i += 2
            out.append(" ")
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _only_operators(expression: str, *, backslash_escapes: bool) -> bool:
    rest = _outside(expression, backslash_escapes=backslash_escapes)
    return set(rest.replace("(", " ").replace(")", " ").split()) <= _OPERATORS


@pytest.mark.parametrize("backslash_escapes", [False, True])
@pytest.mark.parametrize("term", ["\\}|x\\", "\\}}|%\\", "a\\", "\\", "x\\} OR y", "{\\}|\\}"])
def test_a_backslash_never_ends_an_escape(term: str, backslash_escapes: bool) -> None:
    expression = oracle_text_expression(SearchTerms(required=(term, "b"), optional=(term,)))
    assert _only_operators(expression, backslash_escapes=backslash_escapes), expression


def test_a_backslash_separates_words() -> None:
    assert oracle_text_term("a\\b c") == "{a} {b} {c}"
    assert oracle_text_term("\\") == "{ }"


_PIECE = st.sampled_from(("\\", "}", "{", "}}", "|", "%", "OR", " ", "a", "NOT", "(", ")"))
_TERM = st.lists(_PIECE, min_size=1, max_size=8).map("".join)


@settings(max_examples=300, deadline=None)
@given(
    required=st.lists(_TERM, max_size=2),
    optional=st.lists(_TERM, max_size=2),
    excluded=st.lists(_TERM, max_size=2),
)
def test_under_either_reading_only_this_modules_operators_stand_outside(
    required: list[str], optional: list[str], excluded: list[str]
) -> None:
    terms = SearchTerms(
        required=tuple(required), optional=tuple(optional), excluded=tuple(excluded)
    )
    expression = oracle_text_expression(terms)
    for backslash_escapes in (False, True):
        assert _only_operators(expression, backslash_escapes=backslash_escapes), expression
