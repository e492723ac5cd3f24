"""The PostgreSQL store's audit outbox holds a record whatever text it carries.

``jsonb`` refuses ``\\u0000`` and a text column refuses NUL, so a record naming one (an
operator subject or a reason from an embedder's identity, a correlation id built from a
document id) would fail the action it records, on PostgreSQL only (SQLite holds it). It is
held with each NUL replaced by U+FFFD, as the PostgreSQL audit log stores it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import psycopg
import pytest
from psycopg import sql

from esra.core.audit import AuditRecord
from esra.core.codes import AuditEvent
from esra.core.docstore import StoredDocument
from esra.core.testing.docstore_contract import contract_upload
from esra.postgres import PostgresDocumentRepository, apply_store_schema
from tests.postgres.conftest import admin

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

T0 = datetime(2026, 8, 1, 8, 0, tzinfo=UTC)
TENANT = "acme"


@pytest.fixture
async def repository(pg_dsn: str) -> AsyncIterator[PostgresDocumentRepository]:
    """A repository over a fresh store schema, dropped afterwards."""
    schema = f"esra_test_fence_nul_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await apply_store_schema(conn, schema, "simple")
    repo = await PostgresDocumentRepository.open(pg_dsn, schema=schema, max_size=2)
    yield repo
    await repo.close()
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def _record(event: AuditEvent) -> AuditRecord:
    return AuditRecord(
        event=event,
        tenant_id=TENANT,
        correlation_id=f"{event.value}:ops\x00lead",
        at=T0,
        outcome="ok",
        reason="because\x00",
        dimensions={"operator": "ops\x00lead", "tags\x00": ("a\x00", "b"), "findings": 0},
    )


async def test_an_upload_whose_record_carries_nul_is_applied_and_its_record_held(
    repository: PostgresDocumentRepository,
) -> None:
    def upload_record(_: StoredDocument) -> AuditRecord:
        return _record(AuditEvent.DOCUMENT_UPLOAD)

    stored = await repository.add(
        TENANT, contract_upload("a.txt", "Body."), scope="all", now=T0, audit=upload_record
    )
    assert await repository.get(TENANT, stored.id) == stored
    held = await repository.pending_audit()
    assert [(r.correlation_id, r.reason, r.dimensions) for r in held] == [
        (
            f"{AuditEvent.DOCUMENT_UPLOAD.value}:ops\ufffdlead",
            "because\ufffd",
            {"operator": "ops\ufffdlead", "tags\ufffd": ("a\ufffd", "b"), "findings": 0},
        )
    ]
    # Settled by the id it was held under, or by the one the record was made with.
    await repository.settle_audit(f"{AuditEvent.DOCUMENT_UPLOAD.value}:ops\x00lead")
    assert await repository.pending_audit() == []
