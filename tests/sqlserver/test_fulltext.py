"""Tests for esra.sqlserver._fulltext: bound values, and a fuzz of CONTAINS/FREETEXT syntax."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from esra.sql import SearchTerms
from esra.sqlserver import SqlServerFullText
from esra.sqlserver._fulltext import containstable_phrase, freetext_string
from tests.sqlserver.conftest import issue, uncached_builder


def test_phrase_value_is_one_quoted_phrase() -> None:
    """Inner double quotes are removed; the value is exactly one quoted phrase, and ``*``
    (before the closing quote, a prefix wildcard) is a word separator."""
    assert containstable_phrase('say "hi" NEAR x*') == '"say hi NEAR x "'
    assert containstable_phrase('"') == '""'


def test_a_trailing_asterisk_is_never_a_prefix_term() -> None:
    """``"a*"`` would match every word starting with ``a`` (and, excluded, remove every row
    holding one); ``"solar pan*"`` every phrase "solar pan...". The asterisk is a literal
    character, which the word breaker drops, so each value is a simple term or phrase."""
    assert containstable_phrase("a*") == '"a "'
    assert containstable_phrase("solar pan*") == '"solar pan "'
    assert containstable_phrase("top *") == '"top  "'
    assert containstable_phrase("a*b**") == '"a b  "'
    terms = SearchTerms(required=("a*",), excluded=("x*",), phrases=("solar pan*",))
    assert SqlServerFullText().bind_values(terms) == {
        "t0": '"a "',
        "tp0": '"solar pan "',
        "tx0": '"x "',
    }
    built = uncached_builder().build(
        issue(required_terms=("a*",), phrases=("solar pan*",), excluded_terms=("x*",))
    )
    assert not [v for v in built.params.values() if isinstance(v, str) and "*" in v]


@settings(max_examples=500, deadline=None)
@given(
    required=st.lists(st.text(), max_size=3),
    excluded=st.lists(st.text(), max_size=3),
    phrases=st.lists(st.text(), max_size=3),
)
def test_no_contains_value_carries_a_wildcard_or_an_extra_quote(
    required: list[str], excluded: list[str], phrases: list[str]
) -> None:
    """For any text, every CONTAINSTABLE value is ``"..."`` with exactly two double quotes,
    the first and the last character, and no ``*`` (nor NUL) anywhere: one literal phrase."""
    values = SqlServerFullText().bind_values(
        SearchTerms(required=tuple(required), excluded=tuple(excluded), phrases=tuple(phrases))
    )
    assert len(values) == len(required) + len(excluded) + len(phrases)
    for value in values.values():
        assert isinstance(value, str)
        assert len(value) >= 2
        assert value[0] == '"'
        assert value[-1] == '"'
        assert value.count('"') == 2
        assert "*" not in value
        assert "\x00" not in value


def test_freetext_value_has_no_quotes() -> None:
    """FREETEXT would phrase-match a quoted string, so quotes are removed; NUL separates."""
    assert freetext_string(('"a b"', "c\x00d")) == "a b c d"


def test_bind_values_per_slot() -> None:
    """Required terms, phrases and exclusions each get a quoted phrase; optional share :q."""
    terms = SearchTerms(required=("a",), optional=("b", "c"), excluded=("x",), phrases=("p q",))
    assert SqlServerFullText().bind_values(terms) == {
        "t0": '"a"',
        "tp0": '"p q"',
        "q": "b c",
        "tx0": '"x"',
    }
    assert SqlServerFullText().bind_values(SearchTerms()) == {}


# SQL Server CONTAINS syntax: operators, proximity, generation terms, wildcards, weights.
_RESERVED = (
    '"', "*", "(", ")", "&", "|", "!", "~", "[", "]", ",", "'", ";", "--", "/*", "%", "_",
    "AND", "OR", "NOT", "AND NOT", "NEAR", "FORMSOF", "INFLECTIONAL", "THESAURUS", "ISABOUT",
    "WEIGHT", "PROPERTY", "LANGUAGE", "N'", "0x", "\x00",
)  # fmt: skip
_PIECE = st.sampled_from((*_RESERVED, "alpha", "beta", " ", "é", "\udcff"))
_TERM = st.lists(_PIECE, min_size=1, max_size=6).map("".join)


@settings(max_examples=300, deadline=None)
@given(
    required=st.lists(_TERM, max_size=2),
    optional=st.lists(_TERM, max_size=2),
    excluded=st.lists(_TERM, max_size=2),
    phrases=st.lists(_TERM, max_size=2),
)
def test_reserved_syntax_only_ever_travels_as_bound_values(
    required: list[str], optional: list[str], excluded: list[str], phrases: list[str]
) -> None:
    """Terms made of CONTAINS operators never reach the command text; every CONTAINSTABLE
    value is exactly one quoted phrase and the FREETEXT value carries no quote."""
    builder = uncached_builder()
    shape = {
        "required_terms": tuple(f"r{i}" for i in range(len(required))),
        "optional_terms": tuple(f"o{i}" for i in range(len(optional))),
        "excluded_terms": tuple(f"x{i}" for i in range(len(excluded))),
        "phrases": tuple(f"p{i}" for i in range(len(phrases))),
    }
    benign = builder.build(issue(**shape)).sql
    built = builder.build(
        issue(
            required_terms=tuple(required),
            optional_terms=tuple(optional),
            excluded_terms=tuple(excluded),
            phrases=tuple(phrases),
        )
    )
    assert built.sql == benign
    for name, value in built.params.items():
        if re.fullmatch(r"t(p|x)?\d+", name):
            assert isinstance(value, str)
            assert value.startswith('"')
            assert value.endswith('"')
            assert value.count('"') == 2
            assert "*" not in value
            assert "\x00" not in value
        elif name == "q":
            assert isinstance(value, str)
            assert '"' not in value
            assert "\x00" not in value
