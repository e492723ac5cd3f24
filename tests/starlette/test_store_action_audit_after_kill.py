"""A document store action killed (``kill -9``) before its audit record is still audited.

``DocumentStoreService`` applied a release, reindex or delete through the repository and only
then handed its record to the audit sink: a process killed in between (here by the sink
itself, the moment it is handed the record) left the action applied and no record anywhere.
The record is now written into the store's own audit outbox with the action, and the host
delivers it when it opens the store again (``open_tenant_stores``, as ``esra serve`` does).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from esra.core import SystemClock
from esra.core.audit import AuditRecord
from esra.core.codes import AuditEvent
from esra.core.docstore import DocumentState
from esra.sqlite import SqliteDocumentRepository
from esra.starlette._stores import open_tenant_stores
from tests._killed_store_action import (
    ACTIONS,
    OPERATOR,
    TENANT,
    kill_store_action_at_record,
    quarantined_document,
)

pytestmark = pytest.mark.integration

_EVENTS = {
    "release": AuditEvent.DOCUMENT_RELEASE,
    "reindex": AuditEvent.DOCUMENT_REINDEX,
    "delete": AuditEvent.DOCUMENT_DELETE,
}


class _Sink:
    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    async def record(self, record: AuditRecord) -> None:
        self.records.append(record)


@pytest.mark.parametrize("action", ACTIONS)
async def test_an_action_killed_before_its_audit_record_is_audited_on_the_next_start(
    tmp_path: Path, action: str
) -> None:
    database = tmp_path / "store.db"
    repository = SqliteDocumentRepository(database)
    await repository.initialize()
    try:
        document_id = await quarantined_document(repository)
    finally:
        await repository.close()

    kill_store_action_at_record("sqlite", str(database), action, document_id)

    sink = _Sink()
    for _start in range(2):  # the second start finds nothing left to deliver
        async with open_tenant_stores(
            {TENANT: database}, audit=sink, clock=SystemClock()
        ) as stores:
            document = await stores[TENANT].repository.get(TENANT, document_id)
            assert document is not None
            applied = {
                "release": document.state is DocumentState.INDEXED,
                "reindex": document.state is DocumentState.PENDING,
                "delete": document.deleted,
            }
            assert applied[action]  # the action was applied before the kill
    # Before the outbox the action was applied and no start ever delivered its record.
    assert [(r.event, r.outcome) for r in sink.records] == [(_EVENTS[action], "ok")]
    (record,) = sink.records
    assert record.tenant_id == TENANT
    assert record.correlation_id == f"{_EVENTS[action].value}:{document_id}"
    assert record.dimensions["operator"] == OPERATOR
    assert record.dimensions["document_id"] == document_id
    repository = SqliteDocumentRepository(database)
    try:
        assert await repository.pending_audit() == []
    finally:
        await repository.close()
