"""Every refused store-settings change is recorded in one shape, whichever layer refused it.

The service records its own refusals with the classification as the record's reason —
``denied`` (``role``), ``rejected`` (the error's code), ``conflict`` — and a host records
what it refused before the service saw the change through ``refused``: the same event,
tenant and operator, the host's classification as the reason, nothing of the request.
"""

from __future__ import annotations

import pytest

from esra.core._admin.roles import NotPermittedError
from esra.core._docstore.management import DATA_MANAGE, DATA_READ, Operator
from esra.core._docstore.store_configuration import (
    StoreConfigurationService,
    StoreSettingsConflictError,
    StoreSettingsError,
)
from esra.core.audit import AuditRecord
from esra.core.codes import AuditEvent
from esra.core.testing import FakeClock, InMemoryAuditSink
from esra.core.testing._docstore import InMemoryDocumentRepository

TENANT = "tenant-a"
READER = Operator(subject="reader", tenant_id=TENANT, roles=frozenset({DATA_READ}))
MANAGER = Operator(subject="manager", tenant_id=TENANT, roles=frozenset({DATA_MANAGE}))


def _service() -> tuple[StoreConfigurationService, InMemoryAuditSink]:
    audit = InMemoryAuditSink()
    service = StoreConfigurationService(
        InMemoryDocumentRepository(), audit=audit, clock=FakeClock()
    )
    return service, audit


def _summary(record: AuditRecord) -> tuple[str, str, str | None, object]:
    return (record.tenant_id, record.outcome, record.reason, record.dimensions["operator"])


async def test_the_services_own_refusals_carry_their_classification_as_the_reason() -> None:
    service, audit = _service()
    with pytest.raises(NotPermittedError):
        await service.configure(READER, {"max_attempts": 4}, expected_revision=0)
    with pytest.raises(StoreSettingsError):
        await service.configure(MANAGER, {"max_attempts": 0}, expected_revision=0)
    with pytest.raises(StoreSettingsConflictError):
        await service.configure(MANAGER, {"max_attempts": 4}, expected_revision=3)

    assert [_summary(r) for r in audit.events(AuditEvent.STORE_CONFIGURE)] == [
        (TENANT, "denied", "role", "reader"),
        (TENANT, "rejected", "ESRA_INVALID_REQUEST", "manager"),
        (TENANT, "conflict", "ESRA_CONFIG_CONFLICT", "manager"),
    ]


async def test_a_hosts_refusal_is_recorded_as_the_service_records_its_own() -> None:
    service, audit = _service()
    await service.refused(MANAGER, "rejected", reason="ESRA_INVALID_REQUEST")
    await service.refused(MANAGER, "conflict", reason="ESRA_CONFLICT")

    rejected, conflict = audit.events(AuditEvent.STORE_CONFIGURE)
    assert _summary(rejected) == (TENANT, "rejected", "ESRA_INVALID_REQUEST", "manager")
    assert _summary(conflict) == (TENANT, "conflict", "ESRA_CONFLICT", "manager")
    # Who acted, and nothing else: no setting, no value, no text of the refused request.
    assert dict(rejected.dimensions) == {"operator": "manager"}
    assert (await service.current(READER)).revision == 0
