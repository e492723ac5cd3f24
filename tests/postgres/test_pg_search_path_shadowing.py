"""CVE-2018-1058 against the provider: functions and operators planted on a search path.

A database user who can CREATE in a schema ESRA's reader searches (the schema the source's
tables live in; ``public`` before PostgreSQL 15) can define a function or an operator that
PostgreSQL's overload resolution prefers to ``pg_catalog``'s, and so run code as the reader on
every search: see the bound terms and claims, reorder or admit rows, or fail the search.

Resolution (PostgreSQL docs, "Type Conversion": Functions and Operators) considers every
schema of the search path at once. A candidate of *identical* argument types only loses to
the one earlier in the path — ``pg_catalog`` is implicitly first unless a ``search_path``
names it later. A candidate of *better-matching* types wins wherever it is: an exact match of
the input types is taken at once, and an operator with one ``unknown`` (a text bind) input is
matched as if both inputs had the other's type. So, where ``pg_catalog`` has no exact
operator for the types a statement compares, one planted on those types is chosen:

- ``varchar = unknown`` is looked up as ``=(varchar, varchar)``; ``pg_catalog`` compares
  varchar through ``=(text, text)``, so a planted ``=(varchar, varchar)`` decides every record
  filter on a varchar column;
- ``numeric = smallint`` (an integer filter value on a numeric column), ``float8 = numeric``
  (``nullif(rank, 0.0)``), ``numeric + float8`` (BM25's ``1.0 + ...``) and ``oid = regclass``
  (the row-count estimate's catalogue joins) have no exact ``pg_catalog`` operator either.

Signatures that lose, and are planted anyway as a guard against the statement changing:
an ``unknown`` argument cannot be declared in SQL or PL/pgSQL (the only trusted languages),
so a bind's own type can never be matched exactly; for an ``unknown`` argument, resolution
picks the string category and within it the preferred ``text``, so ``varchar`` and
``anyelement`` variants of ``phraseto_tsquery``, ``to_regclass`` or ``set_config`` lose; and
identical signatures (``@@``, ``&&``, ``||``, ``!!``, ``ts_rank``, ``length``, ``numnode``,
``ln``, ``sign``, ``format_type``) lose to ``pg_catalog`` while it comes first.

The reader here also has a session ``search_path`` naming the planted schema *before*
``pg_catalog``: the statement that pins the transaction's settings runs under the session's
path, so even identical signatures win there unless it names ``pg_catalog`` itself.

Every planted routine raises ``esra-shadow ran: <signature>``; a search that ran one fails.
Each query is run before the shadows exist and again after, and must return the same rows.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import attrs
import pytest
from psycopg import sql

from esra.core._config.source import SourceHealth
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import PlannedFilter, Strategy
from esra.core.exceptions import ProviderError
from esra.core.testing.contract import (
    CONTRACT_MAPPING,
    CONTRACT_ROWS,
    contract_lookup,
    contract_query,
)
from esra.postgres import PostgresProvider, text_index_statements
from tests.postgres.conftest import CONTRACT_CONFIG, admin, host_port, make_provider

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

# The contract table with the column types that expose resolution: varchar keys, category
# and org (the record filter's column), a numeric year (an INTEGER field: int binds).
_COLUMNS = (
    ("art_key", "varchar(8)"),
    ("art_title", "text"),
    ("Art Body", "text"),
    ("art_category", "varchar(20)"),
    ("art_year", "numeric"),
    ("art_org", "varchar(20)"),
    ("art_secret", "text"),
    ("art_published", "date"),
)

_VARCHAR = "character varying"
_FLOAT = "double precision"
# (name, argument types, result type)
_FUNCTIONS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("phraseto_tsquery", ("regconfig", "text"), "tsquery"),
    ("phraseto_tsquery", ("regconfig", _VARCHAR), "tsquery"),
    ("phraseto_tsquery", ("regconfig", "anyelement"), "tsquery"),
    ("ts_rank", ("real[]", "tsvector", "tsquery", "integer"), "real"),
    ("length", ("tsvector",), "integer"),
    ("numnode", ("tsquery",), "integer"),
    ("to_regclass", ("text",), "regclass"),
    ("to_regclass", (_VARCHAR,), "regclass"),
    ("ln", (_FLOAT,), _FLOAT),
    ("ln", ("numeric",), "numeric"),
    ("sign", (_FLOAT,), _FLOAT),
    ("set_config", ("text", "text", "boolean"), "text"),
    ("set_config", (_VARCHAR, _VARCHAR, "boolean"), "text"),
    ("format_type", ("oid", "integer"), "text"),
)
_COMPARED = (
    (_VARCHAR, _VARCHAR),
    ("numeric", "smallint"),
    ("numeric", "integer"),
    ("numeric", "bigint"),
    (_FLOAT, "numeric"),
    ("numeric", _FLOAT),
    ("oid", "regclass"),
    ("regclass", "oid"),
    ("name", "name"),
    ("date", "date"),
)
_COMPARISONS = ("=", "<>", "<", "<=", ">", ">=")
_ARITHMETIC = ("+", "-", "*", "/")
_MIXED = (("numeric", _FLOAT), (_FLOAT, "numeric"))
# (operator, left type or None for a prefix operator, right type, result type)
_OPERATORS: tuple[tuple[str, str | None, str, str], ...] = (
    *((o, left, right, "boolean") for o in _COMPARISONS for left, right in _COMPARED),
    *((o, left, right, _FLOAT) for o in _ARITHMETIC for left, right in _MIXED),
    ("@@", "tsvector", "tsquery", "boolean"),
    ("&&", "tsquery", "tsquery", "tsquery"),
    ("||", "tsquery", "tsquery", "tsquery"),
    ("!!", None, "tsquery", "tsquery"),
)  # fmt: skip


def _plant(conn: Any, schema: str) -> None:
    """Create every shadow in ``schema``: each raises naming its own signature."""
    for name, arguments, result in _FUNCTIONS:
        label = f"{name}({', '.join(arguments)})"
        _shadow(conn, sql.Identifier(schema, name), arguments, result, label)
    for index, (operator, left, right, result) in enumerate(_OPERATORS):
        arguments = (right,) if left is None else (left, right)
        label = f"OPERATOR {operator}({left or 'NONE'}, {right})"
        function = f"esra_shadow_operator_{index}"
        _shadow(conn, sql.Identifier(schema, function), arguments, result, label)
        sides = sql.SQL("RIGHTARG = {}").format(sql.SQL(right))
        if left is not None:
            sides = sql.SQL("LEFTARG = {}, {}").format(sql.SQL(left), sides)
        conn.execute(
            sql.SQL("CREATE OPERATOR {}.{} ({}, FUNCTION = {})").format(
                sql.Identifier(schema),
                sql.SQL(operator),
                sides,
                sql.Identifier(schema, function),
            )
        )


def _shadow(
    conn: Any, name: sql.Identifier, arguments: tuple[str, ...], result: str, label: str
) -> None:
    conn.execute(
        sql.SQL(
            "CREATE FUNCTION {}({}) RETURNS {} LANGUAGE plpgsql VOLATILE AS "
            "$$BEGIN RAISE EXCEPTION USING MESSAGE = {}; END$$"
        ).format(
            name,
            sql.SQL(", ").join(sql.SQL(a) for a in arguments),
            sql.SQL(result),
            sql.Literal(f"esra-shadow ran: {label}"),
        )
    )


@pytest.fixture
def table(pg_dsn: str, pg_schema: str) -> str:
    """The contract rows in a table of exposing column types; returns the schema."""
    relation = sql.Identifier(pg_schema, CONTRACT_MAPPING.relation)
    names = [name for name, _ in _COLUMNS]
    with admin(pg_dsn) as conn:
        conn.execute(
            sql.SQL("CREATE TABLE {} ({})").format(
                relation,
                sql.SQL(", ").join(
                    sql.SQL("{} {}").format(sql.Identifier(n), sql.SQL(t)) for n, t in _COLUMNS
                ),
            )
        )
        with conn.cursor() as cursor:
            cursor.executemany(
                sql.SQL("INSERT INTO {} VALUES ({})").format(
                    relation, sql.SQL(", ").join(sql.Placeholder() for _ in names)
                ),
                [tuple(row[n] for n in names) for row in CONTRACT_ROWS],
            )
        indexed = attrs.evolve(CONTRACT_MAPPING, schema=pg_schema)
        for statement in text_index_statements(indexed, CONTRACT_CONFIG):
            conn.execute(statement)
        # A kept row count, so the statement reads pg_class's (the oid = regclass joins).
        conn.execute(sql.SQL("ANALYZE {}").format(relation))
    return pg_schema


@pytest.fixture(params=["planted schema first", "default"], ids=lambda p: f"session path {p}")
def reader(pg_dsn: str, table: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A login role that may read the table; returns its DSN. Its session ``search_path`` is
    the server's default, or puts the table's schema before ``pg_catalog``."""
    name = f"esra_test_reader_{uuid.uuid4().hex[:10]}"
    role, schema = sql.Identifier(name), sql.Identifier(table)
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(role))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, role))
        conn.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(schema, role))
        if request.param != "default":
            path = sql.SQL("ALTER ROLE {} SET search_path = {}, pg_catalog")
            conn.execute(path.format(role, schema))
    host, port = host_port(pg_dsn)
    yield f"postgresql://{name}@{host}:{port}/{pg_dsn.rsplit('/', 1)[-1]}"
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(role))
        conn.execute(sql.SQL("DROP ROLE {}").format(role))


