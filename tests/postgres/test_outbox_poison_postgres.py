"""A held audit outbox row PostgreSQL cannot decode costs only itself (both outboxes).

A row of the configuration store's or a document store's outbox of the wrong shape (``jsonb``
refuses what is no JSON, not a hand edit or another writer's document) was handed to
``claim_audit`` first on every forward, which raised on it: every later audit record, every
tenant's, stayed held for ever. It is now set aside and reported to the audit sink, and a
record of a newer ESRA waits for a newer host without blocking the records behind it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from esra.core.admin import AuditOutbox
from esra.core.testing.audit_outbox_contract import AuditOutboxPoisonContract
from esra.postgres._config_schema import apply_config_schema
from esra.postgres._config_store import PostgresConfigStore
from esra.postgres._store_repository import PostgresDocumentRepository
from esra.postgres._store_schema import apply_store_schema

pytestmark = [pytest.mark.postgres, pytest.mark.integration]


class _PostgresOutboxes(AuditOutboxPoisonContract):
    """Plants rows straight into ``<schema>.audit_outbox`` on the test server."""

    dsn: str
    schema: str

    async def _connect(self) -> psycopg.AsyncConnection[tuple[object, ...]]:
        return await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)

    async def plant(self, outbox: AuditOutbox, text: str) -> int:
        async with await self._connect() as conn:
            cursor = await conn.execute(
                sql.SQL(
                    "INSERT INTO {} (correlation_id, record) VALUES (%s, %s::jsonb) RETURNING seq"
                ).format(sql.Identifier(self.schema, "audit_outbox")),
                (f"admin:planted-{uuid.uuid4().hex}", text),
            )
            row = await cursor.fetchone()
        assert row is not None
        return int(str(row[0]))

    async def stored_row_ids(self, outbox: AuditOutbox) -> list[int]:
        async with await self._connect() as conn:
            cursor = await conn.execute(
                sql.SQL("SELECT seq FROM {} ORDER BY seq").format(
                    sql.Identifier(self.schema, "audit_outbox")
                )
            )
            return [int(str(row[0])) for row in await cursor.fetchall()]

    async def stored_text(self, outbox: AuditOutbox, row_id: int, planted: str) -> str:
        # jsonb keeps no text: the digest is of the text the server gives the row back as.
        async with await self._connect() as conn:
            cursor = await conn.execute(
                sql.SQL("SELECT record::text FROM {} WHERE seq = %s").format(
                    sql.Identifier(self.schema, "audit_outbox")
                ),
                (row_id,),
            )
            row = await cursor.fetchone()
        assert row is not None
        return str(row[0])


class TestConfigStoreOutbox(_PostgresOutboxes):
    @pytest.fixture
    async def outbox(self, pg_dsn: str, tmp_path: Path) -> AsyncIterator[AuditOutbox]:
        self.dsn, self.schema = pg_dsn, f"esra_test_poison_{uuid.uuid4().hex[:12]}"
        async with await self._connect() as conn:
            await apply_config_schema(conn, self.schema)
        store = await PostgresConfigStore.open(pg_dsn, schema=self.schema, apply_schema=False)
        try:
            yield store
        finally:
            await store.close()
            async with await self._connect() as conn:
                await conn.execute(
                    sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(self.schema))
                )


class TestDocumentStoreOutbox(_PostgresOutboxes):
    @pytest.fixture
    async def outbox(self, pg_dsn: str, tmp_path: Path) -> AsyncIterator[AuditOutbox]:
        self.dsn, self.schema = pg_dsn, f"esra_test_poison_{uuid.uuid4().hex[:12]}"
        async with await self._connect() as conn:
            await apply_store_schema(conn, self.schema)
        repository = await PostgresDocumentRepository.open(pg_dsn, schema=self.schema)
        try:
            yield repository
        finally:
            await repository.close()
            async with await self._connect() as conn:
                await conn.execute(
                    sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(self.schema))
                )
