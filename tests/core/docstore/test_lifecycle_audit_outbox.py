"""Enabling and initialising a store are audited with their effect, through the outbox.

``StoreLifecycle`` set a shared state (Enabled, Initializing, the outcome) and only then
handed its record to the audit sink: a process killed in between, or a sink failing after
the readiness check, left the store enabled or initialising for every process and no record
anywhere. With a shared ``StoreStateTable`` the record is now written with the state, into
the table's audit outbox, and forwarded from there.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from esra.core._admin.audit_outbox import forward_audit_outbox
from esra.core._audit.record import AuditRecord
from esra.core._docstore.lifecycle import StoreLifecycle, StoreStatus
from esra.core.codes import AuditEvent
from esra.core.testing import FakeClock, InMemoryAuditSink, InMemoryStoreStateTable
from tests.core.docstore.test_lifecycle import MANAGER, TENANT


class FlakySink(InMemoryAuditSink):
    """Passes the readiness check (it has no ``ping``); refuses records while ``refusing``."""

    def __init__(self, *, refusing: bool) -> None:
        super().__init__()
        self.refusing = refusing
        self.refused: list[AuditRecord] = []

    async def record(self, record: AuditRecord) -> None:
        if self.refusing:
            self.refused.append(record)
            raise ConnectionError("the audit database went away")
        await super().record(record)


def _lifecycle(shared: InMemoryStoreStateTable, audit: InMemoryAuditSink) -> StoreLifecycle:
    async def apply_schema() -> None:
        return None

    return StoreLifecycle(TENANT, apply_schema, audit=audit, clock=FakeClock(), shared=shared)


async def test_an_enable_whose_sink_fails_after_the_check_is_held_not_lost() -> None:
    shared = InMemoryStoreStateTable()
    sink = FlakySink(refusing=True)
    state = await _lifecycle(shared, sink).enable(MANAGER)
    assert state.status is StoreStatus.ENABLED
    assert shared.states[TENANT].status is StoreStatus.ENABLED
    (held,) = await shared.pending_audit()
    assert (held.event, held.outcome, held.dimensions["status"]) == (
        AuditEvent.STORE_ENABLE,
        "ok",
        "enabled",
    )
    assert sink.refused == [held]  # tried once, kept
    working = InMemoryAuditSink()
    assert await forward_audit_outbox(shared, working) == 1
    assert working.records == [held]
    assert await shared.pending_audit() == []


async def test_an_initialisation_is_audited_through_the_outbox_in_order() -> None:
    shared = InMemoryStoreStateTable()
    sink = InMemoryAuditSink()
    lifecycle = _lifecycle(shared, sink)
    await lifecycle.enable(MANAGER)
    await lifecycle.initialise(MANAGER)
    assert (await lifecycle.wait()).status is StoreStatus.READY
    assert [(r.event, r.outcome) for r in sink.records] == [
        (AuditEvent.STORE_ENABLE, "ok"),
        (AuditEvent.STORE_INITIALISE, "started"),
        (AuditEvent.STORE_INITIALISE, "ok"),
    ]
    assert await shared.pending_audit() == []
    # Administrative actions, each its own record: a fresh admin:<uuid> apiece.
    ids = [r.correlation_id for r in sink.records]
    assert all(i.startswith("admin:") for i in ids)
    assert len(set(ids)) == 3


async def test_an_outcome_held_while_the_sink_fails_is_delivered_later() -> None:
    shared = InMemoryStoreStateTable()
    sink = FlakySink(refusing=False)
    lifecycle = _lifecycle(shared, sink)
    await lifecycle.enable(MANAGER)
    sink.refusing = True  # the sink fails after the initialisation's readiness check
    await lifecycle.initialise(MANAGER)
    assert (await lifecycle.wait()).status is StoreStatus.READY
    held = await shared.pending_audit()
    assert [(r.event, r.outcome) for r in held] == [
        (AuditEvent.STORE_INITIALISE, "started"),
        (AuditEvent.STORE_INITIALISE, "ok"),
    ]
    sink.refusing = False
    assert await forward_audit_outbox(shared, sink) == 2
    assert [r.outcome for r in sink.records] == ["ok", "started", "ok"]


async def test_without_a_table_a_refused_outcome_is_logged_as_the_records(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Without a shared table nothing records a state: when the sink refuses the outcome, the
    log says so (it said "recording the document store state ... failed")."""
    sink = FlakySink(refusing=False)
    gate = asyncio.Event()

    async def apply_schema() -> None:
        await gate.wait()

    alone = StoreLifecycle(TENANT, apply_schema, audit=sink, clock=FakeClock())
    await alone.enable(MANAGER)
    await alone.initialise(MANAGER)
    sink.refusing = True
    gate.set()
    with caplog.at_level(logging.ERROR, logger="esra.core._docstore.lifecycle"):
        assert (await alone.wait()).status is StoreStatus.READY
    assert [r.getMessage() for r in caplog.records] == [
        f"recording the document store outcome of tenant {TENANT} failed"
    ]
    assert [r.outcome for r in sink.refused] == ["ok"]
