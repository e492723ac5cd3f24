"""The runtime snapshot of one (tenant, client application) and its per-version cache.

Spec 003: "the snapshot is keyed to the tenant and client application". A client
application's runtime snapshot holds nothing reserved to another, scope resolves and audits
every call on it exactly as on the tenant's whole snapshot, and the Retriever, the fetch path
and the tools each work on it.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import esra.core._config.client_snapshot as client_snapshot_module
import esra.core._fetch.service as fetch_service_module
import esra.core._retriever as retriever_module
from esra.core._audit.record import AuditRecord
from esra.core._config.client_snapshot import ClientSnapshotCache, client_snapshot
from esra.core._context import InvocationContext
from esra.core._fetch.service import DocumentFetcher
from esra.core._pipeline.scope import EffectiveScope, resolve_scope
from esra.core._retriever import Retriever
from esra.core.codes import AuditEvent, ErrorCode
from esra.core.config import (
    AccessPolicy,
    BindingMode,
    ConfigSnapshot,
    LifecycleState,
    Source,
    SourceBinding,
    SourcePolicy,
)
from esra.core.exceptions import EsraError, ExposureNotFoundError, NoSourcesAvailableError
from esra.core.fetch import Keyring
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemoryQuotaStore,
    InMemorySearchProvider,
)
from esra.core.testing._invocations import audited
from tests.core.factories import (
    TENANT,
    make_capability,
    make_context,
    make_exposure,
    make_mapping,
    make_source,
)

APP_A = "app-a"
APP_B = "app-b"
SHARED_SLUG = "shared_search"
# Every id below that names "only-b" is reserved to client application B.
B_ONLY = ("s-only-b", "m-s-only-b", "cap-only-b", "exp-only-b", "b_search")
A_ONLY = ("s-only-a", "m-s-only-a", "exp-only-a", "a_search")


def _source(source_id: str, *apps: str, **overrides: Any) -> Source:
    policy = SourcePolicy(allowed_client_apps=frozenset(apps) if apps else None)
    return make_source(source_id, policy=policy, **overrides)


def _tenant_snapshot(*, version: str = "v1") -> ConfigSnapshot:
    """Sources, capabilities and exposures shared by A and B, and some reserved to each."""
    sources = (
        _source("s-shared"),
        _source("s-only-a", APP_A),
        _source("s-only-b", APP_B),
        _source("s-draft", lifecycle=LifecycleState.DRAFT),
    )
    shared = make_capability(
        [
            SourceBinding("s-shared", BindingMode.MANDATORY),
            SourceBinding("s-only-a", BindingMode.MANDATORY),
            SourceBinding("s-only-b", BindingMode.MANDATORY),
            SourceBinding("s-draft", BindingMode.MANDATORY),
        ],
        capability_id="cap-shared",
    )
    only_b = make_capability(["s-only-b"], capability_id="cap-only-b")
    exposures = (
        make_exposure(
            exposure_id="exp-shared",
            slug=SHARED_SLUG,
            capability_id="cap-shared",
            audience=(APP_A, APP_B),
            source_subset=frozenset({"s-shared", "s-only-a", "s-only-b"}),
        ),
        make_exposure(
            exposure_id="exp-only-a", slug="a_search", capability_id="cap-shared", audience=[APP_A]
        ),
        make_exposure(
            exposure_id="exp-only-b", slug="b_search", capability_id="cap-only-b", audience=[APP_B]
        ),
        make_exposure(
            exposure_id="exp-draft",
            slug="draft_search",
            capability_id="cap-shared",
            audience=(APP_A, APP_B),
            published=False,
        ),
    )
    return ConfigSnapshot(
        tenant_id=TENANT,
        version=version,
        sources=sources,
        mappings=tuple(make_mapping(f"m-{s.id}", source_id=s.id) for s in sources),
        capabilities=(shared, only_b),
        exposures=exposures,
        access_policies=tuple(AccessPolicy.matching(e) for e in exposures if e.published),
    )


def _ctx(client_app_id: str, slug: str = SHARED_SLUG, **overrides: Any) -> InvocationContext:
    return make_context(client_app_id=client_app_id, slug=slug, **overrides)


def _assert_holds_none_of(snapshot: ConfigSnapshot, names: tuple[str, ...]) -> None:
    text = repr(snapshot)
    for name in names:
        assert name not in text


# --- what the runtime snapshot holds ---------------------------------------------------------


def test_client_a_runtime_snapshot_holds_nothing_reserved_to_client_b() -> None:
    """Exposures, access policies, sources, capability bindings and mappings of A's runtime
    snapshot are exactly what A may reach; nothing reserved to B is in it."""
    derived = client_snapshot(_tenant_snapshot(), APP_A)

    assert (derived.tenant_id, derived.version) == (TENANT, "v1")
    assert [e.id for e in derived.exposures] == ["exp-shared", "exp-only-a"]
    assert [p.slug for p in derived.access_policies] == [SHARED_SLUG, "a_search"]
    assert [s.id for s in derived.sources] == ["s-shared", "s-only-a"]
    assert [m.id for m in derived.mappings] == ["m-s-shared", "m-s-only-a"]
    [capability] = derived.capabilities
    assert capability.id == "cap-shared"
    assert [(b.source_id, b.mode) for b in capability.bindings] == [
        ("s-shared", BindingMode.MANDATORY),
        ("s-only-a", BindingMode.MANDATORY),
    ]
    shared = derived.exposure_by_slug(SHARED_SLUG)
    assert shared is not None
    assert shared.source_subset == frozenset({"s-shared", "s-only-a"})
    _assert_holds_none_of(derived, B_ONLY)
    # Neither an unpublished exposure nor a source out of lifecycle reaches any application.
    _assert_holds_none_of(derived, ("exp-draft", "s-draft"))


def test_client_b_runtime_snapshot_holds_nothing_reserved_to_client_a() -> None:
    """The same derivation from B's side: B's own objects are there, A's are not."""
    derived = client_snapshot(_tenant_snapshot(), APP_B)

    assert [e.id for e in derived.exposures] == ["exp-shared", "exp-only-b"]
    assert [s.id for s in derived.sources] == ["s-shared", "s-only-b"]
    assert {c.id: [b.source_id for b in c.bindings] for c in derived.capabilities} == {
        "cap-shared": ["s-shared", "s-only-b"],
        "cap-only-b": ["s-only-b"],
    }
    _assert_holds_none_of(derived, A_ONLY)


