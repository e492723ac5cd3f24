"""The MATCH/LIKE full-text strategy: rendering per flavour, bind values, and a live fuzz.

MySQL 8 paths (the MAX_EXECUTION_TIME hint) are tested on rendering only: no MySQL 8 server
runs here. The fuzz runs live on MariaDB: reserved characters and words never cause a
SYNTAX_ERROR and are matched literally.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from esra.core._config.mapping import FieldType, Operator
from esra.core._pipeline.values import ValidatedQuery, _issue
from esra.core._query import ProjectedField, ResolvedFilter, Strategy
from esra.core.testing.contract import CONTRACT_MAPPING, CONTRACT_ROWS
from esra.mysql import MatchAgainstFullText, MySqlProvider, ServerFlavor
from esra.mysql._fulltext import TokenRules, indexable_tokens, like_pattern, match_string
from esra.mysql._quote import DIALECT
from esra.mysql._server import with_timeout
from esra.sql import CompiledStatementCache, SearchTerms, StatementBuilder
from tests.mysql.conftest import Server, close_now, run_query


def _query(
    required: tuple[str, ...] = (),
    optional: tuple[str, ...] = (),
    excluded: tuple[str, ...] = (),
    phrases: tuple[str, ...] = (),
) -> ValidatedQuery:
    return _issue(
        query_id="src-contract#1", source_id=CONTRACT_MAPPING.source_id,
        mapping=CONTRACT_MAPPING, strategy=Strategy.KEYWORD, required_terms=required,
        optional_terms=optional, excluded_terms=excluded, phrases=phrases, filters=(),
        record_filters=(ResolvedFilter("art_org", FieldType.TEXT, Operator.EQ, ("acme",)),),
        projection=(ProjectedField("title", "art_title"),), freshness=None, row_limit=50,
    )  # fmt: skip


def test_match_string_leaves_only_words() -> None:
    """Quotes and every operator character become separators; words are untouched."""
    assert match_string('"solar" +panel -x* (a) ~b @3 <c> "') == "solar panel x a b 3 c"
    assert match_string("*") == ""
    assert match_string("naïve_ünicode") == "naïve_ünicode"


def test_like_pattern_escapes_wildcards() -> None:
    """``! % _`` are escaped with ``!``; whitespace runs collapse to one space."""
    assert like_pattern("50%_off!") == "%50!%!_off!!%"
    assert like_pattern("  solar \n panel ") == "%solar panel%"


def test_indexable_tokens_follow_the_server_rules() -> None:
    """Short tokens and stopwords are not indexable; custom rules are honoured."""
    rules = TokenRules()
    assert indexable_tokens("AI in the c++ lab", rules) == ("lab",)
    assert indexable_tokens("the", rules) == ()
    assert indexable_tokens("AI lab", TokenRules(min_token=2, stopwords=frozenset())) == (
        "ai",
        "lab",
    )


def test_bind_values_flag_terms_match_cannot_see() -> None:
    """A required term without an indexable token switches its MATCH off but keeps its LIKE;
    an optional one gets a LIKE only when MATCH cannot see it."""
    values = MatchAgainstFullText().bind_values(
        SearchTerms(required=("c++", "solar"), optional=("AI",), excluded=("x%",))
    )
    assert values["tr0x"] == 1
    assert values["tr0l"] == "%c++%"
    assert values["tr1x"] == 0
    assert "to0l" not in values  # with required terms, optional ones only score
    assert values["te0l"] == "%x!%%"
    optional_only = MatchAgainstFullText().bind_values(SearchTerms(optional=("AI", "solar")))
    assert optional_only["to0l"] == "%AI%"
    assert optional_only["to1l"] is None


def test_a_term_of_several_indexed_words_is_scored_as_one_occurrence() -> None:
    """Occurrences are counted (``tb<i>w`` 1) for a term InnoDB reads as one word, stopwords
    and short tokens aside; a term of several words counts one occurrence (0) and binds its
    first word, from which ``N`` is read back (``tb<i>n``; empty for one word)."""
    values = MatchAgainstFullText().bind_values(
        SearchTerms(required=("the solar",), optional=("heat-transfer", "AI"), phrases=("a b",))
    )
    assert [values[f"tb{i}w"] for i in range(4)] == [1, 0, 1, 1]
    assert [values[f"tb{i}n"] for i in range(4)] == ["", "heat", "", ""]


@pytest.mark.parametrize("flavor", list(ServerFlavor))
def test_rendered_statement_per_flavor(flavor: ServerFlavor) -> None:
    """Natural-language MATCH only, bound values, LIKE with ESCAPE, bounded per flavour."""
    builder = StatementBuilder(DIALECT, MatchAgainstFullText(), cache=CompiledStatementCache(0))
    sql = builder.build(
        _query(required=("solar",), optional=("x",), excluded=("y",), phrases=("a b",))
    ).sql
    bounded = with_timeout(sql, flavor, 1.5)
    assert "BOOLEAN MODE" not in sql
    assert "WITH QUERY EXPANSION" not in sql
    # Every MATCH is natural-language: the required term's and the phrase's (the predicate),
    # each positive term's own (its BM25 statistics and score) and its first word's (``N``).
    against = re.findall(r"AGAINST \(%\((\w+)\)s( IN NATURAL LANGUAGE MODE)?\)", sql)
    assert all(mode for _, mode in against)
    scored = {"tb0", "tb1", "tb2", "tb0n", "tb1n", "tb2n"}
    assert {bind for bind, _ in against} == {"tr0", "tp0", *scored}
    assert "LIKE %(tr0l)s ESCAPE '!'" in sql
    assert "NOT (coalesce(b.art_title, '') LIKE %(te0l)s ESCAPE '!'" in sql
    assert sql.endswith("LIMIT %(lim)s")
    if flavor is ServerFlavor.MARIADB:
        assert bounded == f"SET STATEMENT max_statement_time=1.500 FOR {sql}"
    else:
        assert bounded == "SELECT /*+ MAX_EXECUTION_TIME(1500) */ " + sql[len("SELECT ") :]


def test_timeout_is_never_unbounded() -> None:
    """A zero timeout is a 1 ms limit, never MariaDB's 0 (= no limit); only SELECTs."""
    assert "max_statement_time=0.001 " in with_timeout("SELECT 1", ServerFlavor.MARIADB, 0.0)
    assert "MAX_EXECUTION_TIME(1)" in with_timeout("SELECT 1", ServerFlavor.MYSQL, 0.0)
    with pytest.raises(ValueError, match="SELECT"):
        with_timeout("DELETE FROM t", ServerFlavor.MYSQL, 1.0)
    with pytest.raises(ValueError, match="finite"):
        with_timeout("SELECT 1", ServerFlavor.MARIADB, float("inf"))


