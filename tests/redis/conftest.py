"""Shared helpers for the Redis tests: the shared server, private key space, private servers.

The live tests talk to the Redis named by ``ESRA_TEST_REDIS_URL`` (default
``redis://127.0.0.1:6379/0``, the one this machine and CI run). Locally an unreachable server
skips them; under ``CI=true`` it fails them. Each test works under its own key prefix and
channel, deleted afterwards, so tests (and suites) can share the server.

The failure tests need a Redis they can kill and bring back: ``RedisProcess`` runs a private
``redis-server`` on a free port, keeping nothing on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest
import redis
from redis.asyncio import Redis

from esra.redis import open_redis
from tests._redis import REDIS_SERVER, RedisProcess, free_port

URL_VARIABLE = "ESRA_TEST_REDIS_URL"
DEFAULT_URL = "redis://127.0.0.1:6379/0"


def unreachable(reason: str) -> None:
    """Skip the test, or fail it under ``CI=true``, where this Redis always runs."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{URL_VARIABLE}: {reason} (CI=true requires this server)")
    pytest.skip(f"{URL_VARIABLE}: {reason}")


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The shared test server's URL, after checking it answers."""
    url = os.environ.get(URL_VARIABLE, "").strip() or DEFAULT_URL
    try:
        with redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2) as probe:
            probe.ping()
    except (redis.RedisError, OSError) as exc:
        unreachable(f"cannot connect ({type(exc).__name__})")
    return url


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[Redis]:
    """A client as a host opens it; closed after the test."""
    opened = open_redis(redis_url)
    yield opened
    await opened.aclose()


@pytest.fixture
async def other_client(redis_url: str) -> AsyncIterator[Redis]:
    """A second, separate client: another host on the same Redis."""
    opened = open_redis(redis_url)
    yield opened
    await opened.aclose()


@pytest.fixture
async def namespace(client: Redis) -> AsyncIterator[str]:
    """A key prefix (also usable as a channel name) of this test's own; its keys are deleted."""
    prefix = f"esra-test:{uuid.uuid4().hex[:12]}:"
    yield prefix
    keys = [key async for key in client.scan_iter(match=prefix + "*", count=500)]
    if keys:
        await client.delete(*keys)


async def eventually(check: Callable[[], Awaitable[bool]], *, within_s: float = 5.0) -> None:
    """Poll ``check`` until it holds; fail (by timeout) if it does not within ``within_s``."""
    async with asyncio.timeout(within_s):
        while not await check():
            await asyncio.sleep(0.02)


@pytest.fixture
def redis_process() -> Iterator[RedisProcess]:
    """A private, started ``redis-server``; killed after the test."""
    if not os.access(REDIS_SERVER, os.X_OK):
        unreachable(f"{REDIS_SERVER} is not installed")
    server = RedisProcess(free_port())
    server.start()
    try:
        yield server
    finally:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            server.kill()
