"""Tests for esra.oracle._fulltext: escaping, composition, and a fuzz of Oracle Text syntax."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esra.oracle._fulltext import oracle_text_expression, oracle_text_term
from esra.sql import SearchTerms
from tests.oracle.conftest import issue, uncached_builder


def test_every_token_is_braced_and_closing_braces_doubled() -> None:
    """Tokens become {token}; a } inside is doubled; whitespace and NUL separate tokens."""
    assert oracle_text_term("a}b NEAR\x00c") == "{a}}b} {NEAR} {c}"
    assert oracle_text_term("   ") == "{   }"


@pytest.mark.parametrize(
    ("terms", "expected"),
    [
        (SearchTerms(required=("a", "b")), "({a}) AND ({b})"),
        (SearchTerms(optional=("a", "b")), "({a}) ACCUM ({b})"),
        (SearchTerms(phrases=("a b",)), "({a} {b})"),
        (
            SearchTerms(required=("a",), optional=("b",)),
            "(({a})) AND (({a}) ACCUM ({b}))",
        ),
        (SearchTerms(optional=("a",), excluded=("x", "y")), "(({a})) NOT (({x}) OR ({y}))"),
        (SearchTerms(excluded=("x", "y")), "({x}) OR ({y})"),
        (SearchTerms(), ""),
    ],
)
def test_expression_composition(terms: SearchTerms, expected: str) -> None:
    """Required/phrases AND, optional ACCUM, excluded NOT; operators come from the module."""
    assert oracle_text_expression(terms) == expected


# Oracle Text reserved words and characters (CONTAINS query operators).
_RESERVED = (
    "ABOUT", "ACCUM", "AND", "BT", "BTG", "BTI", "BTP", "EQUIV", "FUZZY", "HASPATH", "INPATH",
    "MDATA", "MINUS", "NEAR", "NOT", "NT", "NTG", "NTI", "NTP", "OR", "PT", "RT", "SDATA",
    "SQE", "SYN", "TR", "TRSYN", "TT", "WITHIN",
    ",", "&", "=", "?", "{", "}", "\\", "(", ")", "[", "]", "-", ";", "~", "|", "$", "!", ">",
    "*", "%", "_", "}}", "{}", "'", '"', "\x00",
)  # fmt: skip
_PIECE = st.sampled_from((*_RESERVED, "alpha", "beta", " ", "é"))
_TERM = st.lists(_PIECE, min_size=1, max_size=6).map("".join)
_ESCAPED = re.compile(r"\{(?:[^}]|\}\})*\}")
_OPERATORS = {"AND", "ACCUM", "NOT", "OR"}


def _only_operators(expression: str) -> bool:
    """True when, escaped tokens removed, only this module's operators and parentheses remain."""
    rest = _ESCAPED.sub(" ", expression).replace("(", " ").replace(")", " ")
    return set(rest.split()) <= _OPERATORS


@settings(max_examples=300, deadline=None)
@given(
    required=st.lists(_TERM, max_size=2),
    optional=st.lists(_TERM, max_size=2),
    excluded=st.lists(_TERM, max_size=2),
    phrases=st.lists(_TERM, max_size=2),
)
def test_reserved_syntax_is_rendered_as_escaped_literals(
    required: list[str], optional: list[str], excluded: list[str], phrases: list[str]
) -> None:
    """Operators and special characters in terms never change the command text, and in the
    bound expression they only ever appear inside escaped {tokens}."""
    builder = uncached_builder()
    shape = {
        "required_terms": tuple(f"r{i}" for i in range(len(required))),
        "optional_terms": tuple(f"o{i}" for i in range(len(optional))),
        "excluded_terms": tuple(f"x{i}" for i in range(len(excluded))),
        "phrases": tuple(f"p{i}" for i in range(len(phrases))),
    }
    built = builder.build(
        issue(
            required_terms=tuple(required),
            optional_terms=tuple(optional),
            excluded_terms=tuple(excluded),
            phrases=tuple(phrases),
        )
    )
    assert built.sql == builder.build(issue(**shape)).sql
    expression = built.params.get("q")
    if required or optional or excluded or phrases:
        assert isinstance(expression, str)
        assert _only_operators(expression), expression
        for term in (*required, *optional, *excluded, *phrases):
            assert oracle_text_term(term) in expression


def test_the_fuzz_check_would_catch_a_raw_operator() -> None:
    """Guard: an unescaped operator word in the expression fails the check."""
    assert not _only_operators("{alpha} NEAR {beta}")
    assert not _only_operators("{alpha} & beta")
