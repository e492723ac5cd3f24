"""The triple-control chain: each link asserted independently, tenants kept apart, all audited.

Every test takes its harness from the ``make_admin`` fixture: in memory here
(``conftest.py``); ``tests/sqlite/test_config_chain.py`` and
``tests/postgres/test_config_chain.py`` run these same test bodies with durable stores.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Protocol

import attrs
import pytest

from esra.core._admin.workspace import AdminWorkspace
from esra.core._durable_config import DurableConfigRepository
from esra.core._static_config import StaticConfigRepository
from esra.core.admin import (
    AccessPolicy,
    AccessPolicyService,
    Administrator,
    ConfigConflictError,
    ConnectionSecretService,
    DataModelService,
    ExposureService,
    Grant,
    InMemorySecretVault,
    InMemoryWorkspaceStore,
    NotPermittedError,
    Role,
    WorkspaceStore,
)
from esra.core.codes import AuditEvent, ErrorCode, ProviderErrorCode
from esra.core.config import dump_snapshot, load_snapshot
from esra.core.exceptions import ConfigurationError, ProviderError
from esra.core.ports import WritableSecretStore
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
    """The four services over one workspace store, audit sink and runtime repository."""

    store: WorkspaceStore = attrs.Factory(InMemoryWorkspaceStore)
    vault: WritableSecretStore = attrs.Factory(InMemorySecretVault)
    audit: InMemoryAuditSink = attrs.Factory(InMemoryAuditSink)
    clock: FakeClock = attrs.Factory(FakeClock)
    runtime: DurableConfigRepository = attrs.field(
        default=attrs.Factory(lambda self: DurableConfigRepository(self.store), takes_self=True)
    )

    async def current(self, tenant: str) -> AdminWorkspace:
        return await self.store.load(tenant) or AdminWorkspace(tenant_id=tenant)

    @property
    def secrets(self) -> ConnectionSecretService:
        return ConnectionSecretService(self.store, self.vault, audit=self.audit, clock=self.clock)

    @property
    def data(self) -> DataModelService:
        return DataModelService(self.store, audit=self.audit, clock=self.clock)

    @property
    def governance(self) -> AccessPolicyService:
        return AccessPolicyService(self.store, audit=self.audit, clock=self.clock)

    @property
    def exposures(self) -> ExposureService:
        return ExposureService(self.store, self.runtime, audit=self.audit, clock=self.clock)


class AdminFactory(Protocol):
    """Opens one more harness over a fresh, empty store for the running test."""

    def __call__(self) -> Awaitable[Admin]: ...


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


async def test_the_chain_completes_with_four_holders_in_sequence(make_admin: AdminFactory) -> None:
    h = await make_admin()
    await run_until(h, 4)
    published = await h.runtime.snapshot(TENANT)
    assert published is not None
    exposure = published.exposure_by_slug(SLUG)
    assert exposure is not None
    assert exposure.published
    assert exposure.source_subset == frozenset({"s-1"})
    workspace = await h.current(TENANT)
    # secret, source, capability, policy, bind, publish: six changes, six versions.
    assert workspace.version == 6
    assert workspace.published_version == 6
    assert published.version == "6"


async def test_the_published_snapshot_loads_into_a_static_repository(
    make_admin: AdminFactory,
) -> None:
    h = await make_admin()
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
async def test_a_single_role_holder_does_its_step_and_is_rejected_at_the_next(
    index: int, make_admin: AdminFactory
) -> None:
    h = await make_admin()
    await run_until(h, index)
    own = holder(CHAIN[index])
    await STEPS[index](h, own, TENANT)
    following = (index + 1) % len(STEPS)
    if following == 0:
        h = await make_admin()  # the last holder is rejected at the first step of a fresh chain
    version = (await h.current(TENANT)).version
    with pytest.raises(NotPermittedError):
        await STEPS[following](h, own, TENANT)
    assert (await h.current(TENANT)).version == version


@pytest.mark.parametrize("scope", [TENANT, None], ids=["tenant", "cross-tenant"])
@pytest.mark.parametrize("index", range(4), ids=[r.value for r in CHAIN])
async def test_each_link_rejects_every_other_role(
    index: int, scope: str | None, make_admin: AdminFactory
) -> None:
    for role in Role:
        if role is CHAIN[index]:
            continue
        h = await make_admin()
        await run_until(h, index)
        version = (await h.current(TENANT)).version
        with pytest.raises(NotPermittedError):
            await STEPS[index](h, holder(role, scope), TENANT)
        assert (await h.current(TENANT)).version == version
        denial = h.audit.records[-1]
        assert (denial.outcome, denial.reason, denial.tenant_id) == ("denied", "role", TENANT)
        assert denial.dimensions["role"] == CHAIN[index].value


@pytest.mark.parametrize("scope", [TENANT, None], ids=["tenant", "cross-tenant"])
@pytest.mark.parametrize("role", list(Role))
async def test_no_single_grant_completes_the_chain(
    role: Role, scope: str | None, make_admin: AdminFactory
) -> None:
    h = await make_admin()
    admin = holder(role, scope)
    failures = 0
    for step in STEPS:
        try:
            await step(h, admin, TENANT)
        except (NotPermittedError, ConfigurationError):
            failures += 1
    assert failures >= 3
    assert await h.runtime.snapshot(TENANT) is None


async def test_one_administrator_holding_all_four_roles_can_complete_it(
    make_admin: AdminFactory,
) -> None:
    # Triple control is about distinct grants; the model does not forbid accumulating them.
    h = await make_admin()
    everything = Administrator("all", frozenset(Grant(r, TENANT) for r in CHAIN))
    for step in STEPS:
        await step(h, everything, TENANT)
    assert await h.runtime.snapshot(TENANT) is not None


@pytest.mark.parametrize("index", range(4), ids=[r.value for r in CHAIN])
async def test_a_tenant_a_grant_cannot_act_on_tenant_b(
    index: int, make_admin: AdminFactory
) -> None:
    h = await make_admin()
    await run_until(h, index, tenant=OTHER)
    before = await h.current(OTHER)
    with pytest.raises(NotPermittedError):
        await STEPS[index](h, holder(CHAIN[index], TENANT), OTHER)
    assert (await h.current(OTHER)) == before
    denial = h.audit.records[-1]
    assert (denial.tenant_id, denial.outcome) == (OTHER, "denied")
    # A cross-tenant operator of the same role may.
    await STEPS[index](h, holder(CHAIN[index], None), OTHER)
    assert (await h.current(OTHER)).version > before.version
    assert (await h.current(TENANT)).version == 0


async def test_every_action_is_audited_with_its_tenant(make_admin: AdminFactory) -> None:
    h = await make_admin()
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


async def test_secrets_are_held_by_reference_and_rotate_within_their_tenant(
    make_admin: AdminFactory,
) -> None:
    h = await make_admin()
    security = holder(Role.SECURITY_MANAGE)
    await h.secrets.put_secret(security, TENANT, SECRET_REF, "first")
    workspace = await h.secrets.put_secret(security, TENANT, SECRET_REF, "second")
    assert workspace.secret_rotations == {SECRET_REF: 2}
    assert await h.vault.resolve(TENANT, SECRET_REF) == "second"
    with pytest.raises(ProviderError) as raised:
        await h.vault.resolve(OTHER, SECRET_REF)
    assert raised.value.code is ProviderErrorCode.SECRET_UNRESOLVED
    assert "second" not in repr(workspace)


async def test_modelling_needs_the_connection_secret(make_admin: AdminFactory) -> None:
    h = await make_admin()
    with pytest.raises(ConfigurationError):
        await step_model(h, holder(Role.ESRA_DATA_MANAGE), TENANT)
    rejected = h.audit.records[-1]
    assert (rejected.outcome, rejected.tenant_id) == ("rejected", TENANT)
    assert (await h.current(TENANT)).version == 0


async def test_a_secret_of_another_tenant_does_not_satisfy_modelling(
    make_admin: AdminFactory,
) -> None:
    h = await make_admin()
    await step_secret(h, holder(Role.SECURITY_MANAGE, OTHER), OTHER)
    with pytest.raises(ConfigurationError):
        await step_model(h, holder(Role.ESRA_DATA_MANAGE), TENANT)


async def test_modelling_rejects_another_tenants_objects(make_admin: AdminFactory) -> None:
    h = await make_admin()
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


async def test_a_policy_needs_a_modelled_capability_and_its_own_tenant(
    make_admin: AdminFactory,
) -> None:
    h = await make_admin()
    governance = holder(Role.GOVERNANCE_MANAGE)
    with pytest.raises(ConfigurationError):
        await h.governance.author_policy(governance, TENANT, policy())
    await run_until(h, 2)
    with pytest.raises(ConfigurationError):
        await h.governance.author_policy(governance, TENANT, policy(OTHER))
    await h.governance.author_policy(governance, TENANT, policy())


async def test_binding_needs_the_policy(make_admin: AdminFactory) -> None:
    h = await make_admin()
    await run_until(h, 2)
    with pytest.raises(ConfigurationError):
        await step_publish(h, holder(Role.ESRA_EXPOSURE_MANAGE), TENANT)
    assert await h.runtime.snapshot(TENANT) is None


async def test_publication_revalidates_audience_against_the_policy(
    make_admin: AdminFactory,
) -> None:
    h = await make_admin()
    await run_until(h, 3)
    exposure_manager = holder(Role.ESRA_EXPOSURE_MANAGE)
    wide = make_exposure(published=False, audience=(CLIENT_APP, "app-unlisted"))
    await h.exposures.bind_exposure(exposure_manager, TENANT, wide)
    with pytest.raises(ConfigurationError):
        await h.exposures.publish(exposure_manager, TENANT, SLUG)
    assert await h.runtime.snapshot(TENANT) is None
    assert h.audit.records[-1].outcome == "rejected"


async def test_publication_rejects_duplicate_names(make_admin: AdminFactory) -> None:
    h = await make_admin()
    await run_until(h, 4)
    data = holder(Role.ESRA_DATA_MANAGE)
    clash = make_source("s-2", name="Source s-1", connection_ref=SECRET_REF)
    with pytest.raises(ConfigurationError):
        await h.data.model_source(data, TENANT, clash)


async def test_publishing_an_unknown_slug_is_rejected(make_admin: AdminFactory) -> None:
    h = await make_admin()
    await run_until(h, 3)
    with pytest.raises(ConfigurationError):
        await h.exposures.publish(holder(Role.ESRA_EXPOSURE_MANAGE), TENANT, "nope")


async def test_draft_changes_reach_the_runtime_only_when_published(
    make_admin: AdminFactory,
) -> None:
    h = await make_admin()
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


async def test_reading_the_workspace_needs_esra_data_read(make_admin: AdminFactory) -> None:
    h = await make_admin()
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


async def test_two_concurrent_edits_of_one_draft_one_wins_the_other_conflicts(
    make_admin: AdminFactory,
) -> None:
    """Both editors read version 2; the first save wins, the second is refused, audited."""
    h = await make_admin()
    await run_until(h, 2)
    read = (await h.current(TENANT)).version
    data = holder(Role.ESRA_DATA_MANAGE)
    edits = [
        h.data.model_source(
            data, TENANT, make_source("s-1", description=text), expected_version=read
        )
        for text in ("First edit.", "Second edit.")
    ]
    outcomes = await asyncio.gather(*edits, return_exceptions=True)
    conflicts = [o for o in outcomes if isinstance(o, ConfigConflictError)]
    winners = [o for o in outcomes if isinstance(o, AdminWorkspace)]
    assert (len(winners), len(conflicts)) == (1, 1), outcomes
    assert conflicts[0].code is ErrorCode.ESRA_CONFIG_CONFLICT
    current = await h.current(TENANT)
    assert current.version == read + 1
    assert current == winners[0]
    # Both attempts are audited; the winner's record may reach the sink after the loser's
    # (it is forwarded from the outbox once its save committed).
    last_two = [(r.event, r.outcome) for r in h.audit.records[-2:]]
    assert sorted(outcome for _event, outcome in last_two) == ["conflict", "ok"]
    assert {event for event, _outcome in last_two} == {AuditEvent.ADMIN_SOURCE_MODEL}


class SlowVault(InMemorySecretVault):
    """A vault whose writes let the event loop run first, as a remote one's do."""

    async def put(self, tenant_id: str, reference: str, value: str) -> None:
        await asyncio.sleep(0)
        await super().put(tenant_id, reference, value)


