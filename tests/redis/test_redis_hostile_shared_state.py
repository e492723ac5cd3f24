"""A hostile review of the state hosts share through Redis, against a live server.

Whoever can reach the shared Redis (another application on it, a compromised neighbour, a
stale deployment) can publish on the breaker channel, write any key and leave any value. The
review found:

- each announced (tenant, source) pair, real or not, made every host create a breaker and a
  metric series for it: a flood of made-up ids grew every host's memory without bound. The
  pairs a host follows are now bounded;
- a quota counter left negative granted that much more than the budget, instead of failing
  closed as a counter ESRA never writes;
- a tenant id holding a lone surrogate made the quota store raise ``UnicodeEncodeError``
  (an unclassified crash) where the in-process store gives a verdict;
- a content-generation renewal whose write Redis dropped passed for done, so responses
  showing a deleted document were served again once Redis answered.

What it cannot stop is left to the Redis's access control: such a client can still open
breakers (for as long as it announces; each host still makes its own half-open trial) and
plant a well-formed cache entry, so the Redis must be reachable by the hosts alone
(docs/security.md, "Shared state fails the safe way").

It also checks what holds: a read cut off by its timeout never hands its late reply to the
next read on that connection (another tenant's value), key names cannot inject commands, and
a counter always expires.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import UTC, datetime

import pytest
from redis.asyncio import Redis

from esra.core._pipeline.breaker_sharing import BreakerSharing
from esra.core._pipeline.content_generation import content_generation, renew_content_generation
from esra.core._pipeline.resilience import BreakerState, CircuitBreaker
from esra.core._quota import InProcessQuotaStore
from esra.core.exceptions import QuotaUnavailableError
from esra.core.testing import FakeClock
from esra.redis import RedisBreakerBroadcast, RedisCache, RedisQuotaStore, open_redis
from tests._redis import RedisProcess
from tests.redis.test_breaker_broadcast import listening

pytestmark = [pytest.mark.redis, pytest.mark.integration]

T0 = datetime(2026, 3, 4, 12, 0, tzinfo=UTC)


def _broadcast(client: Redis, namespace: str, clock: FakeClock) -> RedisBreakerBroadcast:
    return RedisBreakerBroadcast(client, clock=clock, prefix=namespace, channel=namespace + "ch")


def _until_ms(clock: FakeClock, seconds: float) -> int:
    return int(clock.now().timestamp() * 1000 + seconds * 1000)


def _forged(tenant: str, source: str, until_ms: int) -> bytes:
    return json.dumps({"tenant": tenant, "source": source, "until_ms": until_ms}).encode()


# --- announcements cannot grow a host without bound --------------------------------------


async def test_a_flood_of_made_up_pairs_creates_a_bounded_number_of_breakers(
    client: Redis, other_client: Redis, namespace: str
) -> None:
    """Anyone who can reach the Redis can announce; what a host holds for it stays bounded."""
    clock = FakeClock(T0)
    reader = _broadcast(client, namespace, clock)
    sharing = BreakerSharing(reader, reset_s=30.0, max_followed_pairs=50)
    applied: list[tuple[str, str]] = []
    breakers: dict[tuple[str, str], CircuitBreaker] = {}

    def breaker_of(tenant_id: str, source_id: str) -> CircuitBreaker:
        applied.append((tenant_id, source_id))
        return breakers.setdefault(
            (tenant_id, source_id), CircuitBreaker(clock=clock, threshold=5, reset_s=30.0)
        )

    follower = asyncio.create_task(sharing.follow(breaker_of))
    try:
        await listening(other_client, namespace)
        until = _until_ms(clock, 30)
        async with other_client.pipeline(transaction=False) as pipe:
            for n in range(500):
                pipe.publish(namespace + "ch", _forged(f"t{n}", f"s{n}", until))
            # A pair already followed is still applied: once it is, the flood has been read.
            pipe.publish(namespace + "ch", _forged("t0", "s0", until + 1000))
            await pipe.execute()

        async def sentinel_applied() -> bool:
            await asyncio.sleep(0.02)
            return applied.count(("t0", "s0")) == 2

        async with asyncio.timeout(10):
            while not await sentinel_applied():
                pass
    finally:
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower

    assert len(breakers) == 50
    assert breakers[("t0", "s0")].state is BreakerState.OPEN


def test_the_bound_on_followed_pairs_must_be_positive(client: Redis) -> None:
    with pytest.raises(ValueError, match="max_followed_pairs"):
        BreakerSharing(RedisBreakerBroadcast(client), reset_s=30.0, max_followed_pairs=0)


# --- quota counters ----------------------------------------------------------------------


async def test_a_negative_counter_fails_closed_instead_of_granting_more(
    client: Redis, namespace: str
) -> None:
    """ESRA never writes a negative counter: one found there is not a budget to spend."""
    clock = FakeClock(T0)
    store = RedisQuotaStore(client, clock=clock, prefix=namespace)
    key = store.counter_key("acme", "alice", T0)
    await client.set(key, -1_000_000, px=60_000)

    with pytest.raises(QuotaUnavailableError):
        await store.consume("acme", "alice", 100, 100)
    assert int(await client.get(key) or b"0") == -1_000_000


@pytest.mark.parametrize("garbage", [b"lots", b"1.5", b""], ids=["text", "float", "empty"])
async def test_a_counter_that_is_no_integer_fails_closed(
    client: Redis, namespace: str, garbage: bytes
) -> None:
    clock = FakeClock(T0)
    store = RedisQuotaStore(client, clock=clock, prefix=namespace)
    await client.set(store.counter_key("acme", "alice", T0), garbage, px=60_000)

    with pytest.raises(QuotaUnavailableError):
        await store.consume("acme", "alice", 1, 100)


@pytest.mark.parametrize(
    "tenant",
    ["t\ud800", "t\r\n*1\r\n$8\r\nFLUSHALL\r\n", "t\x00"],
    ids=["surrogate", "resp", "nul"],
)
async def test_any_tenant_id_gets_the_in_process_verdict(
    client: Redis, namespace: str, tenant: str
) -> None:
    clock = FakeClock(T0)
    redis_store = RedisQuotaStore(client, clock=clock, prefix=namespace)
    local = InProcessQuotaStore(clock=clock)
    await client.set(namespace + "canary", b"alive")

    verdicts = [
        (
            await redis_store.consume(tenant, "alice", 60, 100),
            await local.consume(tenant, "alice", 60, 100),
        )
        for _ in range(2)
    ]

    assert verdicts == [(True, True), (False, False)]
    assert await client.get(namespace + "canary") == b"alive"  # no FLUSHALL ran
    keys = [key async for key in client.scan_iter(match=namespace + "*")]
    counters = [key for key in keys if not key.endswith(b"canary")]
    assert len(counters) == 1
    assert 0 < await client.pttl(counters[0]) <= (3600 + 300) * 1000


# --- what holds ---------------------------------------------------------------------------


async def test_a_read_cut_off_by_its_timeout_never_answers_the_next_read(
    redis_process: RedisProcess,
) -> None:
    """The late reply of a timed-out GET must not be read as the reply to the next GET on
    the same connection, which would serve one tenant's entry to another."""
    client = open_redis(redis_process.url, max_connections=1)
    admin = open_redis(redis_process.url)
    try:
        cache = RedisCache(client, prefix="p:", timeout_s=0.05)
        await cache.set("tenant-a", b"A's entry", 60)
        await cache.set("tenant-b", b"B's entry", 60)
        await admin.client_pause(300, all=True)

        assert await cache.get("tenant-a") is None  # cut off while Redis is paused

        async def b_answers() -> bool:
            return await cache.get("tenant-b") is not None

        async with asyncio.timeout(5):
            while not await b_answers():
                await asyncio.sleep(0.05)
        assert await cache.get("tenant-b") == b"B's entry"
        assert await cache.get("tenant-a") == b"A's entry"
    finally:
        await client.aclose()
        await admin.aclose()


# --- left open: outside this review's files ----------------------------------------------


async def test_a_generation_renewal_redis_drops_still_keeps_old_responses_from_being_served(
    redis_process: RedisProcess,
) -> None:
    """A document taken out of retrieval renews the tenant's generation so that no response
    cached before (which may show it) is served again. When Redis dropped that one write (a
    moment's stall), ``RedisCache.set`` failed open as the port asks, the renewal passed for
    done, and once Redis answered again every host read the old generation: the deleted
    document's responses were served until their TTL. The renewal is now read back and
    written again until the cache holds it."""
    client = open_redis(redis_process.url)
    admin = open_redis(redis_process.url)
    try:
        cache = RedisCache(client, prefix="p:", timeout_s=0.05)
        before = await content_generation(cache, "acme")
        await admin.client_pause(300, all=False)  # writes stall; reads answer
        assert await renew_content_generation(cache, "acme")
        await asyncio.sleep(0.4)

        assert await content_generation(cache, "acme") != before
    finally:
        await client.aclose()
        await admin.aclose()
