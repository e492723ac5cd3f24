"""A secret write the store refuses changes nothing; one that fails after the save is withdrawn.

The chain saves the workspace before it writes the secret (so a write refused as stale never
touches the store). The store's own refusals — an ``env:``/``file:`` reference, a value over
``MAX_SECRET_BYTES`` — are therefore asked before the save: otherwise the workspace would
list a secret that was never written, and a source could be modelled and published on it.
"""

from __future__ import annotations

import pytest

from esra.core._admin.workspace import AdminWorkspace
from esra.core.admin import (
    Administrator,
    ConnectionSecretService,
    DataModelService,
    Grant,
    InMemorySecretVault,
    InMemoryWorkspaceStore,
    NotPermittedError,
    Role,
)
from esra.core.codes import AuditEvent, ErrorCode
from esra.core.exceptions import ConfigurationError, ProviderError
from esra.core.ports import WritableSecretStore
from esra.core.secrets import (
    DENY_ALL,
    MAX_SECRET_BYTES,
    EncryptedSecretStore,
    KeyEncryptionKeys,
    ReferenceSecretResolver,
    RoutingSecretStore,
)
from esra.core.testing import FakeClock, InMemoryAuditSink, InMemorySecretTable
from tests.core.factories import TENANT, make_source

pytestmark = pytest.mark.asyncio

SECURITY = Administrator.of("security", Grant(Role.SECURITY_MANAGE, TENANT))
MODELLER = Administrator.of("modeller", Grant(Role.ESRA_DATA_MANAGE, TENANT))
REFERENCE = "sales-db"
OVERSIZED = "x" * (MAX_SECRET_BYTES + 1)
REFUSED_WRITES = pytest.mark.parametrize(
    ("reference", "value"),
    [
        (REFERENCE, OVERSIZED),
        ("env:ESRA_SECRET_PG", "pw"),
        ("file:/run/secrets/pg-password", "pw"),
    ],
    ids=["oversized-value", "env-reference", "file-reference"],
)


def production_store() -> RoutingSecretStore:
    """The writable store a host hands the chain (``esra.starlette._durable_state``)."""
    stored = EncryptedSecretStore(InMemorySecretTable(), KeyEncryptionKeys.generate("k1"))
    return RoutingSecretStore(stored=stored, external=ReferenceSecretResolver({}, default=DENY_ALL))


class UnreachableVault(InMemorySecretVault):
    """Accepts every write when asked, then cannot reach its backend to make one."""

    async def put(self, tenant_id: str, reference: str, value: str) -> None:
        raise OSError("the secret backend is unreachable")


class Chain:
    """The secret and modelling services over one store, audit sink and clock."""

    def __init__(self, vault: WritableSecretStore) -> None:
        self.store = InMemoryWorkspaceStore()
        self.audit = InMemoryAuditSink()
        self.vault = vault
        clock = FakeClock()
        self.secrets = ConnectionSecretService(self.store, vault, audit=self.audit, clock=clock)
        self.data = DataModelService(self.store, audit=self.audit, clock=clock)

    async def current(self) -> AdminWorkspace:
        return await self.store.load(TENANT) or AdminWorkspace(tenant_id=TENANT)


@REFUSED_WRITES
async def test_a_refused_secret_write_leaves_the_workspace_unchanged(
    reference: str, value: str
) -> None:
    chain = Chain(production_store())

    with pytest.raises(ConfigurationError) as refused:
        await chain.secrets.put_secret(SECURITY, TENANT, reference, value)

    assert refused.value.code is ErrorCode.ESRA_CONFIGURATION_INVALID
    workspace = await chain.current()
    assert (workspace.version, dict(workspace.secret_rotations)) == (0, {})
    assert await chain.store.history(TENANT) == []
    (record,) = chain.audit.records
    assert (record.event, record.outcome) == (AuditEvent.ADMIN_SECRET_WRITE, "rejected")
    assert record.reason == str(refused.value)


async def test_a_refused_rotation_keeps_the_previous_secret_and_version() -> None:
    chain = Chain(production_store())
    await chain.secrets.put_secret(SECURITY, TENANT, REFERENCE, "first-value")

    with pytest.raises(ConfigurationError):
        await chain.secrets.put_secret(SECURITY, TENANT, REFERENCE, OVERSIZED)

    workspace = await chain.current()
    assert (workspace.version, dict(workspace.secret_rotations)) == (1, {REFERENCE: 1})
    assert await chain.vault.resolve(TENANT, REFERENCE) == "first-value"


