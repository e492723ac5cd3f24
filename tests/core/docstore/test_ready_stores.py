"""Only a Ready store is a source: an unready store is out of scope, not "unavailable".

Spec 004 registers the store as a synthetic source when it is initialised, and spec 003's
scope resolution filters by lifecycle state before any metadata reaches a model. So a store
bound mandatory that nobody has initialised must not make every answer degraded, must not be
probed on each caller's behalf, and must be searched from the first invocation after it is
Ready — here or, observed from its database, in another process.
"""

from __future__ import annotations

import attrs

from esra.core._config.source import LifecycleState, SourceHealth
from esra.core._docstore.lifecycle import StoreLifecycle, StoreStatus
from esra.core._docstore.ready_stores import ReadyStoresConfig, TenantStoreSource
from esra.core._response import ResponseStatus
from esra.core._retriever import Retriever
from esra.core.codes import AuditEvent
from esra.core.config import BindingMode, ConfigSnapshot, SourceBinding
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemorySearchProvider,
)
from tests.core.docstore.test_lifecycle import MANAGER
from tests.core.factories import make_capability, make_context, make_snapshot, make_source

TENANT = "tenant-a"
STORE = "internal-documents"
ROWS = {
    "m-s-1": [{"col_id": 1, "col_title": "Annual leave policy", "col_body": "28 days leave"}],
    f"m-{STORE}": [{"col_id": 7, "col_title": "Leave handbook", "col_body": "leave rules"}],
}


class CountingProvider(InMemorySearchProvider):
    """Counts the health probes it answers."""

    def __init__(self, *, health: SourceHealth = SourceHealth.HEALTHY) -> None:
        super().__init__(ROWS, health=health)
        self.probes = 0

    async def health(self) -> SourceHealth:
        self.probes += 1
        return await super().health()


def _snapshot() -> ConfigSnapshot:
    """``s-1`` optional and the store mandatory, as the embedded default binds them."""
    capability = make_capability(["s-1", STORE])
    capability = attrs.evolve(
        capability,
        bindings=(SourceBinding("s-1"), SourceBinding(STORE, BindingMode.MANDATORY)),
    )
    sources = [make_source("s-1"), make_source(STORE, name="Internal documents")]
    return make_snapshot(sources, capability=capability)


def _lifecycle(status: StoreStatus = StoreStatus.DISABLED) -> StoreLifecycle:
    async def apply_schema() -> None:
        return None

    return StoreLifecycle(
        TENANT, apply_schema, audit=InMemoryAuditSink(), clock=FakeClock(), status=status
    )


def _gated(lifecycle: StoreLifecycle, snapshot: ConfigSnapshot | None = None) -> ReadyStoresConfig:
    config = InMemoryConfigRepository([snapshot or _snapshot()])
    return ReadyStoresConfig(config, {TENANT: TenantStoreSource(STORE, lifecycle)})


async def test_an_unready_store_is_a_draft_source_and_the_rest_is_as_published() -> None:
    published = _snapshot()
    gated = await _gated(_lifecycle(), published).snapshot(TENANT)
    assert gated is not None
    by_id = {s.id: s for s in gated.sources}
    assert by_id[STORE].lifecycle is LifecycleState.DRAFT
    assert by_id["s-1"] is published.sources[0]
    assert gated.version == published.version  # what the audit names stays the published one
    assert attrs.evolve(gated, sources=published.sources) == published


async def test_a_ready_store_is_served_the_published_snapshot_itself() -> None:
    published = _snapshot()
    assert await _gated(_lifecycle(StoreStatus.READY), published).snapshot(TENANT) is published


async def test_the_derived_snapshot_is_reused_while_the_published_one_is_the_same() -> None:
    """The runtime snapshot caches downstream key on identity: one derivation per snapshot."""
    config = _gated(_lifecycle())
    assert await config.snapshot(TENANT) is await config.snapshot(TENANT)


async def test_a_retired_store_source_stays_retired_and_other_tenants_pass_through() -> None:
    retired = _snapshot()
    retired = attrs.evolve(
        retired,
        sources=tuple(
            attrs.evolve(s, lifecycle=LifecycleState.RETIRED) if s.id == STORE else s
            for s in retired.sources
        ),
    )
    gated = await _gated(_lifecycle(), retired).snapshot(TENANT)
    assert gated is not None
    assert {s.id: s.lifecycle for s in gated.sources}[STORE] is LifecycleState.RETIRED
    other = make_snapshot([make_source("s-9", tenant_id="tenant-b")], tenant_id="tenant-b")
    config = ReadyStoresConfig(
        InMemoryConfigRepository([other]), {TENANT: TenantStoreSource(STORE, _lifecycle())}
    )
    assert await config.snapshot("tenant-b") is other
    assert await config.snapshot(TENANT) is None


async def test_an_uninitialised_mandatory_store_is_not_probed_searched_or_warned_about() -> None:
    """Until the store is Ready the answer is complete, from the other sources alone; from
    the first invocation after ``initialise`` the store is probed and searched."""
    lifecycle = _lifecycle()
    store = CountingProvider(health=SourceHealth.UNAVAILABLE)  # no schema, no file yet
    audit = InMemoryAuditSink()
    retriever = Retriever(
        config=_gated(lifecycle),
        providers={"s-1": InMemorySearchProvider(ROWS), STORE: store},
        model=FakeLanguageModel(),
        audit=audit,
        clock=FakeClock(),
    )
    before = await retriever.retrieve(make_context(), "leave policy")
    assert before.status is ResponseStatus.COMPLETE
    assert before.warnings == ()
    assert [r.title for r in before.results] == ["Annual leave policy"]
    assert store.probes == 0
    assert store.executed == []
    (resolved,) = audit.events(AuditEvent.SOURCES_RESOLVE)
    assert resolved.dimensions["effective_source_ids"] == ("s-1",)

    await lifecycle.enable(MANAGER)
    await lifecycle.initialise(MANAGER)
    assert (await lifecycle.wait()).status is StoreStatus.READY
    store.health_state = SourceHealth.HEALTHY
    after = await retriever.retrieve(make_context(correlation_id="corr-2"), "leave policy")
    assert after.status is ResponseStatus.COMPLETE
    assert "Leave handbook" in {r.title for r in after.results}
    assert store.probes == 1
    assert len(store.executed) == 1


async def test_a_store_initialised_elsewhere_is_ready_once_its_schema_is_found() -> None:
    """Another process's initialisation ends Disabled, Enabled or Failed here (one this
    process is running decides for itself: ``test_shared_lifecycle``)."""
    for status in (StoreStatus.DISABLED, StoreStatus.ENABLED, StoreStatus.FAILED):
        lifecycle = _lifecycle(status)
        assert (await lifecycle.refresh(schema_present=False)).status is status
        assert (await lifecycle.refresh(schema_present=True)).status is StoreStatus.READY
        lifecycle.require_ready()
