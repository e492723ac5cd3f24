"""Every statement the Oracle provider sends is valid Oracle SQL to an independent parser.

No Oracle server runs here, so besides the byte-identity suites each rendered shape
(``tests._statement_shapes``: strategies, term kinds, every operator on every field type,
record filters, record-filter templates, lookups, schema-qualified names) is parsed with
sqlglot's ``oracle`` dialect, errors raised, and its ``:name`` binds checked to be
placeholders. The parser checks syntax and where the binds stand, not meaning: what it
cannot check is listed in docs/providers-sqlserver-oracle.md ("What the SQL parsers check").
"""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import ErrorLevel, exp

from esra.oracle._provider import (
    HEALTH_PROBE_SQL,
    READ_ONLY_SQL,
    TEXT_INDEX_HEALTH_SQL,
    bind_params,
)
from tests._statement_shapes import SHAPES
from tests.oracle.conftest import issue, uncached_builder


def _parse(sql: str) -> exp.Expr:
    """One Oracle statement, parsed strictly; a fallback to an opaque ``Command`` fails too."""
    tree = sqlglot.parse_one(sql, read="oracle", error_level=ErrorLevel.RAISE)
    assert not isinstance(tree, exp.Command), sql
    return tree


def _placeholders(tree: exp.Expr) -> set[str]:
    return {p.name for p in tree.find_all(exp.Placeholder)}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_rendered_statement_parses_as_one_select(shape: str) -> None:
    """One SELECT whose ``:name`` placeholders are exactly the execution's binds, none of
    them inside a string literal, the row cap ``FETCH FIRST :lim ROWS ONLY``."""
    query = issue(**SHAPES[shape])
    built = uncached_builder().build(query)
    tree = _parse(built.sql)
    assert isinstance(tree, exp.Select), shape
    assert _placeholders(tree) == set(bind_params(built, query))
    for literal in tree.find_all(exp.Literal):
        assert not (literal.is_string and ":" in literal.this), literal
    fetch = tree.args.get("limit")
    assert isinstance(fetch, exp.Fetch)
    assert _placeholders(fetch) == {"lim"}


@pytest.mark.parametrize("shape", sorted(s for s in SHAPES if "lookup" not in s))
def test_contains_takes_the_expression_as_the_one_bind(shape: str) -> None:
    """Each ``CONTAINS(column, :q[, 1])`` reads its expression from ``:q``; none without terms."""
    overrides = SHAPES[shape]
    tree = _parse(uncached_builder().build(issue(**overrides)).sql)
    calls = list(tree.find_all(exp.Contains))
    has_terms = any(
        overrides.get(kind)
        for kind in ("required_terms", "optional_terms", "excluded_terms", "phrases")
    )
    assert len(calls) == (1 if has_terms else 0)
    for call in calls:
        assert isinstance(call.this, exp.Column)
        assert _placeholders(call) == {"q"}


def test_a_schema_qualifies_every_relation() -> None:
    """With a mapping schema, every table (the NOT EXISTS alias included) names it."""
    tree = _parse(uncached_builder().build(issue(**SHAPES["schema_qualified"])).sql)
    tables = [t for t in tree.find_all(exp.Table) if t.name == "contract_articles"]
    assert tables
    assert {t.db for t in tables} == {"sales"}


def test_the_session_and_health_statements_parse() -> None:
    """SET TRANSACTION READ ONLY and the health probes are valid Oracle SQL with binds."""
    assert isinstance(_parse(READ_ONLY_SQL), exp.Set)
    assert isinstance(_parse(HEALTH_PROBE_SQL), exp.Select)
    health = _parse(TEXT_INDEX_HEALTH_SQL)
    assert isinstance(health, exp.Select)
    assert _placeholders(health) == {"idx", "owner"}


@pytest.mark.parametrize(
    "broken",
    [
        "SELECT b.a FROM t b WHERE (b.a = :f0_0",  # unbalanced parenthesis
        "SELECT b.a FROM t b WHERE b.a = :f0_0)",  # a stray parenthesis
        "SELECT b.a FROM JOIN t b",  # a missing relation
        "SELECT b.a b.c FROM t b",  # a missing comma
    ],
)
def test_the_parser_rejects_broken_statements(broken: str) -> None:
    """Guard: the check has teeth — statements with a syntax error do not parse."""
    with pytest.raises(sqlglot.errors.ParseError):
        sqlglot.parse_one(broken, read="oracle", error_level=ErrorLevel.RAISE)