@pytest.fixture
async def provider(pg_dsn: str, table: str, reader: str) -> AsyncIterator[PostgresProvider]:
    """A provider connecting as the reader (pool of one: every query on the same session)."""
    provider = make_provider(pg_dsn, table, connection=reader, pool_size=1)
    yield provider
    await provider.close()


def _queries(provider: PostgresProvider) -> list[tuple[str, ValidatedQuery]]:
    """Every strategy, with terms of every kind and filters on every exposing column; the
    record filter (org, varchar) on every one; a fetch lookup by the varchar key."""
    filters = (
        PlannedFilter("category", "in", ("energy", "ops", "finance")),
        PlannedFilter("year", "gte", 2020),
        PlannedFilter("year", "lt", 2030),
        PlannedFilter("published", "gt", "2019-01-01"),
    )
    queries: list[tuple[str, ValidatedQuery]] = []
    for strategy in Strategy:
        if strategy is Strategy.RECENT:
            shaped = contract_query(provider, strategy=strategy.value, filters=filters)
        else:
            shaped = contract_query(
                provider,
                strategy=strategy.value,
                required=("solar",),
                optional=("panel", "inverter"),
                excluded=("wind",),
                phrases=("solar panel",),
                filters=filters,
            )
        queries.append((strategy.value, shaped))
    queries.append(("equal filter", contract_query(
        provider, optional=("inverter",), filters=(PlannedFilter("category", "eq", "ops"),
                                                    PlannedFilter("year", "eq", 2022)),
    )))  # fmt: skip
    queries.append(("lookup", contract_lookup("a07")))
    return queries


