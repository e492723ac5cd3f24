"""Two hosts on one PostgreSQL configuration schema: a publication on one is served by the other.

Each "host" is a ``PostgresConfigStore`` with its own connection pool, a
``DurableConfigRepository``, ``OpenedProviders`` and a ``ConfigFollower`` (the harness of
``tests/core/test_live_config.py``); the providers are the in-memory engine, since what is
under test is the configuration crossing hosts through the database. Nothing here waits on a
wall-clock duration: host B's follower is driven by ``sync()``, or its ``run`` loop is
watched until the provider appears (with a generous timeout as a safety net only).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import psycopg
import pytest
from psycopg import sql

from esra.core._live_config import ConfigFollower
from esra.postgres._config_listener import ConfigPublicationListener
from esra.postgres._config_store import PostgresConfigStore
from tests.core.factories import TENANT
from tests.core.test_live_config import Host, engine, publish, request_for, sources

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

OpenHost = Callable[[], Awaitable[PostgresConfigStore]]


@pytest.fixture
def live_schema() -> str:
    """The test's own configuration schema (created by the first store opened)."""
    return f"esra_test_live_{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def open_store(pg_dsn: str, live_schema: str) -> AsyncIterator[OpenHost]:
    """Stores over one fresh configuration schema, each with its own pool (one per host)."""
    schema = live_schema
    stores: list[PostgresConfigStore] = []

    async def open_one() -> PostgresConfigStore:
        store = await PostgresConfigStore.open(pg_dsn, schema=schema, max_size=2)
        stores.append(store)
        return store

    yield open_one
    for store in stores:
        await store.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


async def test_a_publication_on_host_a_is_served_by_host_b_after_its_next_sync(
    open_store: OpenHost,
) -> None:
    shared = engine()
    a = Host(await open_store(), shared)
    b = Host(await open_store(), shared)
    assert await b.follower.sync() == frozenset()
    await publish(a.store, a, sources(("s-1", "db-1")))
    # Host A serves it before publish returned; host B once it synced.
    assert await a.titles() == {"From db-1"}
    assert b.provider("s-1") is None
    assert await b.follower.sync() == frozenset({TENANT})
    assert await b.titles() == {"From db-1"}

    await publish(a.store, a, sources(("s-1", "db-1"), ("s-2", "db-2")))
    assert await b.titles() == {"From db-1"}
    assert await b.follower.sync() == frozenset({TENANT})
    assert await b.titles() == {"From db-1", "From db-2"}

    retired = b.provider("s-2")
    await publish(a.store, a, sources(("s-1", "db-1")))
    await a.follower.wait_closed()
    assert await b.follower.sync() == frozenset({TENANT})
    assert b.provider("s-2") is None
    # One close on each host: A's provider of s-2 and B's, each exactly once.
    assert shared.closes_of(retired) == 1
    assert len(shared.closed) == 2
    assert await b.titles() == {"From db-1"}
    assert await b.follower.sync() == frozenset()


async def test_host_b_follower_loop_serves_host_a_publication(open_store: OpenHost) -> None:
    shared = engine()
    a = Host(await open_store(), shared)
    b = Host(await open_store(), shared)
    b.follower = ConfigFollower(b.repository, b.providers, request_for=request_for, poll_s=0.2)
    stop = asyncio.Event()
    loop = asyncio.create_task(b.follower.run(stop))
    try:
        await publish(a.store, a, sources(("s-1", "db-1"), ("s-2", "db-2")))
        async with asyncio.timeout(60):  # a safety net: the loop polls every 0.2 s
            while b.provider("s-2") is None:
                await asyncio.sleep(0.05)
        assert await b.titles() == {"From db-1", "From db-2"}
    finally:
        stop.set()
        await asyncio.wait_for(loop, timeout=60)
    assert loop.exception() is None


async def test_a_notification_makes_host_b_sync_without_waiting_for_its_poll(
    pg_dsn: str, live_schema: str, open_store: OpenHost
) -> None:
    shared = engine()
    a_store = await open_store()
    a = Host(a_store, shared)
    b = Host(await open_store(), shared)
    # An hour between polls: only the notification can make B serve it within the test.
    b.follower = ConfigFollower(b.repository, b.providers, request_for=request_for, poll_s=3600)
    listener = ConfigPublicationListener(pg_dsn, b.follower.wake, schema=live_schema, retry_s=0.1)
    stop = asyncio.Event()
    tasks = [asyncio.create_task(b.follower.run(stop)), asyncio.create_task(listener.run(stop))]
    try:
        async with asyncio.timeout(60):  # safety net only
            await listener.listening.wait()
            await publish(a.store, a, sources(("s-1", "db-1")))
            while b.provider("s-1") is None:
                await asyncio.sleep(0.05)
        assert await b.titles() == {"From db-1"}
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)
