"""A document id no stored document has — NUL, a lone surrogate — is simply not found.

Document ids come from the URL (``/store/documents/%00/reindex``): PostgreSQL text cannot
hold NUL and UTF-8 cannot carry a lone surrogate, so binding such an id failed the request
with the driver's ``DataError`` (``ESRA_INTERNAL``) instead of the not-found every other
unknown id gets. Every management action reads it as an id that names nothing, and its
audit record stays storable.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg import sql

from esra.core._docstore.management import (
    DATA_MANAGE,
    DATA_READ,
    DocumentStoreService,
    NotPermittedError,
    Operator,
)
from esra.core.codes import AuditEvent
from esra.core.testing import FakeClock, InMemoryAuditSink
from esra.postgres import PostgresDocumentRepository, apply_store_schema
from tests.postgres.conftest import admin

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

TENANT = "acme"
MANAGER = Operator(subject="manager", tenant_id=TENANT, roles=frozenset({DATA_READ, DATA_MANAGE}))
HOSTILE_IDS = ["\x00", "doc\x00id", "\ud800", "doc\udfffid"]


@pytest.fixture
async def service(pg_dsn: str) -> AsyncIterator[tuple[DocumentStoreService, InMemoryAuditSink]]:
    schema = f"esra_test_ids_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await apply_store_schema(conn, schema, "simple")
    repository = await PostgresDocumentRepository.open(pg_dsn, schema=schema, max_size=2)
    audit = InMemoryAuditSink()
    yield DocumentStoreService(repository, audit=audit, clock=FakeClock()), audit
    await repository.close()
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


@pytest.mark.parametrize("document_id", HOSTILE_IDS, ids=ascii)
async def test_a_hostile_document_id_is_not_found_by_every_action(
    service: tuple[DocumentStoreService, InMemoryAuditSink], document_id: str
) -> None:
    store, audit = service
    assert await store.document(MANAGER, document_id) is None
    for action in (store.findings, store.release, store.reindex, store.delete, store.download):
        with pytest.raises(NotPermittedError):
            await action(MANAGER, document_id)
    refused = {r.event for r in audit.records if r.outcome != "ok"}
    assert {AuditEvent.DOCUMENT_RELEASE, AuditEvent.DOCUMENT_DELETE} <= refused
