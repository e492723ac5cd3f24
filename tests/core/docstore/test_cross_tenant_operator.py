"""A cross-tenant operator: grants with no tenant, decided by the role model, always audited.

Tenant A's operator holding ``ESRA_DATA_READ`` with no tenant may read tenant B's store and
nothing more; every record of what it does there — denials included — names it as
cross-tenant with its home tenant, so B's audit shows who from where.
"""

from __future__ import annotations

import pytest

from esra.core._admin.chain import DataModelService
from esra.core._admin.memory_store import InMemoryWorkspaceStore
from esra.core._admin.roles import Administrator, Grant, NotPermittedError, Role
from esra.core._docstore.ingestion import IngestionWorker, upload_files
from esra.core._docstore.lifecycle import StoreLifecycle, StoreStatus
from esra.core._docstore.management import DATA_MANAGE, DATA_READ, DocumentStoreService, Operator
from esra.core.codes import AuditEvent
from esra.core.testing import FakeClock, InMemoryAuditSink
from esra.core.testing._docstore import InMemoryDocumentRepository

HOME = "tenant-a"
TARGET = "tenant-b"
CROSS_READER = Operator(
    subject="auditor",
    tenant_id=TARGET,
    home_tenant_id=HOME,
    cross_tenant_roles=frozenset({DATA_READ}),
)


async def _target_store() -> tuple[DocumentStoreService, InMemoryAuditSink, str]:
    repository, clock, audit = InMemoryDocumentRepository(), FakeClock(), InMemoryAuditSink()
    files = [("leave.txt", b"Leave policy: 28 days of paid leave.\n")]
    outcomes = await upload_files(repository, TARGET, files, scope="all", clock=clock)
    await IngestionWorker(repository, worker_id="w", clock=clock).run_turn()
    document = outcomes[0].document
    assert document is not None
    return DocumentStoreService(repository, audit=audit, clock=clock), audit, document.id


def test_the_existing_constructor_still_means_roles_on_its_own_tenant() -> None:
    """``Operator(subject, tenant_id, roles)`` is an own-tenant operator, never cross-tenant."""
    own = Operator("reader", HOME, frozenset({DATA_READ}))
    assert own.may(DATA_READ)
    assert not own.may(DATA_MANAGE)
    assert not own.cross_tenant
    assert own.audit_dimensions() == {"operator": "reader"}


def test_a_cross_tenant_role_decides_through_the_role_model() -> None:
    """A grant with no tenant permits its role (and what it implies) on the acting tenant."""
    assert CROSS_READER.may(DATA_READ)
    assert not CROSS_READER.may(DATA_MANAGE)
    assert CROSS_READER.cross_tenant
    administrator = CROSS_READER.administrator
    assert Grant(Role.ESRA_DATA_READ, None) in administrator.grants
    assert administrator.home_tenant_id == HOME
    manager = Operator(
        "m", TARGET, home_tenant_id=HOME, cross_tenant_roles=frozenset({DATA_MANAGE})
    )
    assert manager.may(DATA_READ)  # manage implies read, across tenants too


def test_own_tenant_roles_never_reach_another_tenant() -> None:
    """An administrator's grant on its home tenant permits nothing on the tenant it names."""
    administrator = Administrator.of(
        "operator", Grant(Role.ESRA_DATA_MANAGE, HOME), home_tenant_id=HOME
    )
    on_target = Operator.acting_for(administrator, TARGET)
    assert on_target.roles == frozenset()
    assert on_target.cross_tenant_roles == frozenset()
    assert not on_target.may(DATA_READ)
    on_home = Operator.acting_for(administrator, HOME)
    assert on_home.may(DATA_MANAGE)
    assert not on_home.cross_tenant


def test_a_role_name_outside_the_model_grants_nothing_across_tenants() -> None:
    """A made-up name in the cross-tenant roles is ignored, not an error and not a grant."""
    forged = Operator("x", TARGET, home_tenant_id=HOME, cross_tenant_roles=frozenset({"ROOT"}))
    assert not forged.may(DATA_READ)