def test_an_application_admitted_nowhere_gets_an_empty_runtime_snapshot() -> None:
    """A client application no exposure is published to reaches no exposure and no
    capability; it keeps only sources open to every application of the tenant."""
    derived = client_snapshot(_tenant_snapshot(), "app-elsewhere")
    assert (derived.exposures, derived.capabilities, derived.access_policies) == ((), (), ())
    assert [s.id for s in derived.sources] == ["s-shared"]


def test_an_empty_source_subset_stays_empty_rather_than_admitting_every_binding() -> None:
    """A subset naming only B's source narrows to the empty set for A, never to None."""
    tenant = _tenant_snapshot()
    only_b_subset = attrs.evolve(tenant.exposures[0], source_subset=frozenset({"s-only-b"}))
    tenant = attrs.evolve(tenant, exposures=(only_b_subset, *tenant.exposures[1:]))
    shared = client_snapshot(tenant, APP_A).exposure_by_slug(SHARED_SLUG)
    assert shared is not None
    assert shared.source_subset == frozenset()


async def test_an_exposure_whose_capability_loses_every_binding_fails_as_it_does_today() -> None:
    """A's exposure over a capability binding only B's source stays in A's runtime snapshot,
    binding nothing, so scope raises NoSourcesAvailableError with the same funnel record it
    writes on the tenant's snapshot, not ESRA_EXPOSURE_NOT_FOUND."""
    tenant = _tenant_snapshot()
    reaching_b = make_exposure(
        exposure_id="exp-a-over-b", slug="a_over_b", capability_id="cap-only-b", audience=[APP_A]
    )
    tenant = attrs.evolve(
        tenant,
        exposures=(*tenant.exposures, reaching_b),
        access_policies=(*tenant.access_policies, AccessPolicy.matching(reaching_b)),
    )
    derived = client_snapshot(tenant, APP_A)
    assert derived.exposure_by_slug("a_over_b") is not None
    capability = derived.capability("cap-only-b")
    assert capability is not None
    assert capability.bindings == ()

    ctx = _ctx(APP_A, "a_over_b")
    records = []
    for snapshot in (tenant, derived):
        audit = InMemoryAuditSink()
        with pytest.raises(NoSourcesAvailableError):
            async with audited(ctx, audit=audit) as invocation:
                await resolve_scope(invocation, snapshot, health={})
        records.append(audit.records)
    assert records[0] == records[1]
    [record] = records[1]
    assert record.reason == ErrorCode.ESRA_NO_SOURCES_AVAILABLE
    assert record.dimensions["admitted_source_policy"] == 2


