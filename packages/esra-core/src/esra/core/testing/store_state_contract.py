"""The reusable ``StoreStateTable`` contract suite.

An adapter's test module subclasses ``StoreStateTableContract`` and implements
``open_tables``, an async context manager yielding two tables over one database (as two
processes would open it)::

    class TestMyStoreStates(StoreStateTableContract):
        @contextlib.asynccontextmanager
        async def open_tables(self, tmp_path):
            async with MyTable.open(tmp_path / "state.db") as a, MyTable.open(...) as b:
                yield a, b

Requires ``pytest`` and ``pytest-asyncio``.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from esra.core._admin.audit_outbox import forward_audit_outbox
from esra.core._audit.record import AuditRecord
from esra.core._docstore.lifecycle import StoreState, StoreStateTable, StoreStatus
from esra.core.codes import AuditEvent
from esra.core.testing._fakes import InMemoryAuditSink

__all__ = ["StoreStateTableContract"]

TENANT = "tenant-a"
OTHER = "tenant-b"
AT = datetime(2026, 12, 5, 21, 0, tzinfo=UTC)


class StoreStateTableContract:
    """What every ``StoreStateTable`` does; see the module docstring."""

    def open_tables(
        self, tmp_path: Path
    ) -> AbstractAsyncContextManager[tuple[StoreStateTable, StoreStateTable]]:
        """Two tables over one fresh, empty database."""
        raise NotImplementedError

    async def test_nothing_is_recorded_at_first(self, tmp_path: Path) -> None:
        async with self.open_tables(tmp_path) as (table, _):
            assert await table.read_store_state(TENANT) is None

    async def test_a_state_written_by_one_is_read_by_the_other(self, tmp_path: Path) -> None:
        async with self.open_tables(tmp_path) as (one, other):
            enabled = StoreState(status=StoreStatus.ENABLED, changed_at=AT)
            await one.write_store_state(TENANT, enabled)
            assert await other.read_store_state(TENANT) == enabled
            assert await other.read_store_state(OTHER) is None

    async def test_the_last_write_wins_with_its_failure_and_remedy(self, tmp_path: Path) -> None:
        async with self.open_tables(tmp_path) as (one, other):
            await one.write_store_state(TENANT, StoreState(StoreStatus.INITIALIZING, AT))
            failed = StoreState(
                StoreStatus.FAILED,
                datetime(2026, 12, 5, 21, 1, 30, 250000, tzinfo=UTC),
                failure="superuser_principal",
                remedy="Connect as a role that is not a superuser.",
            )
            await other.write_store_state(TENANT, failed)
            assert await one.read_store_state(TENANT) == failed
            await one.write_store_state(TENANT, StoreState(StoreStatus.ENABLED, AT))
            recorded = await other.read_store_state(TENANT)
            assert recorded == StoreState(StoreStatus.ENABLED, AT)

    async def test_a_record_written_with_a_state_is_held_until_forwarded(
        self, tmp_path: Path
    ) -> None:
        async with self.open_tables(tmp_path) as (one, other):
            enabled = StoreState(StoreStatus.ENABLED, AT)
            record = _record("admin:enable-1")
            await one.write_store_state(TENANT, enabled, audit=record)
            await one.write_store_state(OTHER, StoreState(StoreStatus.ENABLED, AT))
            assert await other.read_store_state(TENANT) == enabled
            assert await other.pending_audit() == [record]
            sink = InMemoryAuditSink()
            assert await forward_audit_outbox(other, sink) == 1
            assert sink.records == [record]
            assert await one.pending_audit() == []

    async def test_a_state_whose_record_cannot_be_held_is_not_written(self, tmp_path: Path) -> None:
        # Both or neither: a record the outbox refuses (its correlation id is held already)
        # leaves the state as it was.
        async with self.open_tables(tmp_path) as (one, other):
            enabled = StoreState(StoreStatus.ENABLED, AT)
            await one.write_store_state(TENANT, enabled, audit=_record("admin:held"))
            initializing = StoreState(StoreStatus.INITIALIZING, AT)
            with pytest.raises(Exception):  # noqa: B017, PT011 - each engine's own error
                await other.write_store_state(TENANT, initializing, audit=_record("admin:held"))
            assert await one.read_store_state(TENANT) == enabled
            assert await one.pending_audit() == [_record("admin:held")]

    async def test_a_state_is_replaced_only_while_it_is_the_one_expected(
        self, tmp_path: Path
    ) -> None:
        # Two processes concluding one recorded initialisation: one writes, with its record.
        async with self.open_tables(tmp_path) as (one, other):
            started = StoreState(StoreStatus.INITIALIZING, AT)
            await one.write_store_state(TENANT, started)
            ready = StoreState(StoreStatus.READY, datetime(2026, 12, 5, 21, 5, 0, 1, tzinfo=UTC))
            assert await one.replace_store_state(
                TENANT, started, ready, audit=_record("admin:concluded")
            )
            failed = StoreState(StoreStatus.FAILED, AT, failure="interrupted")
            assert not await other.replace_store_state(
                TENANT, started, failed, audit=_record("admin:too-late")
            )
            assert await other.read_store_state(TENANT) == ready
            assert await other.pending_audit() == [_record("admin:concluded")]

    async def test_a_state_written_since_or_never_is_not_replaced(self, tmp_path: Path) -> None:
        async with self.open_tables(tmp_path) as (one, other):
            started = StoreState(StoreStatus.INITIALIZING, AT)
            ready = StoreState(StoreStatus.READY, AT)
            assert not await one.replace_store_state(TENANT, started, ready, audit=_record("a:1"))
            assert await other.read_store_state(TENANT) is None
            again = StoreState(
                StoreStatus.INITIALIZING, datetime(2026, 12, 5, 21, 0, 1, tzinfo=UTC)
            )
            await one.write_store_state(TENANT, again)
            assert not await other.replace_store_state(TENANT, started, ready, audit=_record("a:2"))
            assert await one.read_store_state(TENANT) == again
            assert await one.pending_audit() == []


def _record(correlation_id: str) -> AuditRecord:
    return AuditRecord(
        event=AuditEvent.STORE_ENABLE,
        tenant_id=TENANT,
        correlation_id=correlation_id,
        at=AT,
        outcome="ok",
        dimensions={"operator": "alice", "status": "enabled"},
    )
