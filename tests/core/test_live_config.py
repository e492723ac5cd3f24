"""Publications applied live: on this host before ``publish`` returns, elsewhere on ``sync``.

Each "host" here is a ``DurableConfigRepository`` + ``OpenedProviders`` + ``ConfigFollower``
over one shared workspace store, serving a ``Retriever`` built once, before any publication
it is asked about — as ``create_app`` builds it. The engine is in memory: a source's
``connection_ref`` names the dataset its provider opens, and every open and close is counted.
``tests/postgres/test_live_publication.py`` runs the two-host tests on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import pytest

from esra.core._admin.store import ConfigChange
from esra.core._admin.workspace import AdminWorkspace
from esra.core._durable_config import DurableConfigRepository
from esra.core._live_config import ConfigFollower
from esra.core._opened_providers import OpenedProviders
from esra.core._pipeline.health import SourceHealthMonitor
from esra.core._provider_registry import (
    OpenedProvider,
    ProviderOptionError,
    ProviderRegistry,
    ProviderRequest,
)
from esra.core._retriever import Retriever
from esra.core.admin import (
    AccessPolicyService,
    Administrator,
    ConnectionSecretService,
    DataModelService,
    ExposureService,
    Grant,
    InMemorySecretVault,
    InMemoryWorkspaceStore,
    Role,
    WorkspaceStore,
)
from esra.core.config import ConfigSnapshot, LifecycleState, Source, SourceHealth
from esra.core.exceptions import NoSourcesAvailableError
from esra.core.ports import SearchProvider
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemorySearchProvider,
    InMemorySecretStore,
    StaticHostAllowlist,
)
from tests.core.admin.test_chain import policy
from tests.core.factories import (
    SLUG,
    TENANT,
    make_capability,
    make_context,
    make_exposure,
    make_mapping,
    make_snapshot,
    make_source,
)

OTHER = "tenant-b"
Rows = Mapping[str, Sequence[Mapping[str, Any]]]


def dataset(title: str, *mapping_ids: str) -> Rows:
    """One row titled ``title`` in each of ``mapping_ids``, found by the word 'leave'."""
    row = {"col_id": 1, "col_title": title, "col_body": "leave policy"}
    return {mapping_id: [row] for mapping_id in mapping_ids}


@attrs.define
class Engine:
    """The in-memory engine: ``connection_ref`` → rows; counts opens and closes."""

    datasets: dict[str, Rows] = attrs.Factory(dict)
    refused: set[str] = attrs.Factory(set)
    opened: list[InMemorySearchProvider] = attrs.Factory(list)
    closed: list[InMemorySearchProvider] = attrs.Factory(list)

    def open(self, request: ProviderRequest) -> OpenedProvider:
        ref = request.source.connection_ref
        if ref in self.refused:
            msg = f"source {request.source.id!r}: refused by the test engine"
            raise ProviderOptionError(msg)
        provider = InMemorySearchProvider(self.datasets[ref])
        self.opened.append(provider)

        async def close() -> None:
            self.closed.append(provider)

        return OpenedProvider(provider, close)

    def closes_of(self, provider: object) -> int:
        return sum(1 for closed in self.closed if closed is provider)


def request_for(snapshot: ConfigSnapshot, source: Source) -> ProviderRequest:
    """What a host's ``request_for`` builds: the source, its mappings, the host's ports."""
    assert source.tenant_id == snapshot.tenant_id
    return ProviderRequest(
        source=source,
        secrets=InMemorySecretStore(),
        allowlist=StaticHostAllowlist(),
        mappings=snapshot.mappings_of(source.id),
    )


@attrs.define
class Host:
    """One host's runtime over the shared ``store``: repository, providers, follower."""

    store: WorkspaceStore
    engine: Engine
    repository: DurableConfigRepository = attrs.field(init=False)
    providers: OpenedProviders = attrs.field(init=False)
    follower: ConfigFollower = attrs.field(init=False)
    audit: InMemoryAuditSink = attrs.Factory(InMemoryAuditSink)
    retrievers: dict[str, Retriever] = attrs.Factory(dict)

    def __attrs_post_init__(self) -> None:
        self.repository = DurableConfigRepository(self.store)
        self.providers = OpenedProviders(ProviderRegistry({"in_memory": self.engine.open}))
        self.follower = ConfigFollower(
            self.repository, self.providers, request_for=request_for, poll_s=0.01
        )

    def retriever(self, tenant_id: str = TENANT) -> Retriever:
        """The tenant's Retriever, built once and kept, over the follower's live providers."""
        if tenant_id not in self.retrievers:
            self.retrievers[tenant_id] = Retriever(
                config=self.repository,
                providers=self.follower.providers_for(tenant_id),
                model=FakeLanguageModel(),
                audit=self.audit,
                clock=FakeClock(),
                tenant_id=tenant_id,
            )
        return self.retrievers[tenant_id]

    async def titles(self, tenant_id: str = TENANT) -> set[str]:
        """The titles a search for 'leave' returns on this host."""
        response = await self.retriever(tenant_id).retrieve(
            make_context(tenant_id=tenant_id), "leave"
        )
        return {result.title for result in response.results}

    def provider(self, source_id: str, tenant_id: str = TENANT) -> SearchProvider | None:
        return self.follower.providers_for(tenant_id).get(source_id)