async def test_a_secret_that_was_refused_does_not_let_a_source_be_modelled() -> None:
    chain = Chain(production_store())
    with pytest.raises(ConfigurationError):
        await chain.secrets.put_secret(SECURITY, TENANT, REFERENCE, OVERSIZED)
    with pytest.raises(ProviderError):
        await chain.vault.resolve(TENANT, REFERENCE)

    source = make_source(tenant_id=TENANT, connection_ref=REFERENCE)
    with pytest.raises(ConfigurationError, match="missing connection secret"):
        await chain.data.model_source(MODELLER, TENANT, source)


async def test_a_write_without_the_role_is_denied_before_the_store_judges_it() -> None:
    chain = Chain(production_store())

    with pytest.raises(NotPermittedError):
        await chain.secrets.put_secret(MODELLER, TENANT, REFERENCE, OVERSIZED)

    assert [r.outcome for r in chain.audit.records] == ["denied"]


async def test_a_write_that_fails_after_the_save_is_withdrawn_from_the_workspace() -> None:
    chain = Chain(UnreachableVault())

    with pytest.raises(OSError, match="unreachable"):
        await chain.secrets.put_secret(SECURITY, TENANT, REFERENCE, "never-written")

    workspace = await chain.current()
    assert dict(workspace.secret_rotations) == {}
    history = await chain.store.history(TENANT)
    assert [(c.version, c.action, c.target) for c in history] == [
        (1, AuditEvent.ADMIN_SECRET_WRITE.value, REFERENCE),
        (2, AuditEvent.ADMIN_SECRET_WRITE.value, REFERENCE),
    ]
    assert history[1].reason is not None
    assert "withdraw" in history[1].reason
    (record,) = chain.audit.records
    assert (record.outcome, record.reason) == ("failed", "unexpected_error")
    assert record.dimensions["withdrawn_version"] == 2
    source = make_source(tenant_id=TENANT, connection_ref=REFERENCE)
    with pytest.raises(ConfigurationError, match="missing connection secret"):
        await chain.data.model_source(MODELLER, TENANT, source)


async def test_a_failed_rotation_is_withdrawn_to_the_previous_count() -> None:
    vault = InMemorySecretVault()
    chain = Chain(vault)
    await chain.secrets.put_secret(SECURITY, TENANT, REFERENCE, "first-value")
    chain.secrets = ConnectionSecretService(
        chain.store, UnreachableVault(), audit=chain.audit, clock=FakeClock()
    )

    with pytest.raises(OSError, match="unreachable"):
        await chain.secrets.put_secret(SECURITY, TENANT, REFERENCE, "second-value")

    workspace = await chain.current()
    assert (workspace.version, dict(workspace.secret_rotations)) == (3, {REFERENCE: 1})
    assert await vault.resolve(TENANT, REFERENCE) == "first-value"


async def test_a_failed_write_rotated_again_since_is_not_withdrawn() -> None:
    """Another administrator's later rotation of the same reference stands."""

    class RotatedMeanwhile(InMemorySecretVault):
        def __init__(self) -> None:
            super().__init__()
            self.failed_once = False

        async def put(self, tenant_id: str, reference: str, value: str) -> None:
            if self.failed_once:
                await super().put(tenant_id, reference, value)
                return
            self.failed_once = True
            await chain.secrets.put_secret(SECURITY, TENANT, REFERENCE, "rotated-meanwhile")
            raise OSError("the secret backend is unreachable")

    vault = RotatedMeanwhile()
    chain = Chain(vault)

    with pytest.raises(OSError, match="unreachable"):
        await chain.secrets.put_secret(SECURITY, TENANT, REFERENCE, "lost-value")

    workspace = await chain.current()
    assert (workspace.version, dict(workspace.secret_rotations)) == (2, {REFERENCE: 2})
    assert await vault.resolve(TENANT, REFERENCE) == "rotated-meanwhile"
    failed = [r for r in chain.audit.records if r.outcome == "failed"]
    assert [r.dimensions.get("withdrawn_version") for r in failed] == [None]
