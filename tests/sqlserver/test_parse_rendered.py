"""Every statement the SQL Server provider sends is valid T-SQL to an independent parser.

No SQL Server runs here, so besides the byte-identity suites each rendered shape
(``tests._statement_shapes``: strategies, term kinds, every operator on every field type,
record filters, record-filter templates, lookups, schema-qualified names) is turned into the
exact ``sp_executesql`` call the provider makes and parsed with sqlglot's ``tsql`` dialect,
errors raised. The parser checks syntax and where the binds stand, not meaning: what it
cannot check is listed in docs/providers-sqlserver-oracle.md ("What the SQL parsers check").
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlglot
from sqlglot import ErrorLevel, exp

from esra.sqlserver import Isolation
from esra.sqlserver._provider import FULLTEXT_INDEX_SQL, HEALTH_PROBE_SQL, bindable
from esra.sqlserver._rpc import RpcStatement, rpc_statement
from esra.sqlserver._session import ROLLBACK_SQL, session_sql
from tests._statement_shapes import SHAPES
from tests.sqlserver.conftest import issue, uncached_builder

_FULLTEXT_FUNCTIONS = {"CONTAINSTABLE", "FREETEXTTABLE"}


def _parse(sql: str) -> exp.Expr:
    """One T-SQL statement, parsed strictly; a fallback to an opaque ``Command`` fails too."""
    tree = sqlglot.parse_one(sql, read="tsql", error_level=ErrorLevel.RAISE)
    assert not isinstance(tree, exp.Command), sql
    return tree


def _call(overrides: dict[str, Any]) -> RpcStatement:
    built = uncached_builder().build(issue(**overrides))
    return rpc_statement(built.sql, {k: bindable(v) for k, v in built.params.items()})


def _parameters(tree: exp.Expr) -> set[str]:
    return {"@" + p.name for p in tree.find_all(exp.Parameter)}


def _fulltext_calls(tree: exp.Expr) -> list[exp.Anonymous]:
    return [f for f in tree.find_all(exp.Anonymous) if str(f.this).upper() in _FULLTEXT_FUNCTIONS]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_rendered_statement_parses_as_one_select(shape: str) -> None:
    """@stmt is a single SELECT whose @names are exactly the declared and bound parameters,
    none of them swallowed by a string literal; @params is a valid declaration list."""
    statement = _call(SHAPES[shape])
    tree = _parse(statement.text)
    assert isinstance(tree, exp.Select), shape
    bound = {p.name for p in statement.parameters}
    assert _parameters(tree) == bound
    for literal in tree.find_all(exp.Literal):
        assert not (literal.is_string and "@" in literal.this), literal
    declared = _parse("DECLARE " + statement.definition)
    assert isinstance(declared, exp.Declare)
    assert _parameters(declared) == bound
    # Row cap: OFFSET ... FETCH FIRST @lim ROWS ONLY, the cap itself a parameter.
    fetch = tree.args.get("limit")
    assert isinstance(fetch, exp.Fetch)
    assert fetch.find(exp.Parameter) is not None
    assert fetch.find(exp.Parameter).name == "lim"  # type: ignore[union-attr]


@pytest.mark.parametrize("shape", sorted(s for s in SHAPES if "lookup" not in s))
def test_each_full_text_function_takes_its_search_condition_as_a_parameter(shape: str) -> None:
    """CONTAINSTABLE / FREETEXTTABLE(table, (columns), @bind): the condition is never text."""
    tree = _parse(_call(SHAPES[shape]).text)
    calls = _fulltext_calls(tree)
    overrides = SHAPES[shape]
    expected = (
        len(overrides.get("required_terms", ()))
        + len(overrides.get("phrases", ()))
        + len(overrides.get("excluded_terms", ()))
        + (1 if overrides.get("optional_terms") else 0)
    )
    assert len(calls) == expected
    for call in calls:
        table, columns, condition = call.expressions
        assert isinstance(table, exp.Column)
        assert isinstance(columns, exp.Tuple | exp.Paren)
        assert isinstance(condition, exp.Parameter)


def test_a_lookup_has_no_full_text_function() -> None:
    """A document fetch reads by key: ``b.art_key = @lk``, no CONTAINSTABLE."""
    tree = _parse(_call(SHAPES["lookup"]).text)
    assert not [
        f for f in tree.find_all(exp.Anonymous) if str(f.this).upper() in _FULLTEXT_FUNCTIONS
    ]
    assert "@lk" in _parameters(tree)


def test_a_schema_qualifies_every_relation() -> None:
    """With a mapping schema, the base table and each full-text function name it."""
    tree = _parse(_call(SHAPES["schema_qualified"]).text)
    tables = [t for t in tree.find_all(exp.Table) if t.name == "contract_articles"]
    assert tables
    assert {t.db for t in tables} == {"sales"}
    calls = _fulltext_calls(tree)
    assert calls
    for call in calls:
        assert call.expressions[0].sql("tsql") == "sales.contract_articles"


@pytest.mark.parametrize("isolation", list(Isolation))
def test_the_fencing_batch_and_rollback_parse(isolation: Isolation) -> None:
    """SET LOCK_TIMEOUT and BEGIN TRANSACTION parse; so do the rollback and health probes.

    sqlglot's T-SQL grammar knows ``SET TRANSACTION ISOLATION LEVEL READ COMMITTED`` but not
    ``... SNAPSHOT``; that statement is pinned by the exact-text test in ``test_provider``.
    """
    lock, level, begin = session_sql(lock_timeout_ms=2500, isolation=isolation).split("; ")
    assert isinstance(_parse(lock), exp.Set)
    assert isinstance(_parse(begin), exp.Transaction)
    if isolation is Isolation.READ_COMMITTED:
        assert isinstance(_parse(level), exp.Set)
    else:
        assert level == "SET TRANSACTION ISOLATION LEVEL SNAPSHOT"
    assert _parse(ROLLBACK_SQL).find(exp.Rollback) is not None
    assert isinstance(_parse(HEALTH_PROBE_SQL), exp.Select)
    probe = rpc_statement(FULLTEXT_INDEX_SQL, {"name": "[sales].[articles]"})
    assert _parameters(_parse(probe.text)) == {"@name"}


@pytest.mark.parametrize(
    "broken",
    [
        "SELECT b.a FROM t AS b WHERE (b.a = @f0_0",  # unbalanced parenthesis
        "SELECT b.a FROM t AS b WHERE b.a = %(f0_0)s",  # a pyformat placeholder left behind
        "SELECT b.a FROM JOIN t AS b",  # a missing relation
        "SELECT b.a b.c FROM t AS b",  # a missing comma
    ],
)
def test_the_parser_rejects_broken_statements(broken: str) -> None:
    """Guard: the check has teeth — statements with a syntax error do not parse."""
    with pytest.raises(sqlglot.errors.ParseError):
        sqlglot.parse_one(broken, read="tsql", error_level=ErrorLevel.RAISE)