async def publish(store: WorkspaceStore, host: Host, snapshot: ConfigSnapshot) -> None:
    """What ``ExposureService.publish`` does: store the publication, then tell ``host``."""
    current = await store.load(snapshot.tenant_id) or AdminWorkspace(tenant_id=snapshot.tenant_id)
    rotations = {source.connection_ref: 1 for source in snapshot.sources}
    updated = current.next(snapshot=snapshot, secret_rotations=rotations, published=True)
    change = ConfigChange(
        tenant_id=snapshot.tenant_id,
        version=updated.version,
        subject="test",
        at=FakeClock().now(),
        action="esra.admin.exposure.publish",
        target=SLUG,
    )
    await store.save(updated, expected_version=current.version, change=change)
    host.follower.publish(updated.snapshot)


def sources(*specs: tuple[str, str], tenant_id: str = TENANT) -> ConfigSnapshot:
    """A snapshot of sources ``(id, connection_ref)``, every one bound and exposed."""
    return make_snapshot(
        [
            make_source(source_id, connection_ref=ref, tenant_id=tenant_id)
            for source_id, ref in specs
        ],
        tenant_id=tenant_id,
    )


def engine() -> Engine:
    return Engine(
        datasets={
            "db-1": dataset("From db-1", "m-s-1"),
            "db-2": dataset("From db-2", "m-s-2"),
            "db-1-moved": dataset("From db-1-moved", "m-s-1"),
        }
    )


# -- this host: at once -------------------------------------------------------------------


async def test_a_source_published_here_is_served_before_publish_returns() -> None:
    store = InMemoryWorkspaceStore()
    host = Host(store, engine())
    await publish(store, host, sources(("s-1", "db-1")))
    assert await host.titles() == {"From db-1"}
    # The Retriever above was built before s-2 existed; it must still search it.
    await publish(store, host, sources(("s-1", "db-1"), ("s-2", "db-2")))
    assert await host.titles() == {"From db-1", "From db-2"}
    assert len(host.engine.opened) == 2


