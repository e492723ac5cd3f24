"""The failure rules with Redis down: governance fails closed, performance fails open, nothing
hangs, and everything recovers when Redis is back without being rebuilt.

A private ``redis-server`` is killed and started again on the same port; a closed port and a
server that accepts connections but never answers stand for the other ways Redis is missing.
Every wait is bounded by ``asyncio.timeout`` generously: the bound is what "nothing hangs"
means here, not a measured latency.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from redis.asyncio import Redis

from esra.core.exceptions import QuotaUnavailableError
from esra.core.ports import BreakerOpening
from esra.core.testing import FakeClock
from esra.redis import RedisBreakerBroadcast, RedisCache, RedisQuotaStore, open_redis, ping
from tests._redis import RedisProcess, free_port
from tests._telemetry import Recorded, recording
from tests.redis.conftest import eventually

pytestmark = [pytest.mark.redis, pytest.mark.integration]

NOON = datetime(2026, 3, 4, 12, 0, tzinfo=UTC)
CHANNEL = "esra:breaker"


def total(recorded: Recorded, metric: str, **attributes: str) -> int:
    """The counter's sum over the points whose attributes include ``attributes``."""
    return sum(
        int(point.value)
        for attrs, point in recorded.points(metric)
        if all(attrs.get(k) == v for k, v in attributes.items())
    )


def quick_broadcast(client: Redis, clock: FakeClock) -> RedisBreakerBroadcast:
    return RedisBreakerBroadcast(
        client, clock=clock, keepalive_s=1.0, reconnect_initial_s=0.05, reconnect_max_s=0.2
    )


@contextlib.asynccontextmanager
async def clients(url: str, count: int) -> AsyncIterator[list[Redis]]:
    opened = [open_redis(url) for _ in range(count)]
    try:
        yield opened
    finally:
        for client in opened:
            await client.aclose()


async def subscribed(client: Redis) -> bool:
    return dict(await client.pubsub_numsub(CHANNEL)).get(CHANNEL.encode(), 0) >= 1


@pytest.fixture
def metrics() -> Iterator[Recorded]:
    with recording() as recorded:
        yield recorded


async def _next_other_than(
    openings: AsyncIterator[BreakerOpening], source_id: str
) -> BreakerOpening:
    """The next opening of a source other than ``source_id``."""
    while (opening := await anext(openings)).source_id == source_id:
        pass
    return opening


async def test_redis_down_then_back(redis_process: RedisProcess, metrics: Recorded) -> None:
    clock = FakeClock(NOON)
    async with clients(redis_process.url, 2) as (host, other_host):
        cache = RedisCache(host)
        quota = RedisQuotaStore(host, clock=clock)
        writer = quick_broadcast(host, clock)
        reader = quick_broadcast(other_host, clock)
        async with contextlib.aclosing(reader.openings()) as openings:
            # Up: everything works.
            first = asyncio.ensure_future(anext(openings))
            await eventually(lambda: subscribed(host))
            await writer.opened("acme", "before", 30.0)
            async with asyncio.timeout(5):
                assert (await first).source_id == "before"
            await cache.set("k", b"v", 30)
            assert await cache.get("k") == b"v"
            assert await quota.consume("acme", "alice", 10, 100)

            # The reader keeps reading through the outage. An opening may be read twice (the
            # reader subscribes, then reads the openings in force), so a repeat of "before" is
            # no news: the next opening other than it must be the one published after the
            # outage, never the one lost during it.
            across: asyncio.Future[BreakerOpening] = asyncio.ensure_future(
                _next_other_than(openings, "before")
            )
            cache_failures = total(metrics, "esra.cache.unavailable")
            broadcast_failures = total(
                metrics, "esra.breaker.broadcast.failures", **{"esra.breaker.operation": "opened"}
            )
            redis_process.kill()

            # Down: the cache misses, the quota refuses, the broadcast is lost — promptly.
            async with asyncio.timeout(5):
                assert await cache.get("k") is None
                await cache.set("k", b"v2", 30)
                with pytest.raises(QuotaUnavailableError):
                    await quota.consume("acme", "alice", 10, 100)
                await writer.opened("acme", "during", 30.0)
                assert not await ping(host, 0.5)
            assert total(metrics, "esra.cache.unavailable", **{"esra.cache.operation": "get"}) >= 1
            assert total(metrics, "esra.cache.unavailable", **{"esra.cache.operation": "set"}) >= 1
            assert total(metrics, "esra.cache.unavailable") >= cache_failures + 2
            assert (
                total(
                    metrics,
                    "esra.breaker.broadcast.failures",
                    **{"esra.breaker.operation": "opened"},
                )
                == broadcast_failures + 1
            )
            await asyncio.sleep(0.3)  # a few reconnection attempts
            assert not across.done()

            # Back (empty: it kept nothing): the same objects work again.
            redis_process.start()

            async def cache_works() -> bool:
                await cache.set("k", b"v3", 30)
                return await cache.get("k") == b"v3"

            await eventually(cache_works)
            assert await quota.consume("acme", "alice", 10, 100)
            assert await ping(host, 0.5)
            await eventually(lambda: subscribed(host))
            await writer.opened("acme", "after", 30.0)
            async with asyncio.timeout(5):
                assert (await across).source_id == "after"