async def test_a_cross_tenant_reader_reads_the_target_store_and_cannot_change_it() -> None:
    """Reading works; upload, download and delete are refused, each refusal audited as
    cross-tenant under the target tenant with the operator's home tenant."""
    service, audit, document_id = await _target_store()
    assert [row.document.id for row in (await service.overview(CROSS_READER)).rows] == [document_id]
    with pytest.raises(NotPermittedError):
        await service.upload(CROSS_READER, [("x.txt", b"x")], scope="all")
    with pytest.raises(NotPermittedError):
        await service.download(CROSS_READER, document_id)
    with pytest.raises(NotPermittedError):
        await service.delete(CROSS_READER, document_id)
    records = [
        *audit.events(AuditEvent.DOCUMENT_UPLOAD),
        *audit.events(AuditEvent.DOCUMENT_DOWNLOAD),
        *audit.events(AuditEvent.DOCUMENT_DELETE),
    ]
    assert [r.outcome for r in records] == ["denied", "denied", "denied"]
    for record in records:
        assert record.tenant_id == TARGET
        assert record.dimensions["operator"] == "auditor"
        assert record.dimensions["cross_tenant"] is True
        assert record.dimensions["operator_tenant"] == HOME


async def test_a_cross_tenant_manager_s_changes_are_audited_as_cross_tenant() -> None:
    """An allowed action is marked too, not only refusals."""
    service, audit, document_id = await _target_store()
    manager = Operator(
        "ops", TARGET, home_tenant_id=HOME, cross_tenant_roles=frozenset({DATA_MANAGE})
    )
    await service.delete(manager, document_id)
    (record,) = audit.events(AuditEvent.DOCUMENT_DELETE)
    assert record.outcome == "ok"
    assert (record.dimensions["cross_tenant"], record.dimensions["operator_tenant"]) == (
        True,
        HOME,
    )


async def test_the_lifecycle_admits_a_cross_tenant_manager_and_records_it() -> None:
    """The lifecycle's tenant check is against the acting tenant, and its records say who."""
    audit = InMemoryAuditSink()

    async def ready() -> None:
        return None

    lifecycle = StoreLifecycle(TARGET, ready, audit=audit, clock=FakeClock())
    manager = Operator(
        "ops", TARGET, home_tenant_id=HOME, cross_tenant_roles=frozenset({DATA_MANAGE})
    )
    with pytest.raises(NotPermittedError):
        await lifecycle.enable(CROSS_READER)
    assert (await lifecycle.enable(manager)).status is StoreStatus.ENABLED
    denied, enabled = audit.events(AuditEvent.STORE_ENABLE)
    assert (denied.outcome, enabled.outcome) == ("denied", "ok")
    for record in (denied, enabled):
        assert record.tenant_id == TARGET
        assert record.dimensions["cross_tenant"] is True
        assert record.dimensions["operator_tenant"] == HOME


async def test_an_operator_acting_on_its_own_tenant_is_never_marked() -> None:
    """A cross-tenant role used at home is an ordinary action: no cross-tenant dimensions."""
    service, audit, document_id = await _target_store()
    at_home = Operator(
        "ops", TARGET, home_tenant_id=TARGET, cross_tenant_roles=frozenset({DATA_MANAGE})
    )
    await service.delete(at_home, document_id)
    (record,) = audit.events(AuditEvent.DOCUMENT_DELETE)
    assert "cross_tenant" not in record.dimensions
    assert "operator_tenant" not in record.dimensions


async def test_the_configuration_services_audit_a_cross_tenant_administrator() -> None:
    """``record_admin_action`` is the funnel: the chain's reads and denials are marked."""
    audit = InMemoryAuditSink()
    model = DataModelService(InMemoryWorkspaceStore(), audit=audit, clock=FakeClock())
    reader = Administrator.of("auditor", Grant(Role.ESRA_DATA_READ, None), home_tenant_id=HOME)
    await model.view(reader, TARGET)
    outsider = Administrator.of("x", Grant(Role.ESRA_DATA_READ, HOME), home_tenant_id=HOME)
    with pytest.raises(NotPermittedError):
        await model.view(outsider, TARGET)
    at_home = Administrator.of("h", Grant(Role.ESRA_DATA_READ, HOME), home_tenant_id=HOME)
    await model.view(at_home, HOME)
    viewed, denied, home = audit.events(AuditEvent.ADMIN_WORKSPACE_VIEW)
    assert (viewed.outcome, denied.outcome, home.outcome) == ("ok", "denied", "ok")
    for record in (viewed, denied):
        assert record.tenant_id == TARGET
        assert record.dimensions["cross_tenant"] is True
        assert record.dimensions["operator_tenant"] == HOME
    assert "cross_tenant" not in home.dimensions