async def test_a_secret_write_refused_as_a_conflict_leaves_the_secret_unchanged(
    make_admin: AdminFactory,
) -> None:
    """Two administrators rotate one secret from the same version: the vault holds the
    winner's value, never the value of the write that was refused as stale."""
    h = await make_admin()
    h.vault = SlowVault()
    await run_until(h, 1)
    read = (await h.current(TENANT)).version
    security = holder(Role.SECURITY_MANAGE)
    values = ("rotated-by-first", "rotated-by-second")
    outcomes = await asyncio.gather(
        *(
            h.secrets.put_secret(security, TENANT, SECRET_REF, value, expected_version=read)
            for value in values
        ),
        return_exceptions=True,
    )
    winners = [v for v, o in zip(values, outcomes, strict=True) if isinstance(o, AdminWorkspace)]
    losers = [o for o in outcomes if isinstance(o, ConfigConflictError)]
    assert (len(winners), len(losers)) == (1, 1), outcomes
    assert await h.vault.resolve(TENANT, SECRET_REF) == winners[0]


async def test_an_edit_naming_a_stale_version_is_refused_before_anything_happens(
    make_admin: AdminFactory,
) -> None:
    h = await make_admin()
    await run_until(h, 1)
    security = holder(Role.SECURITY_MANAGE)
    with pytest.raises(ConfigConflictError) as raised:
        await h.secrets.put_secret(security, TENANT, "secret://new", "v", expected_version=0)
    assert (raised.value.expected, raised.value.current) == (0, 1)
    with pytest.raises(ProviderError):
        await h.vault.resolve(TENANT, "secret://new")  # the effect never ran
    assert (await h.current(TENANT)).version == 1
    await h.secrets.put_secret(security, TENANT, "secret://new", "v", expected_version=1)
    assert (await h.current(TENANT)).version == 2