_RESERVED = [*list("+-<>()~*\"@%_!\\'`;:^"), "AND", "OR", "NOT", "NEAR", "IN BOOLEAN MODE", "--"]
_WORDS = ["solar", "panel", "inverter", "alpha", "the", "or", "ai"]
_TERM = st.lists(st.sampled_from(_RESERVED + _WORDS), min_size=1, max_size=4).map("".join) | (
    st.lists(st.sampled_from(_RESERVED + _WORDS), min_size=1, max_size=4).map(" ".join)
)
_TEXTS = {str(r["art_key"]): f"{r['art_title']} {r['Art Body']}" for r in CONTRACT_ROWS}
_ACME = {k for k, r in ((str(r["art_key"]), r) for r in CONTRACT_ROWS) if r["art_org"] == "acme"}


@pytest.fixture(scope="module")
def fuzz_provider(server: Server, contract_database: str) -> Iterator[MySqlProvider]:
    """One provider for every fuzz example."""
    provider = server.provider(contract_database)
    yield provider
    close_now(provider)


@pytest.mark.mysql
@pytest.mark.integration
@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(required=_TERM, excluded=_TERM)
def test_reserved_syntax_is_matched_literally(
    fuzz_provider: MySqlProvider, required: str, excluded: str
) -> None:
    """No SYNTAX_ERROR (or any error); every row contains the required text and not the
    excluded text, compared as collapsed-whitespace, case-insensitive substrings."""
    rows = run_query(fuzz_provider, _query(required=(required,), excluded=(excluded,)))
    want = " ".join(required.split()).lower()
    avoid = " ".join(excluded.split()).lower()
    for row in rows:
        text = _TEXTS[row.key].lower()
        assert row.key in _ACME
        assert want in text
        assert not avoid or avoid not in text
    expected = {
        k
        for k in _ACME
        if want in _TEXTS[k].lower() and (not avoid or avoid not in _TEXTS[k].lower())
    }
    matched = {r.key for r in rows}
    # MATCH can only narrow what LIKE allows when a token is indexable; it never widens.
    assert matched <= expected
    if not indexable_tokens(required, TokenRules()):
        assert matched == expected
