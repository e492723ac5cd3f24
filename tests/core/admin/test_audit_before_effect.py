"""An administrative change never takes effect while its audit sink refuses records.

docs/security.md (Durable state → Audit): if the audit store stays unavailable, new records
are refused and the action fails rather than proceeding unaudited. The chain therefore asks
the sink (its ``ping()``, through any wrapper the host puts around it) before it saves
anything — a publication's save is what every follower applies — and, for a secret write,
once more before the secret is written. A sink that dies after the save leaves its record
held in the workspace store's audit outbox, saved with the change, until the sink takes it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

import pytest

from esra.core._admin.workspace import AdminWorkspace
from esra.core._audit.batching import UNWRITTEN_LOGGER, AuditUnavailableError, BatchingAuditSink
from esra.core._audit.record import AuditRecord
from esra.core._durable_config import DurableConfigRepository
from esra.core.admin import (
    ConfigChange,
    ConnectionSecretService,
    InMemorySecretVault,
    InMemoryWorkspaceStore,
    Role,
    forward_audit_outbox,
)
from esra.core.audit import TraceLinkedAuditSink
from esra.core.codes import AuditEvent
from esra.core.exceptions import ProviderError
from esra.core.testing import FakeClock
from esra.core.testing._audit_log import InMemoryAuditLog
from esra.core.testing.audit_contract import contract_record
from tests.core.admin.test_chain import (
    SECRET_REF,
    SECRET_VALUE,
    Admin,
    holder,
    run_until,
    step_model,
)
from tests.core.factories import SLUG, TENANT, make_exposure

pytestmark = pytest.mark.asyncio

PUBLISHER = holder(Role.ESRA_EXPOSURE_MANAGE)
SECURITY = holder(Role.SECURITY_MANAGE)


class SwitchableSink:
    """An audit sink that, while down, refuses records and fails its ``ping()``."""

    def __init__(self) -> None:
        self.up = True
        self.records: list[AuditRecord] = []
        self.pings = 0

    async def ping(self) -> None:
        self.pings += 1
        if not self.up:
            raise AuditUnavailableError

    async def record(self, record: AuditRecord) -> None:
        if not self.up:
            raise AuditUnavailableError
        self.records.append(record)


class SwitchableBackend:
    """A batch backend whose database can go away; ``ping()`` answers like a database log."""

    def __init__(self) -> None:
        self.up = True
        self.log = InMemoryAuditLog()

    async def ping(self) -> None:
        if not self.up:
            raise ConnectionRefusedError("audit database down")

    async def write_batch(self, records: Sequence[AuditRecord]) -> None:
        if not self.up:
            raise ConnectionRefusedError("audit database down")
        await self.log.write_batch(records)


class SaveHookStore(InMemoryWorkspaceStore):
    """Runs ``after_save`` once a save has been stored (the audit sink dies in between)."""

    def __init__(self) -> None:
        super().__init__()
        self.after_save: Callable[[], None] | None = None

    async def save(
        self,
        workspace: AdminWorkspace,
        *,
        expected_version: int,
        change: ConfigChange,
        audit: AuditRecord | None = None,
    ) -> None:
        await super().save(workspace, expected_version=expected_version, change=change, audit=audit)
        if self.after_save is not None:
            self.after_save()


async def _until(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):
        while not predicate():
            await asyncio.sleep(0.002)


async def _bound(h: Admin) -> int:
    await run_until(h, 3)
    exposure = make_exposure(tenant_id=TENANT, published=False, source_subset=frozenset({"s-1"}))
    await h.exposures.bind_exposure(PUBLISHER, TENANT, exposure)
    return (await h.current(TENANT)).version


async def _served_elsewhere(h: Admin) -> bool:
    served = await DurableConfigRepository(h.store).snapshot(TENANT)
    exposure = served.exposure_by_slug(SLUG) if served is not None else None
    return exposure is not None and exposure.published


async def test_a_publish_refused_by_the_audit_sink_is_saved_nowhere(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = SwitchableSink()
    h = Admin(audit=sink)  # type: ignore[arg-type]
    version = await _bound(h)

    sink.up = False
    with caplog.at_level(logging.ERROR), pytest.raises(AuditUnavailableError):
        await h.exposures.publish(PUBLISHER, TENANT, SLUG)

    assert (await h.current(TENANT)).version == version
    assert await h.store.published(TENANT) is None
    assert not await _served_elsewhere(h)
    assert [c.version for c in await h.store.history(TENANT)][-1] == version
    # The refused attempt is not silent: its record goes to the unwritten-audit log.
    (unwritten,) = [r for r in caplog.records if r.name == UNWRITTEN_LOGGER]
    assert AuditEvent.ADMIN_EXPOSURE_PUBLISH.value in unwritten.getMessage()
    assert '"outcome": "failed"' in unwritten.getMessage()


async def test_the_host_sink_refusing_records_stops_the_publish_before_the_save() -> None:
    # As the host composes it: a TraceLinkedAuditSink over a BatchingAuditSink whose
    # backend stopped answering long enough for the sink to refuse records.
    clock = FakeClock()
    backend = SwitchableBackend()
    batching = BatchingAuditSink(
        backend,
        flush_interval_s=0.005,
        wait_for_write=True,
        unavailable_after_s=30.0,
        retry_initial_s=0.001,
        retry_max_s=0.002,
        clock=clock,
    )
    h = Admin(audit=TraceLinkedAuditSink(batching), clock=clock)  # type: ignore[arg-type]
    version = await _bound(h)

    backend.up = False
    probe = asyncio.create_task(batching.record(contract_record(99)))
    await asyncio.sleep(0.02)
    clock.advance(31)
    await _until(lambda: not batching.available)
    with pytest.raises(AuditUnavailableError):
        await probe

    with pytest.raises(AuditUnavailableError):
        await h.exposures.publish(PUBLISHER, TENANT, SLUG)

    assert (await h.current(TENANT)).version == version
    assert not await _served_elsewhere(h)
    backend.up = True
    await _until(lambda: batching.available)
    await batching.aclose()
    published = [r for r in backend.log.records if r.event is AuditEvent.ADMIN_EXPOSURE_PUBLISH]
    assert published == []


async def test_an_audit_database_gone_while_idle_stops_the_publish() -> None:
    # Nothing was written since the database went away, so the sink still counts as
    # available: its backend's ping() is what tells.
    backend = SwitchableBackend()
    batching = BatchingAuditSink(backend, flush_interval_s=0.005, wait_for_write=True)
    h = Admin(audit=TraceLinkedAuditSink(batching))  # type: ignore[arg-type]
    version = await _bound(h)

    backend.up = False
    with pytest.raises(AuditUnavailableError):
        await h.exposures.publish(PUBLISHER, TENANT, SLUG)

    assert (await h.current(TENANT)).version == version
    assert not await _served_elsewhere(h)
    backend.up = True
    await batching.aclose()


async def test_every_change_is_refused_unsaved_while_the_sink_refuses() -> None:
    sink = SwitchableSink()
    h = Admin(audit=sink)  # type: ignore[arg-type]
    await h.secrets.put_secret(SECURITY, TENANT, SECRET_REF, SECRET_VALUE)
    version = (await h.current(TENANT)).version

    sink.up = False
    with pytest.raises(AuditUnavailableError):
        await step_model(h, holder(Role.ESRA_DATA_MANAGE), TENANT)
    with pytest.raises(AuditUnavailableError):
        await h.secrets.put_secret(SECURITY, TENANT, "secret://other", "other-value")

    assert (await h.current(TENANT)).version == version
    with pytest.raises(ProviderError):
        await h.vault.resolve(TENANT, "secret://other")


async def test_a_secret_is_not_written_when_the_sink_dies_after_the_save() -> None:
    sink = SwitchableSink()
    store = SaveHookStore()
    vault = InMemorySecretVault()
    service = ConnectionSecretService(store, vault, audit=sink, clock=FakeClock())

    def audit_dies() -> None:
        sink.up = False

    store.after_save = audit_dies
    with pytest.raises(AuditUnavailableError):
        await service.put_secret(SECURITY, TENANT, SECRET_REF, SECRET_VALUE)

    with pytest.raises(ProviderError):
        await vault.resolve(TENANT, SECRET_REF)
    workspace = await store.load(TENANT)
    assert workspace is not None
    assert dict(workspace.secret_rotations) == {}  # the saved change was withdrawn
    history = await store.history(TENANT)
    assert history[-1].reason is not None
    assert "withdrawn" in history[-1].reason


async def test_a_record_refused_after_the_save_is_held_and_delivered_once_the_sink_is_back() -> (
    None
):
    # The sink dies between the check and the record (the publication's own save): the
    # change stands, and its record, saved with it, waits in the outbox instead of a log line.
    clock = FakeClock()
    backend = SwitchableBackend()
    batching = BatchingAuditSink(
        backend,
        flush_interval_s=0.005,
        wait_for_write=True,
        unavailable_after_s=30.0,
        retry_initial_s=0.001,
        retry_max_s=0.002,
        clock=clock,
    )
    store = SaveHookStore()
    h = Admin(store=store, audit=TraceLinkedAuditSink(batching), clock=clock)  # type: ignore[arg-type]
    await _bound(h)

    def audit_dies() -> None:
        batching._unavailable = True  # as _mark_unavailable leaves it

    store.after_save = audit_dies
    await h.exposures.publish(PUBLISHER, TENANT, SLUG)

    assert await _served_elsewhere(h)  # the save had been made: it stands
    (held,) = await store.pending_audit()
    assert (held.event, held.outcome) == (AuditEvent.ADMIN_EXPOSURE_PUBLISH, "ok")
    store.after_save = None
    batching._unavailable = False
    assert await forward_audit_outbox(store, h.audit) == 1
    await batching.aclose()
    published = [r for r in backend.log.records if r.event is AuditEvent.ADMIN_EXPOSURE_PUBLISH]
    assert [r.correlation_id for r in published] == [held.correlation_id]


async def test_a_sink_without_ping_is_used_as_before() -> None:
    h = Admin()
    await run_until(h, 4)
    assert await _served_elsewhere(h)
    assert len(h.audit.events(AuditEvent.ADMIN_EXPOSURE_PUBLISH)) == 1