async def test_every_change_is_in_the_history_with_who_when_and_why(
    make_admin: AdminFactory,
) -> None:
    h = await make_admin()
    await run_until(h, 3)
    exposures = holder(Role.ESRA_EXPOSURE_MANAGE)
    exposure = make_exposure(published=False, source_subset=frozenset({"s-1"}))
    await h.exposures.bind_exposure(exposures, TENANT, exposure, reason="CHG-7: HR pilot")
    h.clock.advance(60)
    await h.exposures.publish(exposures, TENANT, SLUG, reason="CHG-7 approved")
    history = await h.data.history(holder(Role.ESRA_DATA_READ), TENANT)
    assert [(c.version, c.action, c.target) for c in history] == [
        (1, AuditEvent.ADMIN_SECRET_WRITE.value, SECRET_REF),
        (2, AuditEvent.ADMIN_SOURCE_MODEL.value, "s-1"),
        (3, AuditEvent.ADMIN_CAPABILITY_DEFINE.value, CAPABILITY_ID),
        (4, AuditEvent.ADMIN_POLICY_AUTHOR.value, SLUG),
        (5, AuditEvent.ADMIN_EXPOSURE_BIND.value, SLUG),
        (6, AuditEvent.ADMIN_EXPOSURE_PUBLISH.value, SLUG),
    ]
    assert history[0].subject == holder(Role.SECURITY_MANAGE).subject
    assert [c.reason for c in history[4:]] == ["CHG-7: HR pilot", "CHG-7 approved"]
    assert history[5].at - history[4].at == timedelta(seconds=60)
    assert await h.store.published_versions() == {TENANT: 6}
    with pytest.raises(NotPermittedError):
        await h.data.history(holder(Role.GOVERNANCE_MANAGE), TENANT)


