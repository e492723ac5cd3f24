"""One store served by several processes: their lifecycles share what the actions set.

Two ``StoreLifecycle``s over one ``StoreStateTable`` stand for two hosts (or two workers of
``esra serve --workers``) on one database. Before, each kept its state in its own memory: an
operator's enable through one and initialise through the other was refused ("disabled"),
and a restart forgot an Enabled or Failed store.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from esra.core._docstore.lifecycle import (
    INITIALISATION_LEASE,
    StoreInitialisationError,
    StoreLifecycle,
    StoreNotReadyError,
    StoreStateTable,
    StoreStatus,
)
from esra.core.codes import AuditEvent
from esra.core.testing import FakeClock, InMemoryAuditSink, InMemoryStoreStateTable
from esra.core.testing.store_state_contract import StoreStateTableContract
from tests.core.docstore.test_lifecycle import MANAGER, READER, TENANT


class TestInMemoryStoreStateTable(StoreStateTableContract):
    @contextlib.asynccontextmanager
    async def open_tables(
        self, tmp_path: Path
    ) -> AsyncIterator[tuple[StoreStateTable, StoreStateTable]]:
        table = InMemoryStoreStateTable()
        yield table, table


def _process(
    shared: InMemoryStoreStateTable, audit: InMemoryAuditSink, *, fails: bool = False
) -> StoreLifecycle:
    async def apply_schema() -> None:
        if fails:
            raise StoreInitialisationError("schema_denied", "Grant CREATE on the schema.")

    return StoreLifecycle(TENANT, apply_schema, audit=audit, clock=FakeClock(), shared=shared)


async def test_enabled_through_one_process_initialised_through_another() -> None:
    shared = InMemoryStoreStateTable()
    audit = InMemoryAuditSink()
    first, second = _process(shared, audit), _process(shared, audit)
    await first.enable(MANAGER)
    started = await second.initialise(MANAGER)
    assert started.status is StoreStatus.INITIALIZING
    assert (await second.wait()).status is StoreStatus.READY
    outcomes = [r.outcome for r in audit.events(AuditEvent.STORE_INITIALISE)]
    assert outcomes == ["started", "ok"]
    # The first learns Ready from the schema its host finds, never from the record.
    assert (await first.refresh(schema_present=False)).status is StoreStatus.ENABLED
    assert (await first.refresh(schema_present=True)).status is StoreStatus.READY


async def test_a_restarted_process_finds_the_store_enabled_or_failed() -> None:
    shared = InMemoryStoreStateTable()
    audit = InMemoryAuditSink()
    before = _process(shared, audit, fails=True)
    await before.enable(MANAGER)
    restarted = _process(shared, audit)
    assert (await restarted.refresh(schema_present=False)).status is StoreStatus.ENABLED
    await before.initialise(MANAGER)
    await before.wait()
    again = _process(shared, audit)
    failed = await again.refresh(schema_present=False)
    assert failed.status is StoreStatus.FAILED
    assert (failed.failure, failed.remedy) == ("schema_denied", "Grant CREATE on the schema.")
    assert await again.state(READER) == failed


async def test_another_process_initialising_does_not_block_an_initialisation_here() -> None:
    """A process that died mid-initialisation leaves Initializing recorded: the store can
    still be initialised (idempotently) through any other."""
    shared = InMemoryStoreStateTable()
    audit = InMemoryAuditSink()
    gate = asyncio.Event()

    async def slow() -> None:
        await gate.wait()

    died = StoreLifecycle(TENANT, slow, audit=audit, clock=FakeClock(), shared=shared)
    await died.enable(MANAGER)
    await died.initialise(MANAGER)
    other = _process(shared, audit)
    assert (await other.refresh(schema_present=False)).status is StoreStatus.INITIALIZING
    assert (await other.initialise(MANAGER)).status is StoreStatus.INITIALIZING
    assert (await other.wait()).status is StoreStatus.READY
    # Its own initialisation, while it runs, still refuses a second.
    with pytest.raises(StoreNotReadyError):
        await died.initialise(MANAGER)
    gate.set()
    await died.wait()


async def test_a_process_initialising_keeps_its_own_state_until_it_ends() -> None:
    shared = InMemoryStoreStateTable()
    audit = InMemoryAuditSink()
    gate = asyncio.Event()

    async def slow() -> None:
        await gate.wait()

    here = StoreLifecycle(TENANT, slow, audit=audit, clock=FakeClock(), shared=shared)
    await here.enable(MANAGER)
    await here.initialise(MANAGER)
    elsewhere = _process(shared, audit, fails=True)
    await elsewhere.initialise(MANAGER)
    await elsewhere.wait()
    assert shared.states[TENANT].status is StoreStatus.FAILED
    # Neither the record nor a schema found mid-way decide for the running initialisation.
    assert (await here.refresh(schema_present=True)).status is StoreStatus.INITIALIZING
    gate.set()
    assert (await here.wait()).status is StoreStatus.READY


async def test_without_a_shared_table_each_process_keeps_its_own() -> None:
    audit = InMemoryAuditSink()

    async def apply_schema() -> None:
        return None

    first = StoreLifecycle(TENANT, apply_schema, audit=audit, clock=FakeClock())
    second = StoreLifecycle(TENANT, apply_schema, audit=audit, clock=FakeClock())
    await first.enable(MANAGER)
    with pytest.raises(StoreNotReadyError):
        await second.initialise(MANAGER)


async def test_an_initialisation_left_without_an_outcome_shows_as_interrupted() -> None:
    """Initializing recorded by a process that died is believed for the lease only; then
    every process shows the store Failed, "interrupted", with the way out."""
    shared, audit, clock = InMemoryStoreStateTable(), InMemoryAuditSink(), FakeClock()
    died, gate = await _initialising_for_ever(shared, audit, clock)
    other = StoreLifecycle(TENANT, _never_ends, audit=audit, clock=clock, shared=shared)
    assert (await other.state(READER)).status is StoreStatus.INITIALIZING
    clock.advance(INITIALISATION_LEASE.total_seconds() + 1)
    shown = await other.state(READER)
    assert shown.status is StoreStatus.FAILED
    assert shown.failure == "interrupted"
    assert shown.remedy is not None
    assert "initialise the store again" in shown.remedy
    gate.set()
    await died.wait()


async def test_an_interrupted_initialisation_is_recorded_failed_once() -> None:
    """Past the lease the first process to look writes Failed, "interrupted", for it with a
    record of its own; a second finds it written and records nothing more. Before, every
    process showed Failed and none recorded an outcome for the "started" record."""
    shared, audit, clock = InMemoryStoreStateTable(), InMemoryAuditSink(), FakeClock()
    died, gate = await _initialising_for_ever(shared, audit, clock)
    clock.advance(INITIALISATION_LEASE.total_seconds() + 1)
    for _process in range(2):
        other = StoreLifecycle(TENANT, _never_ends, audit=audit, clock=clock, shared=shared)
        assert (await other.refresh(schema_present=False)).status is StoreStatus.FAILED
    started, concluded = audit.events(AuditEvent.STORE_INITIALISE)
    assert started.outcome == "started"
    assert (concluded.outcome, concluded.reason) == ("failed", "interrupted")
    assert concluded.dimensions == {"concluded": "lease_passed", "status": "failed"}
    recorded = await shared.read_store_state(TENANT)
    assert recorded is not None
    assert (recorded.status, recorded.failure) == (StoreStatus.FAILED, "interrupted")
    gate.set()  # the test's own task ends; a process killed would never get here
    await died.wait()


async def test_a_table_that_cannot_conclude_leaves_the_state_shown() -> None:
    """A state table that fails while concluding is logged; the process shows the
    outcome it found all the same, and the next process concludes it."""
    shared, audit, clock = InMemoryStoreStateTable(), InMemoryAuditSink(), FakeClock()
    died, gate = await _initialising_for_ever(shared, audit, clock)

    async def refused(*_args: object, **_kwargs: object) -> bool:
        raise OSError("the state database is gone")

    failing = InMemoryStoreStateTable()
    failing.states = shared.states
    failing.replace_store_state = refused  # type: ignore[method-assign]
    shown = StoreLifecycle(TENANT, _never_ends, audit=audit, clock=clock, shared=failing)
    assert (await shown.refresh(schema_present=True)).status is StoreStatus.READY
    assert [r.outcome for r in audit.events(AuditEvent.STORE_INITIALISE)] == ["started"]
    later = StoreLifecycle(TENANT, _never_ends, audit=audit, clock=clock, shared=shared)
    assert (await later.refresh(schema_present=True)).status is StoreStatus.READY
    assert [r.outcome for r in audit.events(AuditEvent.STORE_INITIALISE)] == ["started", "ok"]
    gate.set()
    await died.wait()


async def _initialising_for_ever(
    shared: InMemoryStoreStateTable, audit: InMemoryAuditSink, clock: FakeClock
) -> tuple[StoreLifecycle, asyncio.Event]:
    """A process whose initialisation started and never ends (as if its host died) until the
    test sets the returned event."""
    gate = asyncio.Event()

    async def until_released() -> None:
        await gate.wait()

    died = StoreLifecycle(TENANT, until_released, audit=audit, clock=clock, shared=shared)
    await died.enable(MANAGER)
    await died.initialise(MANAGER)
    return died, gate


async def _never_ends() -> None:
    raise AssertionError("a process that only looks initialises nothing")
