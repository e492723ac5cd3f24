"""Every engine but Oracle escapes its delimiter inside a configured name: one identifier.

PostgreSQL and SQLite double a ``"`` inside ``"…"``, MySQL a backtick inside backticks, SQL
Server a ``]`` inside ``[…]`` — each engine's own escape, which its parser reads back as the
one name. (Oracle has no such escape and refuses the name: ``tests/oracle/test_identifiers``.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine.interfaces import Dialect

from esra.core._config.mapping import FieldType, Operator
from esra.core._query import ResolvedFilter
from esra.sql import CompiledStatementCache, StatementBuilder
from tests.sql.conftest import HOSTILE_MAPPING, PlainFullText, issue

NAMES = ('a"b', "a]b", "a`b", "a[b", "a'b", 'x"] `y; --')


def _attribute(module: str, name: str) -> Any:
    return getattr(pytest.importorskip(module), name)


def _sqlserver() -> Dialect:
    dialect: Dialect = _attribute("esra.sqlserver._provider", "sqlserver_dialect")()
    return dialect


def _doubled(opening: str, closing: str) -> Callable[[str], str]:
    return lambda name: opening + name.replace(closing, closing * 2) + closing


ENGINES: dict[str, tuple[Callable[[], Dialect], Callable[[str], str]]] = {
    "postgresql": (
        lambda: postgresql.psycopg.dialect(paramstyle="pyformat"),  # type: ignore[no-untyped-call]
        _doubled('"', '"'),
    ),
    "sqlite": (lambda: sqlite.dialect(paramstyle="named"), _doubled('"', '"')),
    "mysql": (lambda: _attribute("esra.mysql._quote", "DIALECT"), _doubled("`", "`")),
    "sqlserver": (_sqlserver, _doubled("[", "]")),
}


# Plain names that need quoting too (a space), so the plain statement delimits them.
PLAIN_RELATION, PLAIN_COLUMN = "plain docs", "plain category"


def _sql(engine: str, *, relation: str = PLAIN_RELATION, column: str = PLAIN_COLUMN) -> str:
    dialect, _ = ENGINES[engine]
    builder = StatementBuilder(dialect(), PlainFullText(), cache=CompiledStatementCache(0))
    mapping = attrs.evolve(HOSTILE_MAPPING, schema=None, relation=relation)
    flt = ResolvedFilter(column, FieldType.TEXT, Operator.EQ, ("news",))
    return builder.build(issue(mapping, filters=(flt,))).sql


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("engine", ENGINES)
def test_a_relation_is_one_identifier_in_the_engines_escape(engine: str, name: str) -> None:
    """The statement is the plain relation's, with the name in its escaped form instead."""
    _, quoted = ENGINES[engine]
    plain = _sql(engine)
    assert quoted(PLAIN_RELATION) in plain
    assert _sql(engine, relation=name) == plain.replace(quoted(PLAIN_RELATION), quoted(name))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("engine", ENGINES)
def test_a_column_is_one_identifier_in_the_engines_escape(engine: str, name: str) -> None:
    """The statement is the plain column's, with the name in its escaped form instead."""
    _, quoted = ENGINES[engine]
    plain = _sql(engine)
    assert quoted(PLAIN_COLUMN) in plain
    assert _sql(engine, column=name) == plain.replace(quoted(PLAIN_COLUMN), quoted(name))
