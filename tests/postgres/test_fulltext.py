"""Tests for esra.postgres._fulltext: rendered SQL per shape, binds, and a live reserved fuzz."""

from __future__ import annotations

import asyncio
import re

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect

from esra.core._config.mapping import FieldSpec, FieldType, Mapping
from esra.core._pipeline.values import ValidatedQuery, _issue
from esra.core._query import ProjectedField, Strategy
from esra.postgres import TsvectorFullText
from esra.postgres._fulltext import term_bind_names
from esra.sql import SearchTerms, TermShape, TextTarget
from tests.postgres.conftest import make_provider, seed_table

_DIALECT = psycopg_dialect.dialect(paramstyle="pyformat")  # type: ignore[no-untyped-call]
_Q = "phraseto_tsquery(CAST(%(qcfg)s AS REGCONFIG), %({})s)"


def _bm25(*names: str) -> str:
    """The expected score: per term, the statement's weight (idf × (k1 + 1)) over one plus
    the row's length saturation times the reciprocal of the term's occurrences, 0 where it
    does not occur (the parts are the statistics row's and the ranks', in the from-clause;
    their values are checked against BM25 on the server in test_bm25)."""
    return " + ".join(
        f"coalesce(esra_stats.w_{n} / CAST((1.0 + esra_ranks.saturation * "
        f"esra_ranks.inverse_tf_{n}) AS FLOAT), 0.0)"
        for n in names
    )


def _render(shape: TermShape) -> str:
    base = sa.table("docs", sa.column("k")).alias("b")
    clause = TsvectorFullText().clause(TextTarget(base, base.c.k, (), "Doc Fts", None), shape)
    predicate = "" if clause.predicate is None else str(clause.predicate.compile(dialect=_DIALECT))
    return predicate + " | " + str(clause.score.compile(dialect=_DIALECT))


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        (TermShape(), " | 0.0"),
        (
            TermShape(optional=2),
            f'b."Doc Fts" @@ ({_Q.format("to0")} || {_Q.format("to1")}) | ' + _bm25("to0", "to1"),
        ),
        (
            TermShape(required=1, phrases=1),
            f'b."Doc Fts" @@ ({_Q.format("tr0")} && {_Q.format("tp0")}) | ' + _bm25("tr0", "tp0"),
        ),
        (
            TermShape(required=1, optional=1, excluded=1),
            f'b."Doc Fts" @@ ({_Q.format("tr0")} && (!! {_Q.format("tx0")})) | '
            + _bm25("tr0", "to0"),
        ),
        (
            TermShape(excluded=2),
            f'NOT (b."Doc Fts" @@ ({_Q.format("tx0")} || {_Q.format("tx1")})) | 0.0',
        ),
    ],
)
def test_rendered_clause_per_shape(shape: TermShape, expected: str) -> None:
    """Snapshot of the predicate and score: every term its own bound phraseto_tsquery."""
    assert _render(shape) == expected


def test_no_operator_parsing_function_is_ever_used() -> None:
    """to_tsquery and websearch_to_tsquery (user-controlled operators) never appear."""
    text = _render(TermShape(required=3, optional=3, excluded=3, phrases=3))
    assert not re.search(r"(?<!phrase)(?<!plain)to_tsquery|websearch", text)
    # The match: 3 required && 3 phrases && !!(3 excluded). The rank's tsqueries are made
    # once, in the statistics row of the from-clause, which is not rendered here.
    assert text.count("CAST(%(qcfg)s AS REGCONFIG)") == 9


def test_bind_values_carry_the_config_and_every_term() -> None:
    """Values go under deterministic names; a term-less query binds nothing."""
    terms = SearchTerms(required=("a",), optional=("b", "c"), excluded=("d",), phrases=("e f",))
    values = TsvectorFullText("simple").bind_values(terms)
    assert values == {
        "qcfg": "simple",
        "tr0": "a",
        "to0": "b",
        "to1": "c",
        "tp0": "e f",
        "tx0": "d",
    }
    assert set(term_bind_names(terms.shape)["optional"]) == {"to0", "to1"}
    assert TsvectorFullText().bind_values(SearchTerms()) == {}


# --- the fuzz: tsquery syntax and reserved characters inside terms are literal ---------------

_FUZZ_MAPPING = Mapping(
    id="fuzz",
    tenant_id="t-contract",
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
# tsquery's own syntax plus FTS punctuation: none of it may act as an operator.
_RESERVED = ("&", "|", "!", "<->", "<2>", ":*", ":A", "(", ")", "'", '"', "\\", "*", "-", "+")
_PIECE = st.sampled_from((*_RESERVED, *_WORDS, " ", "ALPHA", "Beta", ".", ",", ";"))
_TERM = st.lists(_PIECE, min_size=1, max_size=6).map("".join)


def _fuzz_query(term: str) -> ValidatedQuery:
    return _issue(
        query_id="s#1",
        source_id="s",
        mapping=_FUZZ_MAPPING,
        strategy=Strategy.KEYWORD,
        required_terms=(term,),
        optional_terms=(),
        excluded_terms=(),
        phrases=(),
        filters=(),
        record_filters=(),
        projection=(ProjectedField("body", "body"),),
        freshness=None,
        row_limit=50,
    )


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


# PostgreSQL's parser reads "a-b" as a hyphenated word (plus its parts), "a.b" as a host and
# ".." as a file path: tokens no body holds, matched literally all the same. For terms with
# such characters only the subset is asserted.
_COMPOUND = re.compile(r"[-./\\]")
# It also reads "&alpha;" as an XML entity and "<b>" as a tag, token types no text-search
# configuration indexes: they drop out of the query, as they drop out of every document.
_MARKUP = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]*|#[0-9]+|#x[0-9A-Fa-f]+);|<[A-Za-z/!?][^<>]*>")


def _contains_sequence(body: str, words: list[str]) -> bool:
    tokens = _words(body)
    return any(tokens[i : i + len(words)] == words for i in range(len(tokens) - len(words) + 1))


@pytest.mark.postgres
@pytest.mark.integration
def test_reserved_syntax_in_terms_is_matched_literally(pg_dsn: str, pg_schema: str) -> None:
    """A term built from tsquery operators and words never fails; it matches exactly the
    rows holding its words in order (none when it has no word)."""
    rows = [{"doc_key": f"d{i:02d}", "body": body} for i, body in enumerate(_BODIES)]
    seed_table(
        pg_dsn,
        pg_schema,
        _FUZZ_MAPPING,
        (("doc_key", FieldType.TEXT), ("body", FieldType.TEXT)),
        rows,
    )
    loop = asyncio.new_event_loop()
    provider = make_provider(pg_dsn, pg_schema, mappings=(_FUZZ_MAPPING,))

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(term=_TERM)
    def check(term: str) -> None:
        found = loop.run_until_complete(provider.execute(_fuzz_query(term), timeout_s=10))
        words = _words(_MARKUP.sub(" ", term))
        expected = {r["doc_key"] for r in rows if words and _contains_sequence(r["body"], words)}
        if _COMPOUND.search(term):
            assert {r.key for r in found} <= expected, term
        else:
            assert {r.key for r in found} == expected, term

    try:
        check()
    finally:
        loop.run_until_complete(provider.close())
        loop.close()
