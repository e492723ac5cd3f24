"""The cross-tenant ranking channel (``tests._store_ranking``) on PostgreSQL's store."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

from esra.core.testing import InMemorySecretStore, StaticHostAllowlist
from esra.postgres import PostgresProvider, apply_store_schema, store_mapping
from tests._store_ranking import (
    ACME,
    ACME_DOCUMENTS,
    GLOBEX,
    GLOBEX_DOCUMENTS,
    KNOWN_CHANNEL,
    SCOPE,
    ranking_query,
)

pytestmark = [pytest.mark.postgres, pytest.mark.integration]


@pytest.fixture
async def store_schema(pg_dsn: str) -> AsyncIterator[str]:
    """A freshly applied store schema, dropped afterwards."""
    schema = f"esra_test_store_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await apply_store_schema(conn, schema, "simple")
    yield schema
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def _index(dsn: str, schema: str, tenant: str, bodies: dict[str, str]) -> None:
    """Store each body as an indexed one-segment document of ``tenant`` under its key."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for key, body in bodies.items():
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (id, tenant_id, title, format, sha256, size, scope, state,"
                    " created_at, updated_at) VALUES (%s, %s, %s, 'txt', md5(%s), 1, %s,"
                    " 'indexed', now(), now())"
                ).format(sql.Identifier(schema, "documents")),
                (key, tenant, key, key, SCOPE),
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


@KNOWN_CHANNEL
async def test_another_tenants_documents_never_move_a_tenants_ranking(
    pg_dsn: str, store_schema: str
) -> None:
    """Acme's alpha document ranks first; once Globex indexes thirty documents about alpha,
    nothing of Globex's may change Acme's order or scores."""
    _index(pg_dsn, store_schema, ACME, ACME_DOCUMENTS)
    before = await _acme_ranking(pg_dsn, store_schema)
    assert [key for key, _ in before][:1] == ["acme-alpha"]
    _index(pg_dsn, store_schema, GLOBEX, GLOBEX_DOCUMENTS)
    assert await _acme_ranking(pg_dsn, store_schema) == before
