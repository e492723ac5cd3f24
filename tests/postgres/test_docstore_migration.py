"""The PostgreSQL store's version-2 migration, on a real server: in place, once, rows kept.

Each test builds a version-1 store with version 1's own DDL in a fresh schema (dropped
afterwards) and migrates it with ``apply_store_schema``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from esra.core.testing.docstore_ownership_contract import VersionOneDocument
from esra.postgres import STORE_SCHEMA_VERSION, apply_store_schema, store_schema_version
from esra.postgres._store_schema import StoreSchemaConflictError
from tests.postgres._docstore_v1 import create_version_1_store

pytestmark = [pytest.mark.postgres, pytest.mark.integration, pytest.mark.asyncio]

_RESERVED = ("previous_content", "edited_by", "edit_reason")


@pytest.fixture
async def v1_store(pg_dsn: str) -> AsyncIterator[tuple[psycopg.AsyncConnection[Any], str]]:
    """An autocommit connection and the name of a fresh version-1 store schema."""
    schema = f"esra_test_store_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await create_version_1_store(conn, schema, VersionOneDocument())
        try:
            yield conn, schema
        finally:
            await conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


async def _columns(conn: psycopg.AsyncConnection[Any], schema: str) -> dict[str, tuple[Any, ...]]:
    cursor = await conn.execute(
        "SELECT c.column_name, c.is_nullable, c.column_default,"
        " col_description(format('%%I.%%I', c.table_schema, c.table_name)::regclass,"
        " c.ordinal_position)"
        " FROM information_schema.columns AS c"
        " WHERE c.table_schema = %s AND c.table_name = 'documents'",
        (schema,),
    )
    return {str(r[0]): tuple(r[1:]) for r in await cursor.fetchall()}


async def test_a_version_1_store_migrates_in_place_once(
    v1_store: tuple[psycopg.AsyncConnection[Any], str],
) -> None:
    """v1 → v2 adds owner and reserved edit columns, keeps the row; a rerun applies nothing."""
    conn, schema = v1_store
    legacy = VersionOneDocument()
    assert await store_schema_version(conn, schema) == 1
    assert "owner_kind" not in await _columns(conn, schema)
    assert await apply_store_schema(conn, schema, "simple") is True
    assert await apply_store_schema(conn, schema, "simple") is False
    assert await store_schema_version(conn, schema) == STORE_SCHEMA_VERSION == 4
    cursor = await conn.execute(
        sql.SQL("SELECT version, text_search_config FROM {} ORDER BY version").format(
            sql.Identifier(schema, "schema_version")
        )
    )
    assert await cursor.fetchall() == [(1, "simple"), (2, "simple"), (3, "simple"), (4, "simple")]
    columns = await _columns(conn, schema)
    nullable, default, _ = columns["owner_kind"]
    assert (nullable, default) == ("NO", "'uploaded'::text")
    assert columns["owner_connector"][:2] == ("YES", None)
    for column in _RESERVED:
        nullable, default, comment = columns[column]
        assert (nullable, default) == ("YES", None)
        assert "unused by any ESRA API" in comment
    cursor = await conn.execute(
        sql.SQL(
            "SELECT id, title, sha256, state, revision, data, text, owner_kind,"
            " owner_connector, previous_content, edited_by, edit_reason FROM {}"
        ).format(sql.Identifier(schema, "documents"))
    )
    assert await cursor.fetchall() == [
        (
            legacy.id,
            legacy.title,
            legacy.sha256,
            "indexed",
            legacy.revision,
            legacy.data,
            legacy.text,
            "uploaded",
            None,
            None,
            None,
            None,
        )
    ]
    # The migrated segment is still what retrieval's view finds.
    cursor = await conn.execute(
        sql.SQL("SELECT document_id FROM {} WHERE tsv @@ to_tsquery('simple', 'leave')").format(
            sql.Identifier(schema, "searchable_segments")
        )
    )
    assert await cursor.fetchall() == [(legacy.id,)]


async def test_the_owner_columns_refuse_an_unnamed_or_unknown_owner(
    v1_store: tuple[psycopg.AsyncConnection[Any], str],
) -> None:
    """A connector owner must name its connector, an upload names none, no other kind exists."""
    conn, schema = v1_store
    await apply_store_schema(conn, schema, "simple")
    update = sql.SQL("UPDATE {} SET owner_kind = %s, owner_connector = %s").format(
        sql.Identifier(schema, "documents")
    )
    for kind, connector in (("connector", None), ("uploaded", "sync"), ("robot", "x")):
        with pytest.raises(psycopg.errors.CheckViolation):
            await conn.execute(update, (kind, connector))
    await conn.execute(update, ("connector", "sync"))


async def test_migrating_with_another_text_search_configuration_is_refused(
    v1_store: tuple[psycopg.AsyncConnection[Any], str],
) -> None:
    """The version-1 store's configuration binds its migrations too; nothing is applied."""
    conn, schema = v1_store
    with pytest.raises(StoreSchemaConflictError):
        await apply_store_schema(conn, schema, "english")
    assert await store_schema_version(conn, schema) == 1
    assert "owner_kind" not in await _columns(conn, schema)
