"""A serving host forwards its document stores' held audit records on a timer.

A release, reindex or delete made while the audit sink was failing leaves its record held in
the store's outbox. ``esra serve`` opens its stores with ``[state] audit_forward_s``, so the
record reaches the sink once it recovers, with no further action or restart.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from esra.core import SystemClock
from esra.core.audit import AuditRecord
from esra.core.codes import AuditEvent
from esra.core.docstore import Operator
from esra.sqlite import SqliteDocumentRepository
from esra.starlette._stores import open_tenant_stores
from tests._killed_store_action import TENANT, quarantined_document

pytestmark = pytest.mark.integration

MANAGER = Operator(subject="alice@acme", tenant_id=TENANT, roles=frozenset({"ESRA_DATA_MANAGE"}))


class _Sink:
    def __init__(self) -> None:
        self.up = True
        self.records: list[AuditRecord] = []

    async def record(self, record: AuditRecord) -> None:
        if not self.up:
            raise ConnectionError
        self.records.append(record)


async def test_a_record_held_while_the_sink_failed_is_forwarded_on_the_timer(
    tmp_path: Path,
) -> None:
    ready, unready = tmp_path / "store.db", tmp_path / "never-initialised.db"
    repository = SqliteDocumentRepository(ready)
    await repository.initialize()
    try:
        document_id = await quarantined_document(repository)
    finally:
        await repository.close()
    sink = _Sink()
    async with open_tenant_stores(
        {TENANT: ready, "other": unready},
        audit=sink,
        clock=SystemClock(),
        audit_forward_s=0.1,
    ) as stores:
        sink.up = False
        await stores[TENANT].documents.delete(MANAGER, document_id)  # applied, record held
        assert sink.records == []
        assert len(await stores[TENANT].repository.pending_audit()) == 1
        sink.up = True
        async with asyncio.timeout(10):
            while not sink.records:
                await asyncio.sleep(0.05)
        assert [(r.event, r.outcome) for r in sink.records] == [(AuditEvent.DOCUMENT_DELETE, "ok")]
        assert await stores[TENANT].repository.pending_audit() == []


async def test_without_a_timer_the_next_start_delivers_it(tmp_path: Path) -> None:
    database = tmp_path / "store.db"
    repository = SqliteDocumentRepository(database)
    await repository.initialize()
    try:
        document_id = await quarantined_document(repository)
    finally:
        await repository.close()
    sink = _Sink()
    async with open_tenant_stores({TENANT: database}, audit=sink, clock=SystemClock()) as stores:
        sink.up = False
        await stores[TENANT].documents.release(MANAGER, document_id)
    sink.up = True
    async with open_tenant_stores({TENANT: database}, audit=sink, clock=SystemClock()):
        pass
    assert [(r.event, r.outcome) for r in sink.records] == [(AuditEvent.DOCUMENT_RELEASE, "ok")]