async def _keys(provider: PostgresProvider, query: ValidatedQuery) -> list[str]:
    return [row.key for row in await provider.execute(query, timeout_s=20)]


async def test_no_planted_function_or_operator_runs_in_a_search(
    pg_dsn: str, table: str, provider: PostgresProvider, caplog: pytest.LogCaptureFixture
) -> None:
    """Shadows of every signature that could win resolution, planted in the schema on the
    reader's search path (session and statement): every strategy, equality
    filters and a fetch return what they returned before, and health stays up."""
    queries = _queries(provider)
    before = {label: await _keys(provider, query) for label, query in queries}
    assert before["keyword"], "the baseline must return rows for the shadows to be called on"
    assert before["lookup"] == ["a07"]
    with admin(pg_dsn) as conn:
        _plant(conn, table)
    caplog.set_level(logging.WARNING, logger="esra.postgres")
    ran: dict[str, str] = {}
    for label, query in queries:
        try:
            after = await _keys(provider, query)
        except ProviderError as error:
            shadows = [
                r.getMessage() for r in caplog.records if "esra-shadow ran" in r.getMessage()
            ]
            ran[label] = f"{error.code}: {shadows[-1] if shadows else 'no shadow logged'}"
            continue
        assert after == before[label], label
    assert ran == {}
    health = await provider.health()
    assert health is SourceHealth.HEALTHY, health
