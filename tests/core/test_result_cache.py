"""Result caching: isolated per tenant, client app, capability, authorization and config version.

Both tenants share one cache, one model and identical configuration (same ids, slug, client
app, subject and claims); each tenant's rows carry its own marker word, so a response served
from the wrong entry is visible.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import pytest

from esra.core._context import ClaimValue, InvocationContext
from esra.core._fetch.tokens import open as open_ref
from esra.core._pipeline.cache_keys import authorization_fingerprint
from esra.core._pipeline.content_generation import (
    GENERATION_TTL_S,
    renew_content_generation,
)
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import ResultRow
from esra.core._response import ResponseStatus, RetrievalResponse
from esra.core._retriever import Retriever
from esra.core.codes import AuditEvent, ProviderErrorCode
from esra.core.config import (
    BindingMode,
    CapabilityLimits,
    ConfigSnapshot,
    Operator,
    RecordFilter,
    RetentionClass,
    SourceBinding,
)
from esra.core.exceptions import DocumentNotFoundError
from esra.core.fetch import Keyring, TokenBinding
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryCache,
    InMemoryConfigRepository,
    InMemorySearchProvider,
)
from tests.core.factories import (
    EXPOSURE_ID,
    make_capability,
    make_context,
    make_exposure,
    make_field,
    make_mapping,
    make_snapshot,
    make_source,
)

A, B = "tenant-a", "tenant-b"
MARKER = {A: "AARDVARK", B: "BUMBLEBEE"}
REQUEST = "leave policy"
TTL_S = 60.0
NORTH: dict[str, ClaimValue] = {"region": "north"}


def _mapping(tenant: str) -> Any:
    region = make_field("region", searchable=False, restricted=True, operators=[Operator.EQ])
    return make_mapping(
        "m-s-1",
        source_id="s-1",
        tenant_id=tenant,
        fields=(make_field("title"), make_field("body"), region),
        record_filters=(RecordFilter(field="region", claim="region"),),
    )


def _snapshot(
    tenant: str, *, version: str = "v1", ttl_s: float = TTL_S, **exposure: Any
) -> ConfigSnapshot:
    capability = make_capability(
        [SourceBinding("s-1", BindingMode.MANDATORY)],
        tenant_id=tenant,
        limits=CapabilityLimits(result_cache_ttl_s=ttl_s),
    )
    return make_snapshot(
        [make_source("s-1", tenant_id=tenant)],
        tenant_id=tenant,
        version=version,
        capability=capability,
        mappings=[_mapping(tenant)],
        exposure=make_exposure(tenant_id=tenant, fetch_enabled=True, **exposure),
    )


def _rows(tenant: str) -> dict[str, list[dict[str, Any]]]:
    marker = MARKER[tenant]
    return {
        "m-s-1": [
            {"col_id": 1, "col_title": f"{marker} leave policy north", "col_body": "leave",
             "col_region": "north"},
            {"col_id": 2, "col_title": f"{marker} leave policy south", "col_body": "leave",
             "col_region": "south"},
        ]
    }  # fmt: skip


class _CountingProvider(InMemorySearchProvider):
    def __init__(self, tenant: str) -> None:
        super().__init__(_rows(tenant))
        self.calls = 0

    async def execute(self, query: ValidatedQuery, *, timeout_s: float) -> Sequence[ResultRow]:
        self.calls += 1
        return await super().execute(query, timeout_s=timeout_s)


@attrs.define
class _World:
    clock: FakeClock
    config: InMemoryConfigRepository
    cache: InMemoryCache
    audit: InMemoryAuditSink
    keyring: Keyring
    providers: dict[str, _CountingProvider]
    retrievers: dict[str, Retriever]

    async def ask(self, tenant: str, **context: Any) -> RetrievalResponse:
        return await self.retrievers[tenant].retrieve(_ctx(tenant, **context), REQUEST)


def _world(cache_type: type[InMemoryCache] = InMemoryCache, **snapshot: Any) -> _World:
    clock = FakeClock()
    config = InMemoryConfigRepository([_snapshot(A, **snapshot), _snapshot(B, **snapshot)])
    cache = cache_type(clock)
    audit = InMemoryAuditSink()
    keyring = Keyring.generate("k1")
    providers = {t: _CountingProvider(t) for t in (A, B)}
    retrievers = {
        t: Retriever(
            config=config,
            providers={"s-1": providers[t]},
            model=FakeLanguageModel(),
            audit=audit,
            clock=clock,
            cache=cache,
            keyring=keyring,
            tenant_id=t,
        )
        for t in (A, B)
    }
    return _World(clock, config, cache, audit, keyring, providers, retrievers)


def _ctx(
    tenant: str,
    *,
    subject: str = "user-1",
    claims: dict[str, ClaimValue] | None = None,
    correlation_id: str = "corr",
    **overrides: Any,
) -> InvocationContext:
    return make_context(
        tenant_id=tenant,
        subject=subject,
        claims=NORTH if claims is None else claims,
        correlation_id=correlation_id,
        **overrides,
    )


def _titles(response: RetrievalResponse) -> list[str]:
    return [r.title for r in response.results]


def _result_keys(cache: InMemoryCache) -> list[str]:
    """The cached responses' keys (the cache also holds each tenant's content generation)."""
    held = cache.keys()
    return [key for key in held if ":result:" in key]


async def test_a_repeated_question_with_the_same_authorization_is_served_from_the_cache() -> None:
    world = _world()
    first = await world.ask(A, correlation_id="first")
    second = await world.ask(A, correlation_id="second")

    assert world.providers[A].calls == 1
    assert _titles(second) == _titles(first) == ["AARDVARK leave policy north"]
    assert second.correlation_id == "second"
    hits = [r for r in world.audit.events(AuditEvent.RETRIEVE) if r.dimensions.get("cache")]
    assert [(r.correlation_id, r.dimensions["cache"]) for r in hits] == [("second", "hit")]


async def test_a_warm_cache_for_tenant_a_never_serves_tenant_b() -> None:
    world = _world()
    await world.ask(A)

    b = await world.ask(B)

    assert world.providers[B].calls == 1
    assert _titles(b) == ["BUMBLEBEE leave policy north"]
    assert len(_result_keys(world.cache)) == 2


async def test_a_caller_whose_claims_changed_never_gets_the_old_entry() -> None:
    world = _world()
    assert _titles(await world.ask(A)) == ["AARDVARK leave policy north"]

    moved = await world.ask(A, claims={"region": "south"})
    lost = await world.ask(A, claims={})

    assert _titles(moved) == ["AARDVARK leave policy south"]
    # Without the claim the source is dropped: a degraded answer, never the cached north one.
    assert lost.results == ()
    assert lost.status is ResponseStatus.DEGRADED
    assert world.providers[A].calls == 2


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"client_app_id": "app-2"}, id="client-app"),
        pytest.param({"authorized_source_ids": ["s-1"]}, id="runtime-authorization"),
        pytest.param({"claims": {"region": "north", "team": "hr"}}, id="an-extra-claim"),
    ],
)
async def test_any_change_in_effective_authorization_misses(change: dict[str, Any]) -> None:
    world = _world(audience=("app-1", "app-2"))
    await world.ask(A)
    await world.ask(A, **change)
    assert world.providers[A].calls == 2


async def test_a_new_configuration_version_misses() -> None:
    world = _world()
    await world.ask(A)
    world.config.put(_snapshot(A, version="v2"))
    await world.ask(A)
    assert world.providers[A].calls == 2


async def test_a_hit_carries_references_minted_for_the_caller_it_serves() -> None:
    world = _world()
    await world.ask(A, subject="alice")
    served_to_bob = await world.ask(A, subject="bob")

    assert world.providers[A].calls == 1
    [ref] = [r.document_ref for r in served_to_bob.results]
    assert ref is not None
    bob = TokenBinding.for_caller(_ctx(A, subject="bob"), EXPOSURE_ID)
    assert open_ref(ref, binding=bob, keyring=world.keyring, clock=world.clock).record_key == "1"
    with pytest.raises(DocumentNotFoundError):
        open_ref(
            ref, binding=TokenBinding.for_caller(_ctx(A, subject="alice"), EXPOSURE_ID),
            keyring=world.keyring, clock=world.clock,
        )  # fmt: skip


async def test_the_cache_holds_no_prompt_no_claim_value_and_no_reference() -> None:
    world = _world()
    first = await world.ask(A, claims={"region": "north", "badge": "QX-7781"})
    [ref] = [r.document_ref for r in first.results]

    keys = world.cache.keys()
    stored = b"".join([await world.cache.get(k) or b"" for k in keys]).decode()
    assert "leave policy" not in " ".join(keys)
    assert "QX-7781" not in stored + " ".join(keys)
    assert ref is not None
    assert ref not in stored


async def test_a_retention_class_forbidding_prompt_derivatives_caches_nothing() -> None:
    world = _world(retention=RetentionClass.NO_PROMPT_DERIVATIVES)
    await world.ask(A)
    await world.ask(A)
    assert world.cache.keys() == []
    assert world.providers[A].calls == 2


async def test_caching_is_off_unless_the_capability_turns_it_on() -> None:
    world = _world(ttl_s=0.0)
    await world.ask(A)
    await world.ask(A)
    assert world.providers[A].calls == 2


async def test_a_degraded_response_is_not_cached() -> None:
    world = _world()
    world.providers[A].fail_with = ProviderErrorCode.TIMEOUT
    world.providers[A].fail_times = 3
    assert (await world.ask(A)).status is ResponseStatus.DEGRADED
    assert _titles(await world.ask(A)) == ["AARDVARK leave policy north"]


async def test_an_entry_expires_with_its_ttl() -> None:
    world = _world()
    await world.ask(A)
    world.clock.advance(TTL_S + 1)
    await world.ask(A)
    assert world.providers[A].calls == 2


async def test_an_unreadable_entry_is_a_miss_not_a_failure() -> None:
    world = _world()
    await world.ask(A)
    for key in _result_keys(world.cache):
        await world.cache.set(key, b'{"format": 1, "response": "garbage"}', TTL_S)
    assert _titles(await world.ask(A)) == ["AARDVARK leave policy north"]
    assert world.providers[A].calls == 2


def test_claim_types_and_tuple_order_are_fingerprinted_faithfully() -> None:
    def fingerprint(claims: dict[str, ClaimValue]) -> str:
        return authorization_fingerprint(
            client_app_id="app", claims=claims, authorized_source_ids=None,
            effective_source_ids=["s-1"],
        )  # fmt: skip

    assert fingerprint({"level": "1"}) != fingerprint({"level": 1})
    assert fingerprint({"admin": True}) != fingerprint({"admin": "True"})
    assert fingerprint({"groups": ("a", "b")}) == fingerprint({"groups": ("b", "a")})
    assert fingerprint({"groups": ("a",)}) != fingerprint({"groups": "a"})
    # An integer past what ``str`` writes (4,300 digits) is fingerprinted, not raised on: an
    # embedder's claim like this failed the whole invocation before validation dropped the
    # source it cannot bind for.
    huge = 10**5000
    assert fingerprint({"level": huge}) != fingerprint({"level": huge + 1})
    assert fingerprint({"level": 255}) != fingerprint({"level": "ff"})


async def test_a_renewed_content_generation_misses_the_tenants_entries_only() -> None:
    """What a store deletion does (``DocumentStoreService``): A's cached responses are not
    served again; B's still are."""
    world = _world()
    await world.ask(A)
    await world.ask(B)

    await renew_content_generation(world.cache, A)
    await world.ask(A, correlation_id="after")
    await world.ask(B, correlation_id="after")

    assert (world.providers[A].calls, world.providers[B].calls) == (2, 1)


async def test_a_lost_content_generation_is_made_afresh_never_assumed() -> None:
    """An evicted or expired generation gives a new one: the old entries miss, once."""
    world = _world()
    await world.ask(A)
    world.clock.advance(GENERATION_TTL_S + 1)  # the entry outlives nothing; the token lapses
    await world.ask(A, correlation_id="later")
    await world.ask(A, correlation_id="again")
    assert world.providers[A].calls == 2


async def test_a_cache_that_cannot_give_the_generation_leaves_the_invocation_uncached() -> None:
    class Unreadable(InMemoryCache):
        async def get(self, key: str) -> bytes | None:
            if key.endswith(":generation"):
                raise ConnectionError("cache down")
            return await super().get(key)

    world = _world(Unreadable)
    first, second = await world.ask(A), await world.ask(A, correlation_id="second")
    assert _titles(first) == _titles(second) == ["AARDVARK leave policy north"]
    assert world.providers[A].calls == 2
    assert _result_keys(world.cache) == []