async def test_a_refused_exposure_is_refused_with_the_same_error_and_record() -> None:
    """B's exposure, absent from A's runtime snapshot, is refused for A exactly as scope
    refuses it on the tenant's snapshot: one ESRA_EXPOSURE_NOT_FOUND denial record."""
    tenant = _tenant_snapshot()
    ctx = _ctx(APP_A, "b_search")
    records = []
    for snapshot in (tenant, client_snapshot(tenant, APP_A)):
        audit = InMemoryAuditSink()
        with pytest.raises(ExposureNotFoundError):
            async with audited(ctx, audit=audit) as invocation:
                await resolve_scope(invocation, snapshot, health={})
        records.append(audit.records)
    assert records[0] == records[1]
    assert [(r.outcome, r.reason) for r in records[1]] == [
        ("denied", ErrorCode.ESRA_EXPOSURE_NOT_FOUND)
    ]


# --- scope decides and audits alike on both snapshots ----------------------------------------

_IDS = [f"s-{i}" for i in range(5)]
_POLICIES: list[frozenset[str] | None] = [
    None,
    frozenset({APP_A}),
    frozenset({APP_B}),
    frozenset({APP_A, APP_B}),
]


@settings(max_examples=80, deadline=None)
@given(
    active=st.sets(st.sampled_from(_IDS)),
    policies=st.lists(st.sampled_from(_POLICIES), min_size=len(_IDS), max_size=len(_IDS)),
    bound=st.lists(st.sampled_from(_IDS), unique=True),
    subset=st.none() | st.sets(st.sampled_from(_IDS)).map(frozenset),
    audience=st.sets(st.sampled_from([APP_A, APP_B])),
    published=st.booleans(),
    caller=st.sampled_from([APP_A, APP_B]),
    authorized=st.none() | st.sets(st.sampled_from(_IDS)).map(frozenset),
)
async def test_scope_resolves_and_audits_the_runtime_snapshot_as_the_tenants(
    *,
    active: set[str],
    policies: list[frozenset[str] | None],
    bound: list[str],
    subset: frozenset[str] | None,
    audience: set[str],
    published: bool,
    caller: str,
    authorized: frozenset[str] | None,
) -> None:
    """For any configuration and caller, resolve_scope over the caller's runtime snapshot
    returns the same sources, or raises the same error, after the same audit records
    (every funnel count included) as over the tenant's whole snapshot."""
    sources = [
        _source(
            source_id,
            lifecycle=LifecycleState.ACTIVE if source_id in active else LifecycleState.RETIRED,
        )
        for source_id in _IDS
    ]
    sources = [
        attrs.evolve(s, policy=SourcePolicy(allowed_client_apps=p))
        for s, p in zip(sources, policies, strict=True)
    ]
    exposure = make_exposure(audience=audience, published=published, source_subset=subset)
    tenant = ConfigSnapshot(
        tenant_id=TENANT,
        version="v3",
        sources=tuple(sources),
        mappings=tuple(make_mapping(f"m-{s.id}", source_id=s.id) for s in sources),
        capabilities=(make_capability(bound),),
        exposures=(exposure,),
        access_policies=(AccessPolicy.matching(exposure),),
    )
    ctx = _ctx(caller, exposure.slug, authorized_source_ids=authorized)

    outcomes = []
    for snapshot in (tenant, client_snapshot(tenant, caller)):
        audit = InMemoryAuditSink()
        try:
            async with audited(ctx, audit=audit) as invocation:
                scope: EffectiveScope | EsraError = await resolve_scope(
                    invocation, snapshot, health={}
                )
        except EsraError as exc:
            scope = exc
        outcomes.append((_summary(scope), audit.records))
    assert outcomes[0] == outcomes[1]


