"""The shared builder emits a mapping's schema as one identifier on every target dialect.

SQLAlchemy's ``mssql`` quoter splits a plain schema string on ``.`` into ``database.owner`` and
emits a part holding internal brackets verbatim, so the builder hands it the schema as one
quoted name whenever the dialect would quote it anyway. Every other dialect quotes a schema as
one identifier already; their text must stay byte-identical to the plain string's.
"""

from __future__ import annotations

import attrs
import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.dialects import mssql, mysql, oracle, postgresql, sqlite
from sqlalchemy.engine.interfaces import Dialect

from esra.sql import CompiledStatementCache, StatementBuilder
from tests.sql.conftest import HOSTILE_MAPPING, PlainFullText, issue

_SCHEMAS = (
    "sales", "Sales Ops", 'sch"ema', "HR", "select", "a.b", "[a].b", "a]b", "x y.z",
    "[a].x; SELECT 1--.[c].dbo", "db`x", "_x$", "1abc",
)  # fmt: skip
_OTHER_DIALECTS = [
    sqlite.dialect(paramstyle="named"),
    postgresql.psycopg.dialect(),  # type: ignore[no-untyped-call]
    mysql.pymysql.dialect(paramstyle="pyformat"),
    oracle.oracledb.dialect(),  # type: ignore[no-untyped-call]
]
_MSSQL = mssql.pymssql.dialect(paramstyle="pyformat")  # type: ignore[no-untyped-call]
_RELATION = "docs"


def _from_clause(dialect: Dialect, schema: str) -> str:
    mapping = attrs.evolve(HOSTILE_MAPPING, relation=_RELATION, schema=schema)
    builder = StatementBuilder(dialect, PlainFullText(), cache=CompiledStatementCache(0))
    search = builder.build(issue(mapping)).sql
    lookup = builder.build(issue(mapping, lookup_key="k1")).sql
    (search_from,) = {
        ln.rstrip()
        for ln in search.split("\n")
        if ln.startswith("FROM ") and not ln.startswith("FROM (")
    }
    (lookup_from,) = {
        ln.rstrip()
        for ln in lookup.split("\n")
        if ln.startswith("FROM ") and not ln.startswith("FROM (")
    }
    assert search_from == lookup_from
    return search_from


@pytest.mark.parametrize("schema", _SCHEMAS)
@pytest.mark.parametrize(
    "dialect", _OTHER_DIALECTS, ids=["sqlite", "postgresql", "mysql", "oracle"]
)
def test_other_dialects_quote_the_schema_as_the_plain_string(dialect: Dialect, schema: str) -> None:
    """Byte for byte what SQLAlchemy renders for the schema given as a plain string."""
    plain = dialect.identifier_preparer.format_table(sa.table(_RELATION, schema=schema))
    assert _from_clause(dialect, schema) in {f"FROM {plain} AS b", f"FROM {plain} b"}


@pytest.mark.parametrize(
    ("schema", "qualifier"),
    [
        ("sales", "sales"),
        ("Sales Ops", "[Sales Ops]"),
        ("select", "[select]"),
        ("a.b", "[a.b]"),
        ("[a].b", "[[a]].b]"),
        ("a]b", "[a]]b]"),
        ("[a].x; SELECT 1--.[c].dbo", "[[a]].x; SELECT 1--.[c]].dbo]"),
    ],
)
def test_sql_server_gets_the_schema_as_one_identifier(schema: str, qualifier: str) -> None:
    """Never split into database and owner, never a bracketed part emitted verbatim."""
    assert _from_clause(_MSSQL, schema) == f"FROM {qualifier}.docs AS b"


@settings(max_examples=200, deadline=None)
@given(schema=st.text(alphabet=st.sampled_from("ab_$1 .[]\"';-é"), min_size=1, max_size=16))
def test_any_schema_is_one_sql_server_identifier(schema: str) -> None:
    """The qualifier is the schema itself (an ordinary identifier) or ``[schema]`` with each
    ``]`` doubled: nothing of it is ever outside one identifier."""
    qualifier = _from_clause(_MSSQL, schema).removeprefix("FROM ").removesuffix(".docs AS b")
    if qualifier != schema:
        assert qualifier == "[" + schema.replace("]", "]]") + "]"
    else:
        assert not set(schema) & set(" .[]\"';-é")
