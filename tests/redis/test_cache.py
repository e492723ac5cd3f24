"""RedisCache against a live Redis: round trip, prefix, millisecond TTLs, nothing kept forever."""

from __future__ import annotations

import math

import pytest
from opentelemetry import trace
from redis.asyncio import Redis

from esra.core._pipeline.content_generation import (
    content_generation,
    renew_content_generation,
)
from esra.core._telemetry import TENANT_ID, stage_span
from esra.redis import RedisCache, open_redis
from tests._redis import free_port
from tests._telemetry import _EXPORTER, _READER, Recorded, _install
from tests.core.factories import make_context
from tests.redis.conftest import eventually

pytestmark = [pytest.mark.redis, pytest.mark.integration]


async def test_a_value_comes_back_under_the_prefixed_key(client: Redis, namespace: str) -> None:
    cache = RedisCache(client, prefix=namespace)
    await cache.set("esra:v1:abc:result:0f", b"\x00payload\xff", 30)

    assert await cache.get("esra:v1:abc:result:0f") == b"\x00payload\xff"
    # Exactly the prefix in front of the core's key: no hashing, no rewriting.
    assert await client.get(namespace + "esra:v1:abc:result:0f") == b"\x00payload\xff"


async def test_an_absent_key_is_a_miss(client: Redis, namespace: str) -> None:
    assert await RedisCache(client, prefix=namespace).get("never-set") is None


async def test_the_ttl_is_set_in_milliseconds_and_the_value_expires(
    client: Redis, namespace: str
) -> None:
    cache = RedisCache(client, prefix=namespace)
    await cache.set("long", b"v", 12.5)
    await cache.set("short", b"v", 0.05)

    long_ttl = await client.pttl(namespace + "long")
    assert 12_000 < long_ttl <= 12_500
    assert 0 < await client.pttl(namespace + "short") <= 50

    async def expired() -> bool:
        return await cache.get("short") is None

    await eventually(expired)


async def test_a_ttl_below_a_millisecond_rounds_up_not_to_forever(
    client: Redis, namespace: str
) -> None:
    cache = RedisCache(client, prefix=namespace)
    await cache.set("tiny", b"v", 0.0001)

    # Stored with PX 1 (or already gone): never without an expiry (PTTL -1).
    assert await client.pttl(namespace + "tiny") in {1, 0, -2}


@pytest.mark.parametrize("ttl_s", [0.0, -5.0, math.nan, math.inf])
async def test_a_ttl_that_is_not_positive_and_finite_stores_nothing(
    client: Redis, namespace: str, ttl_s: float
) -> None:
    cache = RedisCache(client, prefix=namespace)
    await cache.set("k", b"v", ttl_s)

    assert await client.exists(namespace + "k") == 0
    assert await cache.get("k") is None


async def test_a_later_set_replaces_the_value_and_its_ttl(client: Redis, namespace: str) -> None:
    cache = RedisCache(client, prefix=namespace)
    await cache.set("k", b"first", 60)
    await cache.set("k", b"second", 5)

    assert await cache.get("k") == b"second"
    assert await client.pttl(namespace + "k") <= 5000


async def test_a_client_that_decodes_replies_is_refused(redis_url: str) -> None:
    decoding = Redis.from_url(redis_url, decode_responses=True)
    try:
        with pytest.raises(ValueError, match="decode_responses"):
            RedisCache(decoding)
    finally:
        await decoding.aclose()


def test_a_timeout_must_be_positive(client: Redis) -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        RedisCache(client, timeout_s=0)


async def test_an_unavailable_cache_names_the_tenant_of_an_unsampled_invocation() -> None:
    """``esra.cache.unavailable`` names the invocation's tenant even when its spans do not
    record (``sample_ratio`` < 1): a closed port stands for a Redis that is down."""
    _install()  # the tests' SDK, its sampler off: metrics record, spans do not
    recorded = Recorded(_EXPORTER, _READER)

    def failures(tenant: str) -> int:
        return sum(
            int(point.value)
            for attributes, point in recorded.points("esra.cache.unavailable")
            if attributes.get(TENANT_ID) == tenant
        )

    before = {tenant: failures(tenant) for tenant in ("tenant-cache", "")}
    host = open_redis(f"redis://127.0.0.1:{free_port()}/0")
    try:
        cache = RedisCache(host)
        with stage_span("retrieve", make_context(tenant_id="tenant-cache")):
            assert not trace.get_current_span().is_recording()
            assert await cache.get("k") is None
            await cache.set("k", b"v", 30)
    finally:
        await host.aclose()
    assert failures("tenant-cache") == before["tenant-cache"] + 2
    assert failures("") == before[""]


async def test_a_renewed_content_generation_is_what_every_host_reads_next(
    client: Redis, other_client: Redis, namespace: str
) -> None:
    """Two hosts on one Redis: one renews the tenant's generation (a document deleted
    there), and the other's next read is the new one, so its cached responses miss too."""
    here, there = RedisCache(client, prefix=namespace), RedisCache(other_client, prefix=namespace)
    first = await content_generation(here, "acme")
    assert first is not None
    assert await content_generation(there, "acme") == first

    await renew_content_generation(there, "acme")

    assert await content_generation(here, "acme") not in (None, first)
