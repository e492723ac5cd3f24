"""A version-1 PostgreSQL document store, written with version 1's own DDL, for migrations."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from esra.core.testing.docstore_ownership_contract import VersionOneDocument
from esra.postgres._store_schema import store_schema_statements

__all__ = ["create_version_1_store"]


async def create_version_1_store(
    connection: psycopg.AsyncConnection[Any],
    schema: str,
    legacy: VersionOneDocument,
    config: str = "simple",
) -> None:
    """Create ``schema`` at store version 1 (as ESRA 1 recorded it) holding ``legacy``."""
    async with connection.transaction():
        await connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        await connection.execute(
            sql.SQL(
                "CREATE TABLE {} (version integer PRIMARY KEY, text_search_config text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            ).format(sql.Identifier(schema, "schema_version"))
        )
        for statement in store_schema_statements(schema, config):
            await connection.execute(statement)
        await connection.execute(
            sql.SQL("INSERT INTO {} (version, text_search_config) VALUES (1, %s)").format(
                sql.Identifier(schema, "schema_version")
            ),
            (config,),
        )
        await connection.execute(
            sql.SQL(
                "INSERT INTO {} (id, tenant_id, title, format, sha256, size, scope, state,"
                " attempts, revision, segment_count, created_at, updated_at, data, text)"
                " VALUES (%s, %s, %s, 'txt', %s, %s, %s, 'indexed', 1, %s, 1, %s, %s, %s, %s)"
            ).format(sql.Identifier(schema, "documents")),
            (
                legacy.id,
                legacy.tenant_id,
                legacy.title,
                legacy.sha256,
                len(legacy.data),
                legacy.scope,
                legacy.revision,
                legacy.created_at,
                legacy.created_at,
                legacy.data,
                legacy.text,
            ),
        )
        await connection.execute(
            sql.SQL(
                "INSERT INTO {} (document_id, tenant_id, ordinal, label, title, body, indexed)"
                " VALUES (%s, %s, 0, %s, %s, %s, %s)"
            ).format(sql.Identifier(schema, "segments")),
            (
                legacy.id,
                legacy.tenant_id,
                legacy.segment_label,
                legacy.title,
                legacy.text,
                legacy.text,
            ),
        )
