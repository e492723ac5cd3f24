"""The triple-control chain: each link asserted independently, tenants kept apart, all audited."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs
import pytest

from esra.core.admin import (
    AccessPolicy,
    AccessPolicyService,
    Administrator,
    ConnectionSecretService,
    DataModelService,
    ExposureService,
    Grant,
    InMemorySecretVault,
    NotPermittedError,
    Role,
    WorkspaceRegistry,
)
from esra.core.codes import AuditEvent, ProviderErrorCode
from esra.core.config import dump_snapshot, load_snapshot
from esra.core.exceptions import ConfigurationError, ProviderError
from esra.core.static_config import StaticConfigRepository
from esra.core.testing import FakeClock, InMemoryAuditSink
from tests.core.factories import (
    CAPABILITY_ID,
    CLIENT_APP,
    SLUG,
    TENANT,
    make_capability,
    make_exposure,
    make_mapping,
    make_source,
)

OTHER = "tenant-b"
SECRET_REF = "secret://s-1"
SECRET_VALUE = "pw-4f1c-never-in-config"
CHAIN = (
    Role.SECURITY_MANAGE,
    Role.ESRA_DATA_MANAGE,
    Role.GOVERNANCE_MANAGE,
    Role.ESRA_EXPOSURE_MANAGE,
)


@attrs.define
class Admin:
    """The four services over one registry, audit sink and runtime repository."""

    vault: InMemorySecretVault = attrs.Factory(InMemorySecretVault)
    audit: InMemoryAuditSink = attrs.Factory(InMemoryAuditSink)
    runtime: StaticConfigRepository = attrs.Factory(StaticConfigRepository)
    workspaces: WorkspaceRegistry = attrs.Factory(WorkspaceRegistry)
    clock: FakeClock = attrs.Factory(FakeClock)

    @property
    def secrets(self) -> ConnectionSecretService:
        return ConnectionSecretService(
            self.workspaces, self.vault, audit=self.audit, clock=self.clock
        )

    @property
    def data(self) -> DataModelService:
        return DataModelService(self.workspaces, audit=self.audit, clock=self.clock)

    @property
    def governance(self) -> AccessPolicyService:
        return AccessPolicyService(self.workspaces, audit=self.audit, clock=self.clock)

    @property
    def exposures(self) -> ExposureService:
        return ExposureService(self.workspaces, self.runtime, audit=self.audit, clock=self.clock)


def policy(tenant: str = TENANT) -> AccessPolicy:
    return AccessPolicy(
        tenant_id=tenant,
        slug=SLUG,
        capability_id=CAPABILITY_ID,
        allowed_client_apps=frozenset({CLIENT_APP}),
        required_claims=frozenset({"department"}),
    )


async def step_secret(h: Admin, admin: Administrator, tenant: str) -> None:
    await h.secrets.put_secret(admin, tenant, SECRET_REF, SECRET_VALUE)


async def step_model(h: Admin, admin: Administrator, tenant: str) -> None:
    source = make_source("s-1", tenant_id=tenant)
    await h.data.model_source(admin, tenant, source, [make_mapping(tenant_id=tenant)])
    await h.data.define_capability(admin, tenant, make_capability(["s-1"], tenant_id=tenant))


async def step_policy(h: Admin, admin: Administrator, tenant: str) -> None:
    await h.governance.author_policy(admin, tenant, policy(tenant))


async def step_publish(h: Admin, admin: Administrator, tenant: str) -> None:
    exposure = make_exposure(tenant_id=tenant, published=False, source_subset=frozenset({"s-1"}))
    await h.exposures.bind_exposure(admin, tenant, exposure)
    await h.exposures.publish(admin, tenant, SLUG)


Step = Callable[[Admin, Administrator, str], Awaitable[None]]
STEPS: tuple[Step, ...] = (step_secret, step_model, step_policy, step_publish)


def holder(role: Role, scope: str | None = TENANT) -> Administrator:
    return Administrator.of(f"{role.value.lower()}@{scope}", Grant(role, scope))


async def run_until(h: Admin, index: int, tenant: str = TENANT) -> None:
    """Perform steps ``0..index-1`` with the right holder for each."""
    for role, step in zip(CHAIN[:index], STEPS[:index], strict=True):
        await step(h, holder(role, tenant), tenant)


async def test_the_chain_completes_with_four_holders_in_sequence() -> None:
    h = Admin()
    await run_until(h, 4)
    published = await h.runtime.snapshot(TENANT)
    assert published is not None
    exposure = published.exposure_by_slug(SLUG)
    assert exposure is not None
    assert exposure.published
    assert exposure.source_subset == frozenset({"s-1"})
    workspace = h.workspaces.current(TENANT)
    # secret, source, capability, policy, bind, publish: six changes, six versions.
    assert workspace.version == 6
    assert workspace.published_version == 6
    assert published.version == "6"


async def test_the_published_snapshot_loads_into_a_static_repository() -> None:
    h = Admin()
    await run_until(h, 4)
    published = await h.runtime.snapshot(TENANT)
    assert published is not None
    document = dump_snapshot(published)
    loaded = load_snapshot(document)
    assert loaded == published
    repository = StaticConfigRepository([loaded])
    assert await repository.snapshot(TENANT) == published
    assert SECRET_VALUE not in repr(document)


@pytest.mark.parametrize("index", range(4), ids=[r.value for r in CHAIN])
async def test_a_single_role_holder_does_its_step_and_is_rejected_at_the_next(index: int) -> None:
    h = Admin()
    await run_until(h, index)
    own = holder(CHAIN[index])
    await STEPS[index](h, own, TENANT)
    following = (index + 1) % len(STEPS)
    if following == 0:
        h = Admin()  # the last holder is rejected at the first step of a fresh chain
    version = h.workspaces.current(TENANT).version
    with pytest.raises(NotPermittedError):
        await STEPS[following](h, own, TENANT)
    assert h.workspaces.current(TENANT).version == version


@pytest.mark.parametrize("scope", [TENANT, None], ids=["tenant", "cross-tenant"])
@pytest.mark.parametrize("index", range(4), ids=[r.value for r in CHAIN])
async def test_each_link_rejects_every_other_role(index: int, scope: str | None) -> None:
    for role in Role:
        if role is CHAIN[index]:
            continue
        h = Admin()
        await run_until(h, index)
        version = h.workspaces.current(TENANT).version
        with pytest.raises(NotPermittedError):
            await STEPS[index](h, holder(role, scope), TENANT)
        assert h.workspaces.current(TENANT).version == version
        denial = h.audit.records[-1]
        assert (denial.outcome, denial.reason, denial.tenant_id) == ("denied", "role", TENANT)
        assert denial.dimensions["role"] == CHAIN[index].value


@pytest.mark.parametrize("scope", [TENANT, None], ids=["tenant", "cross-tenant"])
@pytest.mark.parametrize("role", list(Role))
async def test_no_single_grant_completes_the_chain(role: Role, scope: str | None) -> None:
    h = Admin()
    admin = holder(role, scope)
    failures = 0
    for step in STEPS:
        try:
            await step(h, admin, TENANT)
        except (NotPermittedError, ConfigurationError):
            failures += 1
    assert failures >= 3
    assert await h.runtime.snapshot(TENANT) is None


async def test_one_administrator_holding_all_four_roles_can_complete_it() -> None:
    # Triple control is about distinct grants; the model does not forbid accumulating them.
    h = Admin()
    everything = Administrator("all", frozenset(Grant(r, TENANT) for r in CHAIN))
    for step in STEPS:
        await step(h, everything, TENANT)
    assert await h.runtime.snapshot(TENANT) is not None


@pytest.mark.parametrize("index", range(4), ids=[r.value for r in CHAIN])
async def test_a_tenant_a_grant_cannot_act_on_tenant_b(index: int) -> None:
    h = Admin()
    await run_until(h, index, tenant=OTHER)
    before = h.workspaces.current(OTHER)
    with pytest.raises(NotPermittedError):
        await STEPS[index](h, holder(CHAIN[index], TENANT), OTHER)
    assert h.workspaces.current(OTHER) == before
    denial = h.audit.records[-1]
    assert (denial.tenant_id, denial.outcome) == (OTHER, "denied")
    # A cross-tenant operator of the same role may.
    await STEPS[index](h, holder(CHAIN[index], None), OTHER)
    assert h.workspaces.current(OTHER).version > before.version
    assert h.workspaces.current(TENANT).version == 0


async def test_every_action_is_audited_with_its_tenant() -> None:
    h = Admin()
    await run_until(h, 4)
    with pytest.raises(NotPermittedError):
        await step_secret(h, holder(Role.SECURITY_MANAGE, TENANT), OTHER)
    with pytest.raises(NotPermittedError):
        await step_model(h, holder(Role.GOVERNANCE_MANAGE, TENANT), TENANT)
    events = [(r.event, r.tenant_id, r.outcome) for r in h.audit.records]
    assert events == [
        (AuditEvent.ADMIN_SECRET_WRITE, TENANT, "ok"),
        (AuditEvent.ADMIN_SOURCE_MODEL, TENANT, "ok"),
        (AuditEvent.ADMIN_CAPABILITY_DEFINE, TENANT, "ok"),
        (AuditEvent.ADMIN_POLICY_AUTHOR, TENANT, "ok"),
        (AuditEvent.ADMIN_EXPOSURE_BIND, TENANT, "ok"),
        (AuditEvent.ADMIN_EXPOSURE_PUBLISH, TENANT, "ok"),
        (AuditEvent.ADMIN_SECRET_WRITE, OTHER, "denied"),
        (AuditEvent.ADMIN_SOURCE_MODEL, TENANT, "denied"),
    ]
    assert [r.dimensions["version"] for r in h.audit.records[:6]] == [1, 2, 3, 4, 5, 6]
    assert all(r.dimensions["subject"] for r in h.audit.records)
    assert SECRET_VALUE not in repr(h.audit.records)
    assert len({r.correlation_id for r in h.audit.records}) == len(h.audit.records)


async def test_secrets_are_held_by_reference_and_rotate_within_their_tenant() -> None:
    h = Admin()
    security = holder(Role.SECURITY_MANAGE)
    await h.secrets.put_secret(security, TENANT, SECRET_REF, "first")
    workspace = await h.secrets.put_secret(security, TENANT, SECRET_REF, "second")
    assert workspace.secret_rotations == {SECRET_REF: 2}
    assert await h.vault.resolve(TENANT, SECRET_REF) == "second"
    with pytest.raises(ProviderError) as raised:
        await h.vault.resolve(OTHER, SECRET_REF)
    assert raised.value.code is ProviderErrorCode.SECRET_UNRESOLVED
    assert "second" not in repr(workspace)


async def test_modelling_needs_the_connection_secret() -> None:
    h = Admin()
    with pytest.raises(ConfigurationError):
        await step_model(h, holder(Role.ESRA_DATA_MANAGE), TENANT)
    rejected = h.audit.records[-1]
    assert (rejected.outcome, rejected.tenant_id) == ("rejected", TENANT)
    assert h.workspaces.current(TENANT).version == 0


async def test_a_secret_of_another_tenant_does_not_satisfy_modelling() -> None:
    h = Admin()
    await step_secret(h, holder(Role.SECURITY_MANAGE, OTHER), OTHER)
    with pytest.raises(ConfigurationError):
        await step_model(h, holder(Role.ESRA_DATA_MANAGE), TENANT)


async def test_modelling_rejects_another_tenants_objects() -> None:
    h = Admin()
    await run_until(h, 1)
    foreign = make_source("s-1", tenant_id=OTHER)
    with pytest.raises(ConfigurationError):
        await h.data.model_source(holder(Role.ESRA_DATA_MANAGE), TENANT, foreign)
    with pytest.raises(ConfigurationError):
        await h.data.model_source(
            holder(Role.ESRA_DATA_MANAGE),
            TENANT,
            make_source("s-1"),
            [make_mapping(tenant_id=OTHER)],
        )


async def test_a_policy_needs_a_modelled_capability_and_its_own_tenant() -> None:
    h = Admin()
    governance = holder(Role.GOVERNANCE_MANAGE)
    with pytest.raises(ConfigurationError):
        await h.governance.author_policy(governance, TENANT, policy())
    await run_until(h, 2)
    with pytest.raises(ConfigurationError):
        await h.governance.author_policy(governance, TENANT, policy(OTHER))
    await h.governance.author_policy(governance, TENANT, policy())


async def test_binding_needs_the_policy() -> None:
    h = Admin()
    await run_until(h, 2)
    with pytest.raises(ConfigurationError):
        await step_publish(h, holder(Role.ESRA_EXPOSURE_MANAGE), TENANT)
    assert await h.runtime.snapshot(TENANT) is None


async def test_publication_revalidates_audience_against_the_policy() -> None:
    h = Admin()
    await run_until(h, 3)
    exposure_manager = holder(Role.ESRA_EXPOSURE_MANAGE)
    wide = make_exposure(published=False, audience=(CLIENT_APP, "app-unlisted"))
    await h.exposures.bind_exposure(exposure_manager, TENANT, wide)
    with pytest.raises(ConfigurationError):
        await h.exposures.publish(exposure_manager, TENANT, SLUG)
    assert await h.runtime.snapshot(TENANT) is None
    assert h.audit.records[-1].outcome == "rejected"


async def test_publication_rejects_duplicate_names() -> None:
    h = Admin()
    await run_until(h, 4)
    data = holder(Role.ESRA_DATA_MANAGE)
    clash = make_source("s-2", name="Source s-1", connection_ref=SECRET_REF)
    with pytest.raises(ConfigurationError):
        await h.data.model_source(data, TENANT, clash)


async def test_publishing_an_unknown_slug_is_rejected() -> None:
    h = Admin()
    await run_until(h, 3)
    with pytest.raises(ConfigurationError):
        await h.exposures.publish(holder(Role.ESRA_EXPOSURE_MANAGE), TENANT, "nope")


async def test_draft_changes_reach_the_runtime_only_when_published() -> None:
    h = Admin()
    await run_until(h, 4)
    published = await h.runtime.snapshot(TENANT)
    await h.data.model_source(
        holder(Role.ESRA_DATA_MANAGE), TENANT, make_source("s-1", description="Changed.")
    )
    assert await h.runtime.snapshot(TENANT) == published
    await h.exposures.publish(holder(Role.ESRA_EXPOSURE_MANAGE), TENANT, SLUG)
    republished = await h.runtime.snapshot(TENANT)
    assert republished is not None
    assert republished.version == "8"


async def test_reading_the_workspace_needs_esra_data_read() -> None:
    h = Admin()
    await run_until(h, 2)
    reader = holder(Role.ESRA_DATA_READ)
    assert (await h.data.view(reader, TENANT)).version == 3
    assert (await h.data.view(holder(Role.ESRA_EXPOSURE_MANAGE), TENANT)).version == 3
    for role in (Role.SECURITY_MANAGE, Role.GOVERNANCE_MANAGE):
        with pytest.raises(NotPermittedError):
            await h.data.view(holder(role), TENANT)
    with pytest.raises(NotPermittedError):
        await h.data.view(reader, OTHER)
    assert h.audit.records[-1].tenant_id == OTHER
