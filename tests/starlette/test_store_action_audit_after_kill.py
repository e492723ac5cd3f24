"""A document store action killed (``kill -9``) before its audit record is still audited.

``DocumentStoreService`` applied a release, reindex, delete or upload (and
``StoreConfigurationService`` a settings change) through the repository and only then handed
its record to the audit sink: a process killed in between (here by the sink
itself, the moment it is handed the record) left the action applied and no record anywhere.
The record is now written into the store's own audit outbox with the action, and the host
delivers it when it opens the store again (``open_tenant_stores``, as ``esra serve`` does).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from esra.core import SystemClock
from esra.core.testing import InMemoryAuditSink
from esra.sqlite import SqliteDocumentRepository
from esra.starlette._stores import open_tenant_stores
from tests._killed_store_action import (
    ACTIONS,
    EVENTS,
    OPERATOR,
    TENANT,
    applied,
    kill_store_action_at_record,
    quarantined_document,
)

pytestmark = pytest.mark.integration


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

    sink = InMemoryAuditSink()
    for _start in range(2):  # the second start finds nothing left to deliver
        async with open_tenant_stores(
            {TENANT: database}, audit=sink, clock=SystemClock()
        ) as stores:
            # The action was applied before the kill.
            named = await applied(stores[TENANT].repository, action, document_id)
    # Before the outbox the action was applied and no start ever delivered its record.
    assert [(r.event, r.outcome) for r in sink.records] == [(EVENTS[action], "ok")]
    (record,) = sink.records
    assert record.tenant_id == TENANT
    assert record.correlation_id == f"{EVENTS[action].value}:{named or OPERATOR}"
    assert record.dimensions["operator"] == OPERATOR
    assert record.dimensions.get("document_id") == named
    repository = SqliteDocumentRepository(database)
    try:
        assert await repository.pending_audit() == []
    finally:
        await repository.close()