async def test_a_silent_subscription_is_taken_for_lost(
    redis_process: RedisProcess, metrics: Recorded
) -> None:
    clock = FakeClock(NOON)
    async with clients(redis_process.url, 2) as (host, other_host):
        reader = quick_broadcast(other_host, clock)
        async with contextlib.aclosing(reader.openings()) as openings:
            pending: asyncio.Future[BreakerOpening] = asyncio.ensure_future(anext(openings))
            await eventually(lambda: subscribed(host))
            lost = total(
                metrics,
                "esra.breaker.broadcast.failures",
                **{"esra.breaker.operation": "openings"},
            )
            # A server that stops answering keeps its connections open: only the keepalive
            # PING going unanswered tells the reader.
            redis_process.pause()

            async def noticed() -> bool:
                return (
                    total(
                        metrics,
                        "esra.breaker.broadcast.failures",
                        **{"esra.breaker.operation": "openings"},
                    )
                    > lost
                )

            try:
                await eventually(noticed, within_s=10)
            finally:
                redis_process.resume()
            await eventually(lambda: subscribed(host))
            await quick_broadcast(host, clock).opened("acme", "after", 30.0)
            async with asyncio.timeout(5):
                assert (await pending).source_id == "after"


async def test_redis_never_reachable(metrics: Recorded) -> None:
    clock = FakeClock(NOON)
    async with clients(f"redis://127.0.0.1:{free_port()}/0", 1) as (host,):
        cache = RedisCache(host)
        quota = RedisQuotaStore(host, clock=clock)
        broadcast = quick_broadcast(host, clock)
        async with asyncio.timeout(5):
            assert await cache.get("k") is None
            await cache.set("k", b"v", 30)
            with pytest.raises(QuotaUnavailableError):
                await quota.consume("acme", "alice", 1, 100)
            await broadcast.opened("acme", "crm", 30.0)
            assert not await ping(host, 0.5)

        lost = total(
            metrics, "esra.breaker.broadcast.failures", **{"esra.breaker.operation": "openings"}
        )
        async with contextlib.aclosing(broadcast.openings()) as openings:
            # It neither ends nor raises: it keeps trying to connect.
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.5):
                    await anext(openings)
        assert (
            total(
                metrics,
                "esra.breaker.broadcast.failures",
                **{"esra.breaker.operation": "openings"},
            )
            > lost
        )


async def test_a_redis_that_never_answers_does_not_hold_anything_up() -> None:
    connections: list[asyncio.StreamWriter] = []

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        with contextlib.suppress(ConnectionError):
            while await reader.read(4096):
                pass
        writer.close()

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    clock = FakeClock(NOON)
    try:
        async with clients(f"redis://127.0.0.1:{port}/0", 1) as (host,):
            async with asyncio.timeout(5):
                assert await RedisCache(host).get("k") is None
                with pytest.raises(QuotaUnavailableError):
                    await RedisQuotaStore(host, clock=clock).consume("acme", "alice", 1, 100)
                await quick_broadcast(host, clock).opened("acme", "crm", 30.0)
                assert not await ping(host, 0.5)
            assert connections  # it did connect: the timeouts, not a refusal, answered
    finally:
        for writer in connections:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_an_outage_is_logged_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock(NOON)
    async with clients(f"redis://127.0.0.1:{free_port()}/0", 1) as (host,):
        cache = RedisCache(host, clock=clock, warning_interval_s=60)
        with caplog.at_level(logging.WARNING, logger="esra.redis"):
            for _ in range(10):
                assert await cache.get("tenant-partition:result:digest") is None
            logged: list[Any] = [r for r in caplog.records if r.name == "esra.redis"]
            assert len(logged) == 1

            clock.advance(61)
            await cache.set("tenant-partition:result:digest", b"v", 30)

    logged = [r.getMessage() for r in caplog.records if r.name == "esra.redis"]
    assert len(logged) == 2
    assert "get failed (ConnectionError)" in logged[0]
    assert "set failed (ConnectionError)" in logged[1]
    assert "9 more failures" in logged[1]
    assert not any("partition" in message for message in logged)  # no key, no driver text
