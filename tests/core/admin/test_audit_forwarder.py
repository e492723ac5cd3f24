"""A record held while the audit sink failed reaches it once it recovers, with no new change.

The outbox was forwarded only after an administrative change and at a host's start: a record
held because the sink was failing at the time of its change stayed in the state database
until the next change or restart — on a quiet host, indefinitely. A serving host now also
forwards on a timer (``AuditOutboxForwarder``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import pytest

from esra.core._audit.record import AuditRecord
from esra.core.admin import AuditOutboxForwarder, InMemoryWorkspaceStore, forward_audit_outbox
from esra.core.codes import AuditEvent
from esra.core.testing.config_contract import hold_audit_records
from tests.core.admin.test_audit_before_effect import (
    SwitchableSink,
)
from tests.core.admin.test_audit_outbox import publish_while_the_sink_fails_after_the_save

pytestmark = pytest.mark.asyncio


async def _until_delivered(sink: SwitchableSink, event: AuditEvent) -> AuditRecord:
    async with asyncio.timeout(10):
        while True:
            found = [r for r in sink.records if r.event is event]
            if found:
                (record,) = found
                return record
            await asyncio.sleep(0.005)


@contextlib.asynccontextmanager
async def _running(forwarder: AuditOutboxForwarder) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(forwarder.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_record_held_while_the_sink_failed_is_delivered_once_it_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    _h, store, sink, updated = await publish_while_the_sink_fails_after_the_save()
    (held,) = await store.pending_audit()

    forwarder = AuditOutboxForwarder(store, sink, interval_s=0.01)
    with caplog.at_level(logging.WARNING, logger="esra.core._admin.audit_outbox"):
        async with _running(forwarder) as task:
            # While the sink still refuses, each tick logs and the forwarder keeps going.
            async with asyncio.timeout(10):
                while caplog.text.count("could not be forwarded") < 3:
                    await asyncio.sleep(0.005)
            assert not task.done()
            assert await store.pending_audit() == [held]

            sink.up = True  # the sink recovers; nobody changes anything
            record = await _until_delivered(sink, AuditEvent.ADMIN_EXPOSURE_PUBLISH)

    assert record == held
    assert (record.outcome, record.dimensions["version"]) == ("ok", updated.version)
    assert await store.pending_audit() == []
    assert task.cancelled()


class _Stuck:
    """Is handed a record, then never returns (until cancelled)."""

    def __init__(self) -> None:
        self.handed = asyncio.Event()

    async def record(self, record: AuditRecord) -> None:
        del record
        self.handed.set()
        await asyncio.Event().wait()


async def test_stopping_the_forwarder_mid_forward_leaves_the_record_held_and_unclaimed() -> None:
    store = InMemoryWorkspaceStore()
    (held,) = await hold_audit_records(store, 1)
    stuck = _Stuck()
    async with _running(AuditOutboxForwarder(store, stuck, interval_s=0.01)):
        async with asyncio.timeout(10):
            await stuck.handed.wait()
    # Stopped while its sink held the record: the record stays, and its claim went.
    assert await store.pending_audit() == [held]
    delivered = SwitchableSink()
    assert await forward_audit_outbox(store, delivered) == 1
    assert delivered.records == [held]


async def test_the_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        AuditOutboxForwarder(InMemoryWorkspaceStore(), SwitchableSink(), interval_s=0)
    assert AuditOutboxForwarder(InMemoryWorkspaceStore(), SwitchableSink()).interval_s == 30.0
