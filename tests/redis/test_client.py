"""open_redis and ping: bounded waits, a bounded pool, no decoding, readiness that never raises."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import BlockingConnectionPool
from redis.exceptions import ConnectionError as RedisConnectionError

from esra.redis import open_redis, ping

pytestmark = [pytest.mark.redis, pytest.mark.integration]


async def test_the_client_is_bounded_as_asked(redis_url: str) -> None:
    client = open_redis(redis_url, socket_timeout_s=0.7, connect_timeout_s=0.3, max_connections=5)
    try:
        pool = client.connection_pool
        assert isinstance(pool, BlockingConnectionPool)
        assert pool.max_connections == 5
        assert pool.connection_kwargs["socket_timeout"] == 0.7
        assert pool.connection_kwargs["socket_connect_timeout"] == 0.3
        assert not pool.connection_kwargs.get("decode_responses", False)
        assert await ping(client, 1.0)
    finally:
        await client.aclose()


async def test_a_full_pool_makes_a_caller_wait_only_so_long(redis_url: str) -> None:
    client = open_redis(redis_url, max_connections=1, pool_timeout_s=0.2)
    pubsub = client.pubsub()
    try:
        await pubsub.subscribe("esra-test:pool-holder")  # holds the only connection
        async with asyncio.timeout(5):
            with pytest.raises(RedisConnectionError):
                await client.get("esra-test:anything")
            assert not await ping(client, 1.0)
    finally:
        # redis 8.1 leaves PubSub.aclose unannotated, 8.2 annotates it: both are supported.
        await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]
        await client.aclose()


@pytest.mark.parametrize(
    "options",
    [
        {"socket_timeout_s": 0},
        {"connect_timeout_s": -1},
        {"pool_timeout_s": 0},
        {"max_connections": 0},
        {"retries": -1},
    ],
)
def test_unbounded_options_are_refused(options: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must"):
        open_redis("redis://127.0.0.1:6379/0", **options)  # type: ignore[arg-type]


def test_a_url_redis_py_cannot_use_is_refused() -> None:
    with pytest.raises(ValueError, match="scheme"):
        open_redis("http://127.0.0.1:6379/0")
