"""A change whose save fails for any reason but a conflict is still audited, ``failed``.

Spec 003 audits every administrative action, refused and failed ones included. A save that
raised anything but ``ConfigConflictError`` (the state database down, a driver's error) used
to leave no record of the attempt at all. Its record cannot be held in the outbox — the
outbox is in the database whose write just failed — so it goes to the audit sink directly,
with a classified reason (never the driver's text), and the caller still gets the error.
"""

from __future__ import annotations

import logging

import pytest

from esra.core._admin.workspace import AdminWorkspace
from esra.core._audit.batching import UNWRITTEN_LOGGER, AuditUnavailableError
from esra.core._audit.record import AuditRecord
from esra.core.admin import ConfigChange, InMemoryWorkspaceStore, Role
from esra.core.codes import AuditEvent
from esra.core.exceptions import ProviderError
from esra.core.testing import InMemoryAuditSink
from tests.core.admin.test_chain import SECRET_REF, SECRET_VALUE, Admin, holder, policy, run_until
from tests.core.factories import SLUG, TENANT, make_exposure

pytestmark = pytest.mark.asyncio

DRIVER_TEXT = "could not connect to server at db-7.internal:5432 as esra_admin"


class DriverError(Exception):
    """An unclassified driver error, as psycopg or sqlite3 would raise it."""


class FailingSaveStore(InMemoryWorkspaceStore):
    """Saves normally until ``failing`` is set; then every save raises a driver's error."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = False

    async def save(
        self,
        workspace: AdminWorkspace,
        *,
        expected_version: int,
        change: ConfigChange,
        audit: AuditRecord | None = None,
    ) -> None:
        if self.failing:
            raise DriverError(DRIVER_TEXT)
        await super().save(workspace, expected_version=expected_version, change=change, audit=audit)


class RefusingSink(InMemoryAuditSink):
    """An audit sink that refuses records but answers its ``ping()`` (it died in between)."""

    def __init__(self) -> None:
        super().__init__()
        self.refusing = False

    async def record(self, record: AuditRecord) -> None:
        if self.refusing:
            raise AuditUnavailableError
        await super().record(record)


def _harness(sink: InMemoryAuditSink | None = None) -> tuple[Admin, FailingSaveStore]:
    store = FailingSaveStore()
    return Admin(store=store, audit=sink or InMemoryAuditSink()), store


def _failed(h: Admin, event: AuditEvent) -> list[AuditRecord]:
    return [r for r in h.audit.records if r.event is event and r.outcome == "failed"]


async def test_a_failed_save_is_audited_failed_and_the_error_still_raised() -> None:
    h, store = _harness()
    await run_until(h, 2)
    version = (await h.current(TENANT)).version
    store.failing = True
    governor = holder(Role.GOVERNANCE_MANAGE)

    with pytest.raises(DriverError):
        await h.governance.author_policy(governor, TENANT, policy(), reason="quarterly review")

    (record,) = _failed(h, AuditEvent.ADMIN_POLICY_AUTHOR)
    assert record.tenant_id == TENANT
    assert record.reason == "unexpected_error"
    assert record.dimensions["subject"] == governor.subject
    assert record.dimensions["role"] == Role.GOVERNANCE_MANAGE.value
    # Nothing was saved, so the record names no version it would claim.
    assert "version" not in record.dimensions
    assert (await h.current(TENANT)).version == version
    assert await store.pending_audit() == []


async def test_the_record_of_a_failed_save_never_quotes_the_driver() -> None:
    h, store = _harness()
    store.failing = True

    with pytest.raises(DriverError):
        await h.secrets.put_secret(holder(Role.SECURITY_MANAGE), TENANT, SECRET_REF, SECRET_VALUE)

    (record,) = _failed(h, AuditEvent.ADMIN_SECRET_WRITE)
    assert DRIVER_TEXT not in repr(record)
    assert "DriverError" not in repr(record)
    # The secret's effect never ran: its save did not happen.
    with pytest.raises(ProviderError):
        await h.vault.resolve(TENANT, SECRET_REF)


async def test_a_failed_publish_save_is_audited_and_nothing_is_published() -> None:
    h, store = _harness()
    await run_until(h, 3)
    publisher = holder(Role.ESRA_EXPOSURE_MANAGE)
    exposure = make_exposure(tenant_id=TENANT, published=False, source_subset=frozenset({"s-1"}))
    await h.exposures.bind_exposure(publisher, TENANT, exposure)
    store.failing = True

    with pytest.raises(DriverError):
        await h.exposures.publish(publisher, TENANT, SLUG)

    (record,) = _failed(h, AuditEvent.ADMIN_EXPOSURE_PUBLISH)
    assert record.reason == "unexpected_error"
    assert await store.published(TENANT) is None


async def test_a_failed_save_whose_record_the_sink_refuses_is_logged_unwritten(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The usual case when one database holds both: the state store and the audit log fail
    # together. The attempt is still not silent, and the caller gets the save's error.
    sink = RefusingSink()
    h, store = _harness(sink)
    await run_until(h, 2)
    store.failing = True
    sink.refusing = True

    with caplog.at_level(logging.ERROR), pytest.raises(DriverError):
        await h.governance.author_policy(holder(Role.GOVERNANCE_MANAGE), TENANT, policy())

    (unwritten,) = [r for r in caplog.records if r.name == UNWRITTEN_LOGGER]
    message = unwritten.getMessage()
    assert AuditEvent.ADMIN_POLICY_AUTHOR.value in message
    assert '"outcome": "failed"' in message
    assert DRIVER_TEXT not in message
