"""A document store action on PostgreSQL killed (SIGKILL) before its audit record.

The action (release, reindex, delete, an upload, a settings change) was applied in the store
schema and only then handed to the audit sink; a process killed in between left it applied and
unaudited. The record is now inserted into the store schema's ``audit_outbox`` in the action's
transaction, and the next process to forward the store's outbox delivers it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg import sql

from esra.core.testing import InMemoryAuditSink
from esra.postgres import PostgresDocumentRepository, apply_store_schema
from tests._killed_store_action import (
    ACTIONS,
    EVENTS,
    applied,
    kill_store_action_at_record,
    quarantined_document,
)
from tests._outbox_drainer import forward_within

pytestmark = pytest.mark.integration


@pytest.fixture
async def store_schema(pg_dsn: str) -> AsyncIterator[str]:
    schema = f"esra_test_store_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await apply_store_schema(conn, schema, "simple")
    yield schema
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


@pytest.mark.parametrize("action", ACTIONS)
async def test_an_action_killed_before_its_audit_record_is_delivered_by_the_next_forward(
    pg_dsn: str, store_schema: str, action: str
) -> None:
    repository = await PostgresDocumentRepository.open(pg_dsn, schema=store_schema, max_size=2)
    try:
        document_id = await quarantined_document(repository)
        kill_store_action_at_record("postgres", pg_dsn, action, document_id, store_schema)
        named = await applied(repository, action, document_id)
        # Before the outbox nothing was held: the action was applied, its record lost.
        (held,) = await repository.pending_audit()  # applied, and its record kept with it
        assert (held.event, held.outcome) == (EVENTS[action], "ok")
        assert held.dimensions.get("document_id") == named
        sink = InMemoryAuditSink()
        # The killed process's session may hold the outbox's claim a moment longer.
        await forward_within(repository, sink, expected=1)
        assert sink.records == [held]
        assert await repository.pending_audit() == []
    finally:
        await repository.close()