def _summary(scope: EffectiveScope | EsraError) -> object:
    if isinstance(scope, EsraError):
        return type(scope)
    return (
        scope.exposure.id,
        scope.capability.id,
        [(s.source, s.mode, s.mappings, s.health) for s in scope.sources],
        scope.limits,
        scope.response_modes,
        scope.config_version,
        scope.warnings,
    )


# --- the cache --------------------------------------------------------------------------------


def test_the_cache_derives_once_per_client_application_and_version() -> None:
    """A second request for the same (tenant, client application, version) is served the
    very snapshot derived first; another application or version is derived on its own."""
    cache = ClientSnapshotCache()
    v1 = _tenant_snapshot()
    first = cache.of(v1, APP_A)
    assert cache.of(v1, APP_A) is first
    for_b = cache.of(v1, APP_B)
    assert for_b is not first
    assert [e.id for e in for_b.exposures] == ["exp-shared", "exp-only-b"]

    v2 = _tenant_snapshot(version="v2")
    again = cache.of(v2, APP_A)
    assert again is not first
    assert again.version == "v2"
    assert cache.of(v2, APP_A) is again


def test_a_replaced_snapshot_under_the_same_version_is_derived_again() -> None:
    """The cache serves an entry only for the tenant snapshot it was derived from, so a
    snapshot replaced without a new version string is never answered from the old one."""
    cache = ClientSnapshotCache()
    before = _tenant_snapshot()
    assert [s.id for s in cache.of(before, APP_A).sources] == ["s-shared", "s-only-a"]
    opened = _source("s-only-b", APP_A, APP_B)
    after = attrs.evolve(before, sources=(*before.sources[:2], opened, before.sources[3]))
    assert after.version == before.version
    assert [s.id for s in cache.of(after, APP_A).sources] == ["s-shared", "s-only-a", "s-only-b"]


def test_the_cache_is_bounded_and_evicts_the_least_recently_used() -> None:
    """Past ``max_entries`` the entry used longest ago goes; the others are still served."""
    cache = ClientSnapshotCache(max_entries=2)
    tenant = _tenant_snapshot()
    for_a = cache.of(tenant, APP_A)
    for_b = cache.of(tenant, APP_B)
    assert cache.of(tenant, APP_A) is for_a  # A is now the most recently used
    cache.of(tenant, "app-c")
    assert len(cache) == 2
    assert cache.of(tenant, APP_A) is for_a
    assert cache.of(tenant, APP_B) is not for_b


def test_the_default_bound_holds() -> None:
    """Many client applications never grow the cache past its default bound."""
    cache = ClientSnapshotCache()
    tenant = _tenant_snapshot()
    for i in range(client_snapshot_module.DEFAULT_MAX_CLIENT_SNAPSHOTS + 10):
        cache.of(tenant, f"app-{i}")
    assert len(cache) == client_snapshot_module.DEFAULT_MAX_CLIENT_SNAPSHOTS


def test_a_cache_without_room_is_refused() -> None:
    with pytest.raises(ValueError, match="max_entries"):
        ClientSnapshotCache(max_entries=0)


# --- the Retriever and the fetch path work on the runtime snapshot --------------------------


def _rows() -> dict[str, list[dict[str, Any]]]:
    return {
        f"m-{source_id}": [
            {"col_id": 1, "col_title": f"Leave policy in {source_id}", "col_body": "annual leave"}
        ]
        for source_id in ("s-shared", "s-only-a", "s-only-b")
    }


class _Runtime:
    """The tenant's Retriever and DocumentFetcher over one provider per source."""

    def __init__(self, snapshot: ConfigSnapshot | None = None) -> None:
        self.config = InMemoryConfigRepository([snapshot or _tenant_snapshot()])
        self.providers = {
            source_id: InMemorySearchProvider(_rows())
            for source_id in ("s-shared", "s-only-a", "s-only-b", "s-draft")
        }
        self.audit = InMemoryAuditSink()
        self.model = FakeLanguageModel()
        keyring = Keyring.generate("k1")
        clock = FakeClock()
        self.retriever = Retriever(
            config=self.config,
            providers=self.providers,
            model=self.model,
            audit=self.audit,
            clock=clock,
            keyring=keyring,
            tenant_id=TENANT,
        )
        self.fetcher = DocumentFetcher(
            config=self.config,
            providers=self.providers,
            audit=self.audit,
            keyring=keyring,
            quota=InMemoryQuotaStore(clock),
            clock=clock,
            executor=self.retriever.executor,
            tenant_id=TENANT,
        )


