"""Tests for esra.sqlite._fulltext: FTS5 strings, MATCH composition, and a reserved-syntax fuzz."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esra.core._config.mapping import FieldSpec, FieldType, Mapping
from esra.core._pipeline.values import ValidatedQuery, _issue
from esra.core._query import ProjectedField, Strategy
from esra.core.exceptions import ProviderError
from esra.sql import SearchTerms
from esra.sqlite import SqliteFts5Provider
from esra.sqlite._fulltext import fts5_match_expression, fts5_string
from tests.sqlite.conftest import run_query, seed_database


def test_fts5_string_quotes_and_doubles_quotes() -> None:
    """A term becomes one FTS5 string; inner double quotes are doubled."""
    assert fts5_string('say "hi" NEAR(x)') == '"say ""hi"" NEAR(x)"'


def test_fts5_string_turns_nul_into_a_separator() -> None:
    """NUL would end the FTS5 query early; it becomes a space, never a syntax error."""
    assert fts5_string("a\x00b") == '"a b"'


@pytest.mark.parametrize(
    ("terms", "expected"),
    [
        (SearchTerms(required=("a", "b")), '("a" AND "b")'),
        (SearchTerms(optional=("a", "b")), '("a" OR "b")'),
        (SearchTerms(phrases=("a b",)), '"a b"'),
        (SearchTerms(required=("a",), optional=("b", "c")), '"a" AND ("a" OR "b" OR "c")'),
        (SearchTerms(optional=("a",), excluded=("x", "y")), '("a") NOT ("x" OR "y")'),
        (SearchTerms(excluded=("x", "y")), '"x" OR "y"'),
        (SearchTerms(), ""),
    ],
)
def test_match_expression_composition(terms: SearchTerms, expected: str) -> None:
    """Required/phrases AND, optional OR (only a boost beside required), excluded via NOT."""
    assert fts5_match_expression(terms) == expected


# --- the fuzz: reserved FTS5 syntax inside terms is searched for literally -------------------

_FUZZ_MAPPING = Mapping(
    id="fuzz",
    tenant_id="t",
    source_id="s",
    business_name="Fuzz",
    description="",
    relation="fuzz_docs",
    record_key="doc_key",
    title_field="body",
    content_fields=(),
    fields=(FieldSpec("body", "body", is_searchable=True, is_returnable=True),),
    text_index="fuzz_fts",
)
_WORDS = ("alpha", "beta", "near", "and", "or", "not", "star", "gamma")
_BODIES = (
    "alpha beta",
    "beta alpha",
    "alpha near beta",
    "near and or not",
    "not alpha",
    "star gamma alpha",
    "gamma",
    "and or",
    "alpha and beta or gamma",
    "near alpha",
)
_RESERVED = ('"', "*", "(", ")", ":", "^", "-", "+", "NEAR", "AND", "OR", "NOT", "{", "}", ",")
_PIECE = st.sampled_from((*_RESERVED, *_WORDS, " ", "ALPHA", "Beta", "'", "."))
_TERM = st.lists(_PIECE, min_size=1, max_size=6).map("".join)
_TOKEN = re.compile(r"[a-z0-9]+")


def _tokens(text: str) -> list[str]:
    # unicode61 on ASCII: runs of letters and digits, case-folded; everything else separates.
    return _TOKEN.findall(text.lower())


def _contains(body: str, term: str) -> bool:
    needle, hay = _tokens(term), _tokens(body)
    if not needle:
        return False  # an FTS5 string without tokens matches nothing
    return any(hay[i : i + len(needle)] == needle for i in range(len(hay) - len(needle) + 1))


def _expected(required: list[str], optional: list[str], excluded: list[str]) -> set[str]:
    out = set()
    for i, body in enumerate(_BODIES):
        if required:
            hit = all(_contains(body, t) for t in required)
        else:
            hit = any(_contains(body, t) for t in optional)
        if hit and not any(_contains(body, t) for t in excluded):
            out.add(f"d{i}")
    return out


@pytest.fixture(scope="module")
def fuzz_provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqliteFts5Provider]:
    """A provider over the ten fuzz bodies, shared by every example."""
    path = tmp_path_factory.mktemp("fuzz") / "fuzz.db"
    rows = [{"doc_key": f"d{i}", "body": body} for i, body in enumerate(_BODIES)]
    seed_database(
        path, _FUZZ_MAPPING, [("doc_key", FieldType.TEXT), ("body", FieldType.TEXT)], rows
    )
    provider = SqliteFts5Provider(path)
    yield provider
    provider.close()


def _fuzz_query(required: list[str], optional: list[str], excluded: list[str]) -> ValidatedQuery:
    # Issued directly: the validator would pass these terms too, but the property must hold
    # for anything that reaches the provider.
    return _issue(
        query_id="s#1",
        source_id="s",
        mapping=_FUZZ_MAPPING,
        strategy=Strategy.KEYWORD,
        required_terms=tuple(required),
        optional_terms=tuple(optional),
        excluded_terms=tuple(excluded),
        phrases=(),
        filters=(),
        record_filters=(),
        projection=(ProjectedField("body", "body"),),
        freshness=None,
        row_limit=50,
    )


@settings(max_examples=150, deadline=None)
@given(
    required=st.lists(_TERM, max_size=2),
    optional=st.lists(_TERM, max_size=2),
    excluded=st.lists(_TERM, max_size=2),
)
def test_reserved_syntax_is_matched_literally(
    fuzz_provider: SqliteFts5Provider,
    required: list[str],
    optional: list[str],
    excluded: list[str],
) -> None:
    """Terms built from FTS5 operators and punctuation never fail and match as plain text."""
    if not (required or optional):
        optional = ["alpha"]
    try:
        rows = run_query(fuzz_provider, _fuzz_query(required, optional, excluded))
    except ProviderError as exc:  # pragma: no cover - the property under test
        pytest.fail(f"term content was interpreted as syntax: {exc.code}")
    assert {r.key for r in rows} == _expected(required, optional, excluded)


def test_excluded_only_query_keeps_everything_else(fuzz_provider: SqliteFts5Provider) -> None:
    """A term-less RECENT query with excluded terms drops just the rows matching them.

    ``NOT "`` is excluded as the literal word "not", not as an operator.
    """
    query = _issue(
        query_id="s#1",
        source_id="s",
        mapping=_FUZZ_MAPPING,
        strategy=Strategy.RECENT,
        required_terms=(),
        optional_terms=(),
        excluded_terms=("alpha", 'NOT "'),
        phrases=(),
        filters=(),
        record_filters=(),
        projection=(ProjectedField("body", "body"),),
        freshness=None,
        row_limit=50,
    )
    keys = {r.key for r in run_query(fuzz_provider, query)}
    kept = {f"d{i}" for i, b in enumerate(_BODIES) if not {"alpha", "not"} & set(b.split())}
    assert keys == kept


def test_raw_fts5_syntax_would_have_failed(tmp_path: Path) -> None:
    """Guard for the fuzz: the same content unquoted really is FTS5 syntax (and errors)."""
    path = tmp_path / "raw.db"
    rows = [{"doc_key": "d0", "body": "alpha"}]
    seed_database(
        path, _FUZZ_MAPPING, [("doc_key", FieldType.TEXT), ("body", FieldType.TEXT)], rows
    )
    with sqlite3.connect(path) as connection, pytest.raises(sqlite3.OperationalError):
        connection.execute("SELECT * FROM fuzz_fts WHERE fuzz_fts MATCH ?", ("alpha AND (",))
    connection.close()