async def test_publishing_through_the_chain_opens_the_new_source_at_once() -> None:
    store = InMemoryWorkspaceStore()
    host = Host(store, Engine(datasets={"secret://s-1": dataset("From the chain", "m-1")}))
    vault, audit, clock = InMemorySecretVault(), InMemoryAuditSink(), FakeClock()
    admin = Administrator.of(
        "root@tenant-a",
        *(
            Grant(role, TENANT)
            for role in (
                Role.SECURITY_MANAGE,
                Role.ESRA_DATA_MANAGE,
                Role.GOVERNANCE_MANAGE,
                Role.ESRA_EXPOSURE_MANAGE,
            )
        ),
    )
    await ConnectionSecretService(store, vault, audit=audit, clock=clock).put_secret(
        admin, TENANT, "secret://s-1", "pw"
    )
    await DataModelService(store, audit=audit, clock=clock).model_source(
        admin, TENANT, make_source("s-1"), [make_mapping()]
    )
    await DataModelService(store, audit=audit, clock=clock).define_capability(
        admin, TENANT, make_capability(["s-1"])
    )
    await AccessPolicyService(store, audit=audit, clock=clock).author_policy(
        admin, TENANT, attrs.evolve(policy(), required_claims=frozenset())
    )
    exposures = ExposureService(store, host.follower, audit=audit, clock=clock)
    await exposures.bind_exposure(admin, TENANT, make_exposure(published=False))
    assert await host.repository.snapshot(TENANT) is None
    await exposures.publish(admin, TENANT, SLUG)
    assert await host.titles() == {"From the chain"}


async def test_a_retired_source_is_closed_exactly_once_and_no_longer_served() -> None:
    store = InMemoryWorkspaceStore()
    host = Host(store, engine())
    await publish(store, host, sources(("s-1", "db-1"), ("s-2", "db-2")))
    retired = host.provider("s-2")
    assert retired is not None
    assert await host.titles() == {"From db-1", "From db-2"}
    await publish(store, host, sources(("s-1", "db-1")))
    await host.follower.wait_closed()
    assert host.engine.closes_of(retired) == 1
    assert host.provider("s-2") is None
    assert await host.titles() == {"From db-1"}
    # Later syncs (this host's own publication comes back from the store) close nothing more.
    await host.follower.sync()
    await host.follower.sync()
    await host.follower.wait_closed()
    assert host.engine.closes_of(retired) == 1
    assert host.engine.closed == [retired]


async def test_a_source_whose_lifecycle_is_retired_has_its_pool_closed() -> None:
    store = InMemoryWorkspaceStore()
    host = Host(store, engine())
    snapshot = sources(("s-1", "db-1"), ("s-2", "db-2"))
    await publish(store, host, snapshot)
    provider = host.provider("s-2")
    retired = attrs.evolve(
        snapshot,
        sources=tuple(
            attrs.evolve(s, lifecycle=LifecycleState.RETIRED) if s.id == "s-2" else s
            for s in snapshot.sources
        ),
    )
    await publish(store, host, retired)
    await host.follower.wait_closed()
    assert host.provider("s-2") is None
    assert host.engine.closes_of(provider) == 1
    assert await host.titles() == {"From db-1"}


async def test_a_changed_connection_replaces_the_provider_and_closes_the_old_one() -> None:
    store = InMemoryWorkspaceStore()
    host = Host(store, engine())
    await publish(store, host, sources(("s-1", "db-1")))
    old = host.provider("s-1")
    assert await host.titles() == {"From db-1"}
    await publish(store, host, sources(("s-1", "db-1-moved")))
    await host.follower.wait_closed()
    new = host.provider("s-1")
    assert new is not None
    assert new is not old
    assert host.engine.closes_of(old) == 1
    assert host.engine.closes_of(new) == 0
    assert await host.titles() == {"From db-1-moved"}


async def test_a_change_the_provider_does_not_depend_on_reopens_nothing() -> None:
    store = InMemoryWorkspaceStore()
    host = Host(store, engine())
    snapshot = sources(("s-1", "db-1"))
    await publish(store, host, snapshot)
    provider = host.provider("s-1")
    renamed = attrs.evolve(
        snapshot, sources=(attrs.evolve(snapshot.sources[0], description="Renamed records."),)
    )
    await publish(store, host, renamed)
    await host.follower.sync()
    assert host.provider("s-1") is provider
    assert host.engine.closed == []
    assert len(host.engine.opened) == 1


