"""The claim fence on PostgreSQL: a version-3 store gains ``claim_seq`` in place, and a claim
from before a re-index cannot write over the current claim's result on the migrated store.

The fence itself is proven for every repository by ``ClaimFenceContract`` (part of
``DocumentRepositoryContract``); this is the upgrade of an existing store.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from esra.postgres import STORE_SCHEMA_VERSION, PostgresDocumentRepository, store_schema_version
from esra.postgres._store_schema import apply_store_schema, store_schema_migrations
from tests._claim_fence import T0, TENANT, assert_fenced_across_a_reindex

pytestmark = [pytest.mark.postgres, pytest.mark.integration]


async def _create_version_3_store(conn: psycopg.AsyncConnection[Any], schema: str) -> None:
    """``schema`` at store version 3, as the ESRA before the claim fence recorded it."""
    versions = sql.Identifier(schema, "schema_version")
    async with conn.transaction():
        await conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        await conn.execute(
            sql.SQL(
                "CREATE TABLE {} (version integer PRIMARY KEY, text_search_config text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            ).format(versions)
        )
        for version, statements in sorted(store_schema_migrations(schema, "simple").items()):
            if version > 3:
                break
            for statement in statements:
                await conn.execute(statement)
            await conn.execute(
                sql.SQL(
                    "INSERT INTO {} (version, text_search_config) VALUES (%s, 'simple')"
                ).format(versions),
                (version,),
            )


@pytest.fixture
async def v3_store(pg_dsn: str) -> AsyncIterator[tuple[psycopg.AsyncConnection[Any], str]]:
    """An autocommit connection and a fresh version-3 store schema (dropped afterwards)."""
    schema = f"esra_test_fence_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await _create_version_3_store(conn, schema)
        try:
            yield conn, schema
        finally:
            await conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


async def test_a_version_3_store_gains_the_claim_counter_and_keeps_its_documents(
    v3_store: tuple[psycopg.AsyncConnection[Any], str], pg_dsn: str
) -> None:
    """v3 → v4 adds ``claim_seq`` (0 for every existing row) once; the fence then holds on
    a document stored before the upgrade."""
    conn, schema = v3_store
    documents = sql.Identifier(schema, "documents")
    await conn.execute(
        sql.SQL(
            "INSERT INTO {} (id, tenant_id, title, format, sha256, size, scope, state,"
            " created_at, updated_at, data) VALUES ('legacy', %s, 'a.txt', 'txt', 'h', 5,"
            " 'all', 'pending', %s, %s, 'hello')"
        ).format(documents),
        (TENANT, T0, T0),
    )
    assert await store_schema_version(conn, schema) == 3
    assert await apply_store_schema(conn, schema, "simple") is True
    assert await apply_store_schema(conn, schema, "simple") is False
    assert await store_schema_version(conn, schema) == STORE_SCHEMA_VERSION == 4
    cursor = await conn.execute(
        sql.SQL("SELECT id, state, attempts, claim_seq FROM {}").format(documents)
    )
    assert await cursor.fetchall() == [("legacy", "pending", 0, 0)]

    repository = await PostgresDocumentRepository.open(pg_dsn, schema=schema, max_size=2)
    try:
        await assert_fenced_across_a_reindex(repository, "legacy")
    finally:
        await repository.close()
