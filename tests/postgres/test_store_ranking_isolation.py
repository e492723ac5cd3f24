"""The words of documents a caller may not see, against its ranking (``tests._store_ranking``),
on PostgreSQL's store."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

from esra.core.testing import InMemorySecretStore, StaticHostAllowlist
from esra.postgres import PostgresProvider, apply_store_schema, store_mapping
from tests._store_ranking import (
    ACME,
    ACME_DOCUMENTS,
    HIDDEN_ABOUT_ALPHA,
    HIDDEN_ABOUT_OMEGA,
    HIDING_PLACES,
    SCOPE,
    ranking_query,
)

pytestmark = [pytest.mark.postgres, pytest.mark.integration]


@pytest.fixture
async def store_schemas(pg_dsn: str) -> AsyncIterator[Callable[[], str]]:
    """Names fresh store schemas (``_store`` applies one); each is dropped afterwards."""
    made: list[str] = []

    def make() -> str:
        schema = f"esra_test_store_{uuid.uuid4().hex[:12]}"
        made.append(schema)
        return schema

    yield make
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        for schema in made:
            await conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )


async def _store(dsn: str, schema: str) -> str:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await apply_store_schema(conn, schema, "simple")
    return schema


def _index(dsn: str, schema: str, tenant: str, scope: str, bodies: dict[str, str]) -> None:
    """Store each body as an indexed one-segment document of ``tenant`` in ``scope``."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for key, body in bodies.items():
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (id, tenant_id, title, format, sha256, size, scope, state,"
                    " created_at, updated_at) VALUES (%s, %s, %s, 'txt', md5(%s), 1, %s,"
                    " 'indexed', now(), now())"
                ).format(sql.Identifier(schema, "documents")),
                (key, tenant, key, key, scope),
            )
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (document_id, tenant_id, ordinal, label, title, body,"
                    " indexed) VALUES (%s, %s, 0, 'part 0', %s, %s, %s)"
                ).format(sql.Identifier(schema, "segments")),
                (key, tenant, key, body, body),
            )


async def _acme_ranking(dsn: str, schema: str) -> list[tuple[str, float]]:
    parts = urlsplit(dsn)
    mapping = store_mapping(ACME, schema=schema)
    provider = PostgresProvider(
        tenant_id=ACME,
        connection=dsn,
        secrets=InMemorySecretStore(),
        allowlist=StaticHostAllowlist([(ACME, parts.hostname or "", parts.port or 5432)]),
        mappings=(mapping,),
        text_search_config="simple",
        search_path=schema,
        pool_size=1,
    )
    try:
        rows = await provider.execute(ranking_query(mapping), timeout_s=10.0)
    finally:
        await provider.close()
    return [(row.key, row.score) for row in rows]


@HIDING_PLACES
async def test_the_words_of_documents_a_caller_may_not_see_never_move_its_ranking(
    pg_dsn: str, store_schemas: Callable[[], str], hidden_tenant: str, hidden_scope: str
) -> None:
    """Beside Acme's documents, thirty the caller may not see, about alpha in one store and
    about omega in the other: Acme's order and scores are the same in both, and its alpha
    document, the rarer word among what it sees, ranks first."""
    rankings = []
    for hidden in (HIDDEN_ABOUT_ALPHA, HIDDEN_ABOUT_OMEGA):
        schema = await _store(pg_dsn, store_schemas())
        _index(pg_dsn, schema, ACME, SCOPE, ACME_DOCUMENTS)
        _index(pg_dsn, schema, hidden_tenant, hidden_scope, hidden)
        rankings.append(await _acme_ranking(pg_dsn, schema))
    about_alpha, about_omega = rankings
    assert [key for key, _ in about_alpha][:1] == ["acme-alpha"]
    assert about_alpha == about_omega