async def test_a_changed_mapping_replaces_the_provider() -> None:
    store = InMemoryWorkspaceStore()
    host = Host(store, engine())
    snapshot = sources(("s-1", "db-1"))
    await publish(store, host, snapshot)
    provider = host.provider("s-1")
    remapped = attrs.evolve(
        snapshot,
        mappings=tuple(attrs.evolve(m, description="Re-described.") for m in snapshot.mappings),
    )
    await publish(store, host, remapped)
    await host.follower.wait_closed()
    assert host.provider("s-1") is not provider
    assert host.engine.closes_of(provider) == 1


async def test_a_failing_open_is_logged_and_retried_while_the_rest_is_applied(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = InMemoryWorkspaceStore()
    host = Host(store, engine())
    host.engine.refused.add("db-2")
    with caplog.at_level(logging.WARNING, logger="esra.core._live_config"):
        await publish(store, host, sources(("s-1", "db-1"), ("s-2", "db-2")))
    assert host.provider("s-2") is None
    assert await host.titles() == {"From db-1"}
    warnings = [r.getMessage() for r in caplog.records if r.name == "esra.core._live_config"]
    assert any("s-2" in text and "ProviderOptionError" in text for text in warnings)
    # Still refused: the next sync tries again and still leaves s-1 alone.
    await host.follower.sync()
    assert host.provider("s-2") is None
    # The engine accepts it now: the next sync opens it, with no new publication.
    host.engine.refused.clear()
    assert await host.follower.sync() == frozenset({TENANT})
    assert host.provider("s-2") is not None
    assert await host.titles() == {"From db-1", "From db-2"}
    assert len([p for p in host.engine.opened if p is host.provider("s-1")]) == 1


async def test_a_replacement_that_cannot_be_opened_stops_serving_the_old_connection() -> None:
    store = InMemoryWorkspaceStore()
    host = Host(store, engine())
    await publish(store, host, sources(("s-1", "db-1")))
    old = host.provider("s-1")
    host.engine.refused.add("db-1-moved")
    await publish(store, host, sources(("s-1", "db-1-moved")))
    await host.follower.wait_closed()
    assert host.provider("s-1") is None
    assert host.engine.closes_of(old) == 1
    # Its only source has no provider: nothing is in scope, the call fails closed.
    with pytest.raises(NoSourcesAvailableError):
        await host.titles()


# -- another host: on its next sync ----------------------------------------------------------


async def test_a_publication_on_one_host_is_served_by_another_after_its_next_sync() -> None:
    store = InMemoryWorkspaceStore()
    shared = engine()
    a, b = Host(store, shared), Host(store, shared)
    await publish(store, a, sources(("s-1", "db-1")))
    assert await b.follower.sync() == frozenset({TENANT})
    assert await b.titles() == {"From db-1"}
    await publish(store, a, sources(("s-1", "db-1"), ("s-2", "db-2")))
    # Until B syncs it serves what it had; its Retriever is the one built above.
    assert await b.titles() == {"From db-1"}
    assert await b.follower.sync() == frozenset({TENANT})
    assert await b.titles() == {"From db-1", "From db-2"}
    retired = b.provider("s-2")
    await publish(store, a, sources(("s-1", "db-1")))
    assert await b.follower.sync() == frozenset({TENANT})
    assert b.provider("s-2") is None
    assert shared.closes_of(retired) == 1
    # Nothing changed since: a sync reconciles nothing.
    assert await b.follower.sync() == frozenset()


class GatedStore(InMemoryWorkspaceStore):
    """Each read of the publications waits at a gate while ``armed``: the test looks at what
    the host serves while the read is in flight, then opens the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.gates: list[asyncio.Event] = []

    async def _gate(self) -> None:
        if self.armed:
            gate = asyncio.Event()
            self.gates.append(gate)
            await gate.wait()

    async def published_versions(self) -> dict[str, int]:
        await self._gate()
        return await super().published_versions()

    async def published_at(self, tenant_id: str, version: int) -> ConfigSnapshot | None:
        await self._gate()
        return await super().published_at(tenant_id, version)


async def test_another_hosts_publication_is_never_served_before_its_providers() -> None:
    """While B's sync awaits the store, B serves either the old snapshot with the old
    providers or the new one with the new: never a source listed without its provider (a
    call in that gap was ESRA_NO_SOURCES_AVAILABLE)."""
    store = GatedStore()
    shared = engine()
    a, b = Host(store, shared), Host(store, shared)
    await publish(store, a, sources(("s-1", "db-1")))
    await b.follower.sync()
    await publish(store, a, sources(("s-1", "db-1"), ("s-2", "db-2")))
    store.armed = True
    syncing = asyncio.create_task(b.follower.sync())
    checked = 0
    while not syncing.done():
        await asyncio.sleep(0)
        while store.gates:
            served = await b.repository.snapshot(TENANT)
            assert served is not None
            listed = {source.id for source in served.sources}
            assert listed <= set(b.follower.providers_for(TENANT)), listed
            checked += 1
            store.gates.pop(0).set()
    await syncing
    assert checked >= 1
    assert await b.titles() == {"From db-1", "From db-2"}


async def test_a_tenant_first_published_on_another_host_gets_its_providers() -> None:
    store = InMemoryWorkspaceStore()
    shared = engine()
    a, b = Host(store, shared), Host(store, shared)
    await b.follower.sync()
    await publish(store, a, sources(("s-1", "db-1"), tenant_id=OTHER))
    assert await b.follower.sync() == frozenset({OTHER})
    assert b.provider("s-1", OTHER) is not None
    assert b.provider("s-1", TENANT) is None
    assert await b.titles(OTHER) == {"From db-1"}


@attrs.define
class FlakyStore:
    """A workspace store whose ``published_versions`` fails ``failures`` times first."""

    inner: InMemoryWorkspaceStore
    failures: int
    calls: int = 0
    called: asyncio.Event = attrs.Factory(asyncio.Event)

    async def published_versions(self) -> dict[str, int]:
        self.calls += 1
        self.called.set()
        if self.calls <= self.failures:
            msg = "the database went away"
            raise ConnectionError(msg)
        return await self.inner.published_versions()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_the_follower_loop_logs_a_failed_sync_and_applies_on_a_later_tick(
    caplog: pytest.LogCaptureFixture,
) -> None:
    shared_store = InMemoryWorkspaceStore()
    shared = engine()
    a = Host(shared_store, shared)
    await publish(shared_store, a, sources(("s-1", "db-1")))
    flaky = FlakyStore(shared_store, failures=2)
    b = Host(flaky, shared)
    stop = asyncio.Event()
    with caplog.at_level(logging.WARNING, logger="esra.core._live_config"):
        loop = asyncio.create_task(b.follower.run(stop))
        async with asyncio.timeout(30):  # a safety net only: the loop ticks every 10 ms
            while b.provider("s-1") is None:
                flaky.called.clear()
                await flaky.called.wait()
                await asyncio.sleep(0)
        stop.set()
        await asyncio.wait_for(loop, timeout=30)
    assert loop.exception() is None
    assert flaky.calls >= 3
    failures = [r.getMessage() for r in caplog.records if "ConnectionError" in r.getMessage()]
    assert len(failures) == 2
    assert await b.titles() == {"From db-1"}


async def test_wake_makes_the_loop_sync_without_waiting_for_its_tick() -> None:
    store = InMemoryWorkspaceStore()
    shared = engine()
    a = Host(store, shared)
    b = Host(store, shared)
    b.follower = ConfigFollower(b.repository, b.providers, request_for=request_for, poll_s=3600)
    stop = asyncio.Event()
    loop = asyncio.create_task(b.follower.run(stop))
    await asyncio.sleep(0)
    await publish(store, a, sources(("s-1", "db-1")))
    b.follower.wake()
    async with asyncio.timeout(30):  # a safety net: without wake() the next tick is an hour
        while b.provider("s-1") is None:
            await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(loop, timeout=30)


async def test_a_sync_that_loaded_an_older_snapshot_does_not_undo_a_newer_publication() -> None:
    store = InMemoryWorkspaceStore()
    host = Host(store, engine())
    await publish(store, host, sources(("s-1", "db-1"), ("s-2", "db-2")))
    await host.follower.sync()
    older = await host.repository.snapshot(TENANT)
    assert older is not None
    newer = sources(("s-1", "db-1"))

    class Racing(DurableConfigRepository):
        async def load(
            self, tenant_id: str, versions: Mapping[str, int]
        ) -> tuple[int, ConfigSnapshot | None]:
            # The admin publishes here while the sync awaits the store.
            await publish(store, host, newer)
            return versions.get(tenant_id, 0), older

    racing = Racing(store)
    host.follower = ConfigFollower(racing, host.providers, request_for=request_for)
    await host.follower.sync()
    assert host.provider("s-2") is None


# -- the health cache follows provider replacements -------------------------------------------


async def test_health_is_not_reused_across_a_provider_replacement() -> None:
    down = InMemorySearchProvider({}, health=SourceHealth.UNAVAILABLE)
    providers: dict[str, SearchProvider] = {"s-1": down}
    monitor = SourceHealthMonitor(providers, clock=FakeClock(), ttl_s=60)
    assert await monitor.health_of(["s-1"]) == {"s-1": SourceHealth.UNAVAILABLE}
    providers["s-1"] = InMemorySearchProvider({})
    # Same instant, well within the TTL: the new provider is asked, not the old verdict used.
    assert await monitor.health_of(["s-1"]) == {"s-1": SourceHealth.HEALTHY}


async def test_a_removed_provider_is_unavailable_at_once_and_not_kept_by_the_cache() -> None:
    provider = InMemorySearchProvider({})
    providers: dict[str, SearchProvider] = {"s-1": provider, "s-2": InMemorySearchProvider({})}
    monitor = SourceHealthMonitor(providers, clock=FakeClock(), ttl_s=60)
    assert await monitor.health_of(["s-1"]) == {"s-1": SourceHealth.HEALTHY}
    gone = weakref.ref(provider)
    del providers["s-1"], provider
    assert await monitor.health_of(["s-1"]) == {"s-1": SourceHealth.UNAVAILABLE}
    await monitor.health_of(["s-2"])
    gc.collect()
    assert gone() is None
    # A provider opened for the source again is probed, not taken for the missing one.
    providers["s-1"] = InMemorySearchProvider({})
    assert await monitor.health_of(["s-1"]) == {"s-1": SourceHealth.HEALTHY}


async def test_a_probe_of_a_replaced_provider_does_not_answer_for_its_successor() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    class Slow(InMemorySearchProvider):
        async def health(self) -> SourceHealth:
            started.set()
            await release.wait()
            return SourceHealth.UNAVAILABLE

    providers: dict[str, SearchProvider] = {"s-1": Slow({})}
    monitor = SourceHealthMonitor(providers, clock=FakeClock(), ttl_s=60, timeout_s=30)
    first = asyncio.create_task(monitor.health_of(["s-1"]))
    await started.wait()
    providers["s-1"] = InMemorySearchProvider({})
    assert await monitor.health_of(["s-1"]) == {"s-1": SourceHealth.HEALTHY}
    release.set()
    assert await first == {"s-1": SourceHealth.UNAVAILABLE}
    # The old provider's late answer is not cached for the new one.
    assert await monitor.health_of(["s-1"]) == {"s-1": SourceHealth.HEALTHY}
