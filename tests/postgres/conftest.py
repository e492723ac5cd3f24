"""Shared helpers for the PostgreSQL tests: a private schema per test, seeding, providers.

Every live test works in its own schema ``esra_test_postgres_<random>`` (created and dropped
here), so suites can run side by side on one server. Locally an unset or unreachable
``ESRA_TEST_POSTGRES_DSN`` skips the live tests; under ``CI=true`` it fails them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

from esra.core._config.mapping import FieldType
from esra.core._config.mapping import Mapping as EsraMapping
from esra.core.ports import SecretStore
from esra.core.testing import InMemorySecretStore, StaticHostAllowlist
from esra.core.testing.contract import CONTRACT_DATASET, ContractDataset
from esra.postgres import PostgresProvider, text_index_statements
from esra.sql import BuiltStatement
from tests._databases import require_dsn, unreachable

DSN_VARIABLE = "ESRA_TEST_POSTGRES_DSN"
# The contract's expectations are about literal text, so the contract runs with the
# 'simple' configuration (no stop words, no stemming); 'english' is tested on its own.
CONTRACT_CONFIG = "simple"

_SQL_TYPES = {
    FieldType.TEXT: "text",
    FieldType.INTEGER: "integer",
    FieldType.NUMBER: "double precision",
    FieldType.BOOLEAN: "boolean",
    FieldType.DATE: "date",
}


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """The test server's DSN, after checking it answers."""
    dsn = require_dsn(DSN_VARIABLE)
    try:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        unreachable(DSN_VARIABLE, f"cannot connect ({type(exc).__name__})")
    return dsn


def admin(dsn: str) -> psycopg.Connection[tuple[object, ...]]:
    """An autocommit administrative connection (the tests' own, never the provider's)."""
    return psycopg.connect(dsn, autocommit=True)


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """A fresh schema for one test, dropped (with everything in it) afterwards."""
    name = f"esra_test_postgres_{uuid.uuid4().hex[:12]}"
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    yield name
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


def seed_table(
    dsn: str,
    schema: str,
    mapping: EsraMapping,
    columns: Sequence[tuple[str, FieldType]],
    rows: Sequence[Mapping[str, object]],
    *,
    with_index: bool = True,
    config: str = CONTRACT_CONFIG,
) -> None:
    """Create ``mapping.relation`` in ``schema``, insert ``rows``, add the tsvector index."""
    names = [name for name, _ in columns]
    table = sql.Identifier(schema, mapping.relation)
    ddl = sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(name), sql.SQL(_SQL_TYPES[kind]))
        for name, kind in columns
    )
    insert = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
        table,
        sql.SQL(", ").join(map(sql.Identifier, names)),
        sql.SQL(", ").join(sql.Placeholder() for _ in names),
    )
    with admin(dsn) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} ({})").format(table, ddl))
        with conn.cursor() as cursor:
            cursor.executemany(insert, [tuple(row[name] for name in names) for row in rows])
        if with_index:
            indexed = _in_schema(mapping, schema)
            for statement in text_index_statements(indexed, config):
                conn.execute(statement)


def _in_schema(mapping: EsraMapping, schema: str) -> EsraMapping:
    import attrs

    return attrs.evolve(mapping, schema=schema)


def seed_contract(dsn: str, schema: str, dataset: ContractDataset = CONTRACT_DATASET) -> None:
    """Seed the provider contract suite's standard dataset into ``schema``."""
    seed_table(dsn, schema, dataset.mapping, dataset.columns, dataset.rows)


def table_counts(dsn: str, schema: str) -> dict[str, int]:
    """Return the row count of every table in ``schema``."""
    with admin(dsn) as conn:
        names = [
            str(row[0])
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", (schema,)
            )
        ]
        counts = {}
        for name in names:
            row = conn.execute(
                sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, name))
            ).fetchone()
            counts[name] = int(str(row[0])) if row else 0
    return counts


def host_port(dsn: str) -> tuple[str, int]:
    """The host and port a DSN URL names (for the allowlist)."""
    parts = urlsplit(dsn)
    return (parts.hostname or "127.0.0.1").lower(), parts.port or 5432


def make_provider(
    dsn: str,
    schema: str,
    *,
    tenant_id: str = CONTRACT_DATASET.mapping.tenant_id,
    mappings: Sequence[EsraMapping] = (CONTRACT_DATASET.mapping,),
    config: str = CONTRACT_CONFIG,
    connection: str | None = None,
    secrets: SecretStore | None = None,
    **options: object,
) -> PostgresProvider:
    """A provider over ``dsn`` with ``schema`` as its search path, host allow-listed."""
    host, port = host_port(dsn)
    return PostgresProvider(
        tenant_id=tenant_id,
        connection=connection or dsn,
        secrets=secrets or InMemorySecretStore(),
        allowlist=StaticHostAllowlist([(tenant_id, host, port)]),
        mappings=mappings,
        text_search_config=config,
        search_path=schema,
        **options,  # type: ignore[arg-type]
    )


@pytest.fixture
def store_role(pg_dsn: str) -> Iterator[tuple[str, str]]:
    """A login role with a password and CREATE on the test database only (not a superuser,
    which the store refuses); everything it owns is dropped with it."""
    name, password = f"esra_store_{uuid.uuid4().hex[:10]}", uuid.uuid4().hex
    with admin(pg_dsn) as conn:
        database = conn.execute("SELECT current_database()").fetchone()
        assert database is not None
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(name), sql.Literal(password)
            )
        )
        conn.execute(
            sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
                sql.Identifier(str(database[0])), sql.Identifier(name)
            )
        )
    yield name, password
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(name)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


@pytest.fixture
def store_schema(pg_dsn: str) -> Iterator[str]:
    """The store's schema name, fresh for the test; dropped afterwards if it was created."""
    name = f"esra_test_cfgstore_{uuid.uuid4().hex[:12]}"
    yield name
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def scan_nodes(
    dsn: str, schema: str, built: BuiltStatement, *, executed: bool = False
) -> list[dict[str, Any]]:
    """The scan nodes of ``built``'s plan, subplans included (``executed``: with the loop
    counts of a real run, EXPLAIN ANALYZE)."""
    explain = "EXPLAIN (ANALYZE, FORMAT JSON) " if executed else "EXPLAIN (FORMAT JSON) "
    with admin(dsn) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        row = conn.execute(explain + built.sql, built.params).fetchone()
    assert row is not None
    document = cast("list[dict[str, Any]]", row[0])

    def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
        yield plan
        for child in plan.get("Plans", ()):
            yield from nodes(child)

    return [node for node in nodes(document[0]["Plan"]) if "Alias" in node]