@pytest.fixture
def scoped_snapshots(monkeypatch: pytest.MonkeyPatch) -> list[ConfigSnapshot]:
    """Every snapshot the Retriever and the fetch path hand to scope resolution."""
    seen: list[ConfigSnapshot] = []

    def spying(real: Any) -> Any:
        async def resolve(ctx: InvocationContext, snapshot: ConfigSnapshot, **kw: Any) -> Any:
            seen.append(snapshot)
            return await real(ctx, snapshot, **kw)

        return resolve

    # Both modules import the same function from esra.core._pipeline.scope.
    monkeypatch.setattr(retriever_module, "resolve_scope", spying(resolve_scope))
    monkeypatch.setattr(fetch_service_module, "resolve_scope", spying(resolve_scope))
    return seen


async def test_a_source_admitted_only_to_b_is_never_planned_or_executed_for_a(
    scoped_snapshots: list[ConfigSnapshot],
) -> None:
    """A's call resolves on A's runtime snapshot: B's source is not in it, no prompt names
    it, its provider runs no query and no audit record mentions it; B's own call does."""
    runtime = _Runtime()

    response = await runtime.retriever.retrieve(_ctx(APP_A), "annual leave")

    assert {r.title for r in response.results} == {
        "Leave policy in s-shared",
        "Leave policy in s-only-a",
    }
    [snapshot] = scoped_snapshots
    assert [s.id for s in snapshot.sources] == ["s-shared", "s-only-a"]
    _assert_holds_none_of(snapshot, B_ONLY)
    assert runtime.providers["s-only-b"].executed == []
    assert runtime.model.prompts
    for prompt in runtime.model.prompts:
        assert "s-only-b" not in repr(prompt)
    assert "s-only-b" not in repr(runtime.audit.records)

    # The same world does search B's source for B: the absence above is A's scope, not setup.
    response = await runtime.retriever.retrieve(_ctx(APP_B), "annual leave")
    assert "Leave policy in s-only-b" in {r.title for r in response.results}
    assert runtime.providers["s-only-b"].executed


async def test_the_retriever_derives_once_per_version_and_again_after_a_publication(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Calls at one configuration version share one derivation; a new version derives anew."""
    derivations: list[tuple[str, str]] = []
    real = client_snapshot_module.client_snapshot

    def counting(snapshot: ConfigSnapshot, client_app_id: str) -> ConfigSnapshot:
        derivations.append((snapshot.version, client_app_id))
        return real(snapshot, client_app_id)

    monkeypatch.setattr(client_snapshot_module, "client_snapshot", counting)
    runtime = _Runtime()
    await runtime.retriever.retrieve(_ctx(APP_A), "annual leave")
    await runtime.retriever.retrieve(_ctx(APP_A, correlation_id="corr-2"), "annual leave")
    assert derivations == [("v1", APP_A)]

    runtime.config.put(_tenant_snapshot(version="v2"))
    await runtime.retriever.retrieve(_ctx(APP_A, correlation_id="corr-3"), "annual leave")
    assert derivations == [("v1", APP_A), ("v2", APP_A)]


async def test_a_fetch_resolves_on_the_callers_runtime_snapshot(
    scoped_snapshots: list[ConfigSnapshot],
) -> None:
    """The fetch path re-checks scope on A's runtime snapshot too: B's objects are not in
    what it resolves on, whatever the reference names."""
    tenant = _tenant_snapshot()
    fetchable = attrs.evolve(tenant.exposures[0], fetch_enabled=True)
    runtime = _Runtime(attrs.evolve(tenant, exposures=(fetchable, *tenant.exposures[1:])))
    response = await runtime.retriever.retrieve(_ctx(APP_A), "annual leave")
    ref = next(r.document_ref for r in response.results if r.source == "Source s-only-a")
    assert ref is not None
    scoped_snapshots.clear()

    document = await runtime.fetcher.fetch(_ctx(APP_A), ref)

    assert document.title == "Leave policy in s-only-a"
    [snapshot] = scoped_snapshots
    _assert_holds_none_of(snapshot, B_ONLY)
    [record] = runtime.audit.events(AuditEvent.FETCH)
    assert isinstance(record, AuditRecord)
    assert record.dimensions["source_id"] == "s-only-a"