async def test_the_published_snapshot_is_kept_while_the_draft_moves_on(
    make_admin: AdminFactory,
) -> None:
    h = await make_admin()
    await run_until(h, 4)
    published = await h.store.published_at(TENANT, 6)
    assert published is not None
    await h.data.model_source(
        holder(Role.ESRA_DATA_MANAGE), TENANT, make_source("s-1", description="Changed.")
    )
    assert await h.store.published(TENANT) == published
    assert await h.store.published_at(TENANT, 7) is None
    # A second host reading the same store serves the same publication.
    other_host = DurableConfigRepository(h.store)
    assert await other_host.snapshot(TENANT) == published


async def test_a_secret_on_record_but_never_stored_satisfies_neither_model_nor_publication(
    make_admin: AdminFactory,
) -> None:
    """A host killed after recording a secret write in the workspace and before storing it
    leaves a write on record with nothing behind it (reproduced with ``kill -9`` in
    ``tests/postgres/test_secret_write_killed.py``): given the secret store, modelling and
    publication ask it, and refuse."""
    h = await make_admin()
    await h.secrets.put_secret(holder(Role.SECURITY_MANAGE), TENANT, "pg-pw", SECRET_VALUE)
    lost = InMemorySecretVault()  # the store as the kill left it
    template = "postgresql://reader:${secret:pg-pw}@db.internal/sales"
    source = make_source("s-1", tenant_id=TENANT, connection_ref=template)
    mappings = [make_mapping(tenant_id=TENANT)]
    data = holder(Role.ESRA_DATA_MANAGE)

    refusing = DataModelService(h.store, audit=h.audit, clock=h.clock, secrets=lost)
    with pytest.raises(ConfigurationError, match="missing connection secret"):
        await refusing.model_source(data, TENANT, source, mappings)

    stored = DataModelService(h.store, audit=h.audit, clock=h.clock, secrets=h.vault)
    await stored.model_source(data, TENANT, source, mappings)
    await stored.define_capability(data, TENANT, make_capability(["s-1"], tenant_id=TENANT))
    await step_policy(h, holder(Role.GOVERNANCE_MANAGE), TENANT)
    exposure = make_exposure(tenant_id=TENANT, published=False, source_subset=frozenset({"s-1"}))
    publisher = holder(Role.ESRA_EXPOSURE_MANAGE)
    await h.exposures.bind_exposure(publisher, TENANT, exposure)
    for vault, published in ((lost, False), (h.vault, True)):
        service = ExposureService(h.store, h.runtime, audit=h.audit, clock=h.clock, secrets=vault)
        if published:
            await service.publish(publisher, TENANT, SLUG)
        else:
            with pytest.raises(ConfigurationError, match="not stored"):
                await service.publish(publisher, TENANT, SLUG)
    assert await h.runtime.snapshot(TENANT) is not None
